// sharded_optimizer.cpp: ZeRO-1 update of one shard and the parameter all-gather
// (sharded_optimizer.h).
#include "engine/distributed/sharded_optimizer.h"

#include "engine/distributed/collective_wait.h"

#include "engine/core/cuda_check.h"
#include "engine/core/nvtx.h"
#include "engine/distributed/data_parallel.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace ember::distributed {

namespace {
std::vector<optim::ParameterSegment> clip_to_shard(const std::vector<optim::ParameterSegment>& segments,
                                                   std::size_t begin, std::size_t end) {
    std::vector<optim::ParameterSegment> clipped;
    for (const optim::ParameterSegment& segment : segments) {
        const std::size_t first = std::max(begin, segment.offset);
        const std::size_t last = std::min(end, segment.offset + segment.length);
        if (first >= last) continue;
        optim::ParameterSegment part = segment;
        part.offset = first - begin;
        part.length = last - first;
        clipped.push_back(part);
    }
    return clipped;
}

optim::OptimizerKind kind_of(const std::string& name) {
    static const char* names[] = {"sgd",   "adagrad", "adadelta", "rmsprop", "adam",     "adamw",
                                  "nadam", "adamax",  "lamb",     "lars",    "novograd", "lbfgs"};
    for (int i = 0; i < 12; ++i)
        if (name == names[i]) return static_cast<optim::OptimizerKind>(i);
    throw std::invalid_argument("zero-1: unknown optimizer '" + name + "'");
}

double lr_of(const optim::Hyperparameters& hyperparameters) {
    auto it = hyperparameters.find("lr");
    return it == hyperparameters.end() ? 0.0 : it->second;
}
}  // namespace

ShardedOptimizer::ShardedOptimizer(const std::string& name, const optim::Hyperparameters& hyperparameters,
                                   const std::vector<optim::ParameterSegment>& segments, std::size_t flat_length,
                                   optim::OptimizerBackend backend, Communicator& communicator)
    : optim::Optimizer(name, kind_of(name), backend, lr_of(hyperparameters), segments),
      communicator_(communicator),
      flat_length_(flat_length) {
    const optim::OptimizerKind kind = kind_of(name);
    if (kind == optim::OptimizerKind::lamb || kind == optim::OptimizerKind::lars ||
        kind == optim::OptimizerKind::novograd || kind == optim::OptimizerKind::lbfgs)
        throw std::invalid_argument("zero-1: " + name +
                                    " needs whole tensors (per-tensor norms or a line search); "
                                    "use an elementwise optimizer (sgd, adam, adamw, ...)");
    if (flat_length < parameter_count_)
        throw std::invalid_argument("zero-1: flat length " + std::to_string(flat_length) +
                                    " is shorter than the segments");
    const Shard shard = shard_of(flat_length, communicator.rank(), communicator.world_size());
    shard_begin_ = shard.begin;
    shard_end_ = shard.end;
    shard_size_ = shard.padded_size;
    std::vector<optim::ParameterSegment> own = clip_to_shard(segments, shard_begin_, shard_end_);
    if (!own.empty()) inner_ = optim::make_optimizer(name, hyperparameters, own, backend);
    if (inner_) lr_ = inner_->lr();
    // How many state buffers this kind keeps, known on every rank (a rank whose shard
    // holds no tensor has no inner optimizer to ask).
    const std::vector<optim::ParameterSegment> probe_segment = {{0, 1, 0, "probe"}};
    state_buffer_count_ = optim::make_optimizer(name, hyperparameters, probe_segment, optim::OptimizerBackend::cpu)
                              ->export_state()
                              .buffers.size();
    const Device buffer_backend = backend == optim::OptimizerBackend::cpu ? Device::cpu : Device::cuda;
    gathered_ = nn::FlatBuffer(buffer_backend,
                               shard_size_ * static_cast<std::size_t>(communicator.world_size()) * sizeof(float),
                               "zero-1 gathered parameters");
}

ShardedOptimizer::~ShardedOptimizer() = default;

void ShardedOptimizer::step(float* params, const float* grads, const optim::StepOptions& options) {
    ++step_count_;
    if (inner_) {
        inner_->set_lr(lr_);
        // The low-precision copy (AMP) has the parameters' layout: this shard's part of it.
        optim::StepOptions shard_options = options;
        if (options.low_precision_params)
            shard_options.low_precision_params = static_cast<uint16_t*>(options.low_precision_params) + shard_begin_;
        inner_->step(params + shard_begin_, grads + shard_begin_, shard_options);
    }
    // All-gather: every rank contributes its updated shard (padded to equal size).
    const bool cuda = backend_ != optim::OptimizerBackend::cpu;
    cudaStream_t stream = static_cast<cudaStream_t>(options.stream);
    float* gathered = static_cast<float*>(gathered_.data());
    float* own_slot = gathered + static_cast<std::size_t>(communicator_.rank()) * shard_size_;
    const std::size_t own_bytes = (shard_end_ - shard_begin_) * sizeof(float);
    if (own_bytes > 0) {
        if (cuda)
            EMBER_CUDA_CHECK(
                cudaMemcpyAsync(own_slot, params + shard_begin_, own_bytes, cudaMemcpyDeviceToDevice, stream));
        else
            std::memcpy(own_slot, params + shard_begin_, own_bytes);
    }
    std::unique_ptr<PendingCollective> pending;
    {
        nvtx::ScopedRange range("allgather/parameters", nvtx::Category::communication, gathered_.bytes());
        pending = communicator_.all_gather_async(own_slot, gathered, shard_size_, options.stream);
    }
    {
        CollectiveWait wait(wait_seconds_);
        pending->wait();
    }
    if (cuda)
        EMBER_CUDA_CHECK(
            cudaMemcpyAsync(params, gathered, flat_length_ * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    else
        std::memcpy(params, gathered, flat_length_ * sizeof(float));
    if (options.low_precision_params) {
        // Each rank's shard of the 16-bit copy to every rank: one broadcast per rank
        // (the float all-gather cannot carry 16-bit shards of odd length).
        nvtx::ScopedRange range("allgather/low_precision_parameters", nvtx::Category::communication,
                                flat_length_ * sizeof(uint16_t));
        const int world = communicator_.world_size();
        for (int rank = 0; rank < world; ++rank) {
            const Shard shard = shard_of(flat_length_, rank, world);
            if (shard.end > shard.begin)
                communicator_.broadcast(static_cast<uint16_t*>(options.low_precision_params) + shard.begin,
                                        (shard.end - shard.begin) * sizeof(uint16_t), rank, options.stream);
        }
    }
}

void ShardedOptimizer::rewind_step() {
    optim::Optimizer::rewind_step();
    if (inner_) inner_->rewind_step();
}

void ShardedOptimizer::gather_state(void* stream) {
    const bool cuda = backend_ != optim::OptimizerBackend::cpu;
    cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
    optim::OptimizerState own;
    if (inner_) own = inner_->export_state();
    optim::OptimizerState full;
    full.step_count = step_count_;
    full.nadam_mu_product = inner_ ? own.nadam_mu_product : 1.0;
    full.buffers.resize(state_buffer_count_);
    float* gathered = static_cast<float*>(gathered_.data());
    float* own_slot = gathered + static_cast<std::size_t>(communicator_.rank()) * shard_size_;
    const std::size_t world = static_cast<std::size_t>(communicator_.world_size());
    std::vector<float> padded(shard_size_);
    std::vector<float> everything(shard_size_ * world);
    for (std::size_t buffer = 0; buffer < state_buffer_count_; ++buffer) {
        std::fill(padded.begin(), padded.end(), 0.0f);
        if (inner_) {
            const std::vector<float>& mine = own.buffers.at(buffer);
            std::copy(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(std::min(mine.size(), shard_size_)),
                      padded.begin());
        }
        // The shards sit in rank order, each shard_size_ long: gathered index = flat index.
        if (cuda) {
            EMBER_CUDA_CHECK(cudaMemcpyAsync(own_slot, padded.data(), shard_size_ * sizeof(float),
                                             cudaMemcpyHostToDevice, cuda_stream));
            EMBER_CUDA_CHECK(cudaStreamSynchronize(cuda_stream));
        } else {
            std::memcpy(own_slot, padded.data(), shard_size_ * sizeof(float));
        }
        {
            nvtx::ScopedRange range("allgather/optimizer_state", nvtx::Category::communication, gathered_.bytes());
            communicator_.all_gather_async(own_slot, gathered, shard_size_, stream)->wait();
        }
        if (cuda) {
            EMBER_CUDA_CHECK(cudaMemcpyAsync(everything.data(), gathered, everything.size() * sizeof(float),
                                             cudaMemcpyDeviceToHost, cuda_stream));
            EMBER_CUDA_CHECK(cudaStreamSynchronize(cuda_stream));
        } else {
            std::memcpy(everything.data(), gathered, everything.size() * sizeof(float));
        }
        full.buffers[buffer].assign(everything.begin(),
                                    everything.begin() + static_cast<std::ptrdiff_t>(parameter_count_));
    }
    gathered_state_ = std::move(full);
    gathered_at_step_ = step_count_;
}

optim::OptimizerState ShardedOptimizer::export_state() const {
    if (gathered_at_step_ != step_count_)
        throw std::logic_error(
            "zero-1: the optimizer state is sharded across ranks; call gather_state() on every "
            "rank before exporting it");
    return gathered_state_;
}

void ShardedOptimizer::import_state(const optim::OptimizerState& state) {
    if (state.buffers.size() != state_buffer_count_)
        throw std::invalid_argument("zero-1 " + name_ + ": import_state: " + std::to_string(state.buffers.size()) +
                                    " state buffers given, this optimizer has " + std::to_string(state_buffer_count_));
    for (const std::vector<float>& buffer : state.buffers)
        if (buffer.size() != parameter_count_)
            throw std::invalid_argument("zero-1 " + name_ + ": import_state: a state buffer of " +
                                        std::to_string(buffer.size()) + " values for " +
                                        std::to_string(parameter_count_) + " parameters");
    if (!state.segment_norms.empty())
        throw std::invalid_argument("zero-1 " + name_ + ": import_state: per-segment norms given (a NovoGrad state)");
    if (inner_) {
        optim::OptimizerState slice;
        slice.step_count = state.step_count;
        slice.nadam_mu_product = state.nadam_mu_product;
        const std::size_t length = inner_->parameter_count();
        for (const std::vector<float>& buffer : state.buffers) {
            const auto begin = buffer.begin() + static_cast<std::ptrdiff_t>(shard_begin_);
            slice.buffers.emplace_back(begin, begin + static_cast<std::ptrdiff_t>(length));
        }
        inner_->import_state(slice);
    }
    step_count_ = state.step_count;
    gathered_state_ = state;
    gathered_at_step_ = step_count_;
}

}  // namespace ember::distributed
