// loss_scaler.h: dynamic loss scaling for fp16 training, with the policy of
// torch.cuda.amp.GradScaler:
//   start at 65536; the loss gradient is multiplied by scale() so small fp16
//   gradients do not flush to zero; the optimizer divides by it inside its update
//   (StepOptions::grad_scale = 1/scale, no separate unscale pass);
//   a step whose gradients hold an inf/NaN is skipped and the scale halved;
//   after growth_interval clean steps in a row the scale doubles.
// Counters (scale, growth tracker, skipped steps) are exposed for logging and saved in
// checkpoints. The inf/NaN check: a plain loop on cpu; one kernel on cuda that writes
// a device flag the optimizer reads as its skip flag (no host round trip in the step).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::amp {

struct LossScalerOptions {
    double initial_scale = 65536.0;
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int64_t growth_interval = 2000;
};

struct LossScalerState {
    double scale = 65536.0;
    int64_t growth_tracker = 0;  // clean steps since the last change
    int64_t skipped_steps = 0;   // total steps skipped for inf/NaN
    int64_t growth_count = 0;    // times the scale grew
};

class DynamicLossScaler {
  public:
    explicit DynamicLossScaler(const LossScalerOptions& options = {});

    double scale() const { return state_.scale; }
    int64_t growth_tracker() const { return state_.growth_tracker; }
    int64_t skipped_steps() const { return state_.skipped_steps; }
    const LossScalerState& state() const { return state_; }
    void set_state(const LossScalerState& state) { state_ = state; }
    const LossScalerOptions& options() const { return options_; }

    // Records one step's outcome; returns true when the step was applied (no overflow).
    bool update(bool found_inf);

  private:
    LossScalerOptions options_;
    LossScalerState state_;
};

// True when all n values are finite.
bool all_finite_cpu(const float* values, std::size_t n);

// Device-side inf/NaN detection over a flat gradient buffer.
class DeviceOverflowCheck {
  public:
    DeviceOverflowCheck();  // cudaMalloc of one int32 flag; throws ember::CudaError without a device
    ~DeviceOverflowCheck();
    DeviceOverflowCheck(const DeviceOverflowCheck&) = delete;
    DeviceOverflowCheck& operator=(const DeviceOverflowCheck&) = delete;

    // Clears the flag and sets it to 1 if any value is inf/NaN (two launches on stream).
    void check(const float* values, std::size_t n, void* stream);
    const int32_t* device_flag() const { return flag_; }
    bool read_flag(void* stream) const;  // synchronizes the stream

  private:
    int32_t* flag_ = nullptr;
};

}  // namespace ember::amp
