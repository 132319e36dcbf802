// optimizer.h: optimizers over one flat fp32 parameter buffer and one flat gradient
// buffer of the same length, cut into segments (one per tensor). Three backends:
//   cpu              the reference: plain loops over host memory
//   cuda_fused       one multi-tensor launch for all segments (plus one reduction
//                    launch for the optimizers that need per-segment norms)
//   cuda_per_tensor  one launch per segment: the unfused baseline
// Optimizer state lives in flat buffers of the same length, allocated once at
// construction (host_allocator() blocks for cpu, device_allocator() for the CUDA backends).
//
// State buffers per optimizer (state_buffer(i)):
//   sgd       0 momentum buffer (when momentum != 0)
//   adagrad   0 sum of squared gradients
//   adadelta  0 square average, 1 accumulated delta
//   rmsprop   0 square average, 1 gradient average (centered), 2 momentum buffer
//   adam(w)   0 exp_avg, 1 exp_avg_sq, 2 max_exp_avg_sq (amsgrad)
//   nadam     0 exp_avg, 1 exp_avg_sq
//   adamax    0 exp_avg, 1 exp_inf
//   lamb      0 exp_avg, 1 exp_avg_sq, 2 the update between its two phases
//   lars      0 momentum buffer
//   novograd  0 exp_avg; plus one norm per segment (segment_state())
// Update rules and defaults: docs/optimizers.md.
#pragma once

#include "engine/optim/hyperparameters.h"
#include "engine/optim/update_rules.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ember::optim {

// One tensor inside the flat buffers.
struct ParameterSegment {
    std::size_t offset = 0;
    std::size_t length = 0;
    uint32_t flags = 0;  // kSegmentNoWeightDecay for biases and norm weights
    std::string name;    // for error messages
};

// Throws std::invalid_argument naming the segment when segments overlap, are empty or
// run past parameter_count. Returns parameter_count = max(offset + length).
std::size_t validate_segments(const std::vector<ParameterSegment>& segments);

enum class OptimizerBackend { cpu, cuda_fused, cuda_per_tensor };
OptimizerBackend parse_optimizer_backend(std::string_view name);  // throws on unknown
const char* optimizer_backend_name(OptimizerBackend backend);

// Precision of an optional low-precision parameter copy refreshed after the update
// (AMP: fp32 master weights, fp16/bf16 compute weights).
enum class LowPrecision { none, fp16, bf16 };

struct StepOptions {
    // Gradients are multiplied by this before use: 1 / loss_scale unscales fp16
    // gradients inside the update instead of in a separate pass.
    float grad_scale = 1.0f;
    // When non-null and *skip_flag != 0 the step changes neither parameters nor state
    // (loss-scaler overflow). Device memory for the CUDA backends, host memory for cpu.
    // The step counter is host-side and advances anyway: a caller that skipped calls
    // rewind_step() once it knows (a loss scaler reads the flag to adjust its scale).
    const int32_t* skip_flag = nullptr;
    // Optional low-precision copy of the parameters (same layout), rewritten after the
    // update: uint16_t elements, fp16 or bf16 rounded to nearest even.
    void* low_precision_params = nullptr;
    LowPrecision low_precision = LowPrecision::none;
    void* stream = nullptr;  // cudaStream_t for the CUDA backends; 0 = default stream
};

// Everything an optimizer carries between steps, in host memory: what a checkpoint
// saves. buffers[i] has parameter_count() elements (state_buffer(i)); segment_norms
// is NovoGrad's per-segment second moment (empty for the others).
struct OptimizerState {
    int64_t step_count = 0;
    double nadam_mu_product = 1.0;
    std::vector<std::vector<float>> buffers;
    std::vector<float> segment_norms;
};

class Optimizer {
  public:
    virtual ~Optimizer() = default;
    Optimizer(const Optimizer&) = delete;
    Optimizer& operator=(const Optimizer&) = delete;

    // One update. params/grads: host pointers for cpu, device pointers otherwise.
    virtual void step(float* params, const float* grads, const StepOptions& options = {}) = 0;

    // Closure form (torch.optim style): the closure recomputes the loss and writes the
    // gradients into `grads`; returns the loss. Elementwise optimizers call it once and
    // step; L-BFGS calls it as often as its line search needs. Returns the first loss.
    using Closure = std::function<double()>;
    virtual double step(float* params, float* grads, const Closure& closure, const StepOptions& options = {});

    // Forgets the last step (see StepOptions::skip_flag): bias corrections resume from
    // the previous count. One level only.
    virtual void rewind_step();

    const std::string& name() const { return name_; }
    OptimizerKind kind() const { return kind_; }
    OptimizerBackend backend() const { return backend_; }
    double lr() const { return lr_; }
    void set_lr(double lr) { lr_ = lr; }  // what a schedule calls each step
    int64_t step_count() const { return step_count_; }
    std::size_t parameter_count() const { return parameter_count_; }
    const std::vector<ParameterSegment>& segments() const { return segments_; }
    // Kernel launches made by the last step (0 for cpu): what fusing saves.
    int last_step_launches() const { return last_step_launches_; }

    // Flat state buffers (see the table above); host or device memory by backend.
    virtual int state_buffer_count() const { return 0; }
    virtual const float* state_buffer(int index) const { return nullptr; }

    // Checkpointing: a host copy of the state, and its restore (sizes must match; throws
    // std::invalid_argument naming what differs). L-BFGS throws std::logic_error: its
    // history is not exported.
    virtual OptimizerState export_state() const;
    virtual void import_state(const OptimizerState& state);

  protected:
    Optimizer(std::string name, OptimizerKind kind, OptimizerBackend backend, double lr,
              std::vector<ParameterSegment> segments);

    std::string name_;
    OptimizerKind kind_;
    OptimizerBackend backend_;
    double lr_;
    int64_t step_count_ = 0;
    std::size_t parameter_count_ = 0;
    std::vector<ParameterSegment> segments_;
    int last_step_launches_ = 0;
};

// Builds an optimizer by name: "sgd", "adagrad", "adadelta", "rmsprop", "adam",
// "adamw", "nadam", "adamax", "lamb", "lars", "novograd", "lbfgs". Hyper-parameters
// not given take torch.optim's (Apex's for lamb/novograd) defaults; an unknown name,
// unknown hyper-parameter or invalid value throws std::invalid_argument naming it.
// lbfgs supports the cpu backend only.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const Hyperparameters& hyperparameters,
                                          std::vector<ParameterSegment> segments, OptimizerBackend backend);

// The names make_optimizer accepts, in a stable order.
const std::vector<std::string>& optimizer_names();

}  // namespace ember::optim
