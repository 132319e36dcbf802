// sharded_optimizer.h: ZeRO-1 - optimizer state sharded across ranks.
//
// Each rank owns one equal shard of the flat parameter buffer (shard_of in
// data_parallel.h). With DataParallel in reduce_scatter mode the gradients of that
// shard arrive averaged; this optimizer updates only its shard (state buffers of shard
// size: 1/world of the memory) and then all-gathers the parameters so every rank holds
// the full, identical model again. It is an optim::Optimizer, so nn::Trainer drives it
// unchanged.
//
// Only elementwise optimizers shard exactly (a tensor may straddle two shards):
// lamb, lars and novograd (per-tensor norms) and lbfgs are refused. A low-precision
// parameter copy (AMP, StepOptions::low_precision_params) is refreshed for this shard
// by the update and then broadcast shard by shard. Gradient clipping works: nn::Trainer
// clips this rank's shard by the norm over all shards (GradientSynchronizer::
// final_gradients and sum_over_ranks).
//
// Checkpoints: gather_state() (a collective: every rank calls it) assembles the full
// state buffers from the shards, after which export_state() on any rank returns them —
// the same layout and name ("adamw", not a sharded variant) as the unsharded optimizer's
// state, so a checkpoint written under ZeRO-1 resumes without it and vice versa, and
// rank 0 alone writes the file. import_state() takes this rank's slice (no collective).
#pragma once

#include "engine/distributed/communicator.h"
#include "engine/nn/flat_buffer.h"
#include "engine/optim/optimizer.h"

#include <memory>

namespace ember::distributed {

class ShardedOptimizer final : public optim::Optimizer {
  public:
    // segments/flat_length: the model's (ParameterStore::segments(), flat_length()).
    ShardedOptimizer(const std::string& name, const optim::Hyperparameters& hyperparameters,
                     const std::vector<optim::ParameterSegment>& segments, std::size_t flat_length,
                     optim::OptimizerBackend backend, Communicator& communicator);
    ~ShardedOptimizer() override;

    using optim::Optimizer::step;
    void step(float* params, const float* grads, const optim::StepOptions& options = {}) override;
    void rewind_step() override;

    std::size_t shard_begin() const { return shard_begin_; }
    std::size_t shard_end() const { return shard_end_; }
    // The inner optimizer over this rank's shard (null when the shard holds no tensor).
    const optim::Optimizer* shard_optimizer() const { return inner_.get(); }
    // Seconds the host has waited for the parameter all-gathers so far (allreduce/wait).
    double wait_seconds() const { return wait_seconds_; }

    // As many state buffers as the unsharded optimizer (what a checkpoint holds); none
    // is held whole on this rank, so state_buffer() is null.
    int state_buffer_count() const override { return static_cast<int>(state_buffer_count_); }

    // Collective: call on every rank before export_state(). `stream`: the CUDA stream
    // of the communicator's collectives (null for cpu).
    void gather_state(void* stream = nullptr);
    // The state gathered at this step count; throws std::logic_error when
    // gather_state() has not run since the last step.
    optim::OptimizerState export_state() const override;
    void import_state(const optim::OptimizerState& state) override;

  private:
    Communicator& communicator_;
    std::unique_ptr<optim::Optimizer> inner_;
    std::size_t state_buffer_count_ = 0;  // of this optimizer kind (inner_ may be null)
    optim::OptimizerState gathered_state_;
    int64_t gathered_at_step_ = -1;
    std::size_t flat_length_ = 0, shard_begin_ = 0, shard_end_ = 0, shard_size_ = 0;
    nn::FlatBuffer gathered_;  // world * shard_size elements
    double wait_seconds_ = 0;
};

}  // namespace ember::distributed
