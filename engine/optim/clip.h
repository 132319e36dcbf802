// clip.h: global-norm gradient clipping as torch.nn.utils.clip_grad_norm_ does it:
//   total = sqrt(sum over all gradients of g^2)
//   coefficient = min(max_norm / (total + 1e-6), 1);   g *= coefficient
// cpu: one pass to sum, one to scale. CUDA: a fused pair of launches — per-block
// partial sums, then a scale kernel whose blocks each finish the sum — with no host
// synchronisation; the norm stays on the device unless asked for.
#pragma once

#include <cstddef>

namespace ember::optim {

// Returns the total norm before clipping.
double clip_grad_norm_cpu(float* grads, std::size_t count, double max_norm);

// Device workspace for clip_grad_norm_cuda: cudaMalloc'd once, reused every step.
class GradientClipper {
public:
    explicit GradientClipper(std::size_t count);  // throws ember::CudaError without a device
    ~GradientClipper();
    GradientClipper(const GradientClipper&) = delete;
    GradientClipper& operator=(const GradientClipper&) = delete;

    // Two kernel launches on `stream`; the total norm lands in device_total_norm().
    void clip(float* grads, float max_norm, void* stream = nullptr);
    const float* device_total_norm() const { return total_norm_; }
    float read_total_norm() const;  // copies it to the host (synchronises)
    int launches_per_clip() const { return 2; }

private:
    std::size_t count_ = 0;
    int blocks_ = 0;
    double* partials_ = nullptr;
    float* total_norm_ = nullptr;
};

}  // namespace ember::optim
