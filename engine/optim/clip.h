// clip.h: global-norm gradient clipping as torch.nn.utils.clip_grad_norm_ does it:
//   total = sqrt(sum over all gradients of g^2)
//   coefficient = min(max_norm / (total + 1e-6), 1);   g *= coefficient
// cpu: one pass to sum, one to scale. CUDA: a fused pair of launches — per-block
// partial sums, then a scale kernel whose blocks each finish the sum — with no host
// synchronisation; the norm stays on the device unless asked for.
#pragma once

#include <cstddef>
#include <functional>

namespace ember::optim {

// Returns the total norm before clipping.
double clip_grad_norm_cpu(float* grads, std::size_t count, double max_norm);

// Sharded gradients (ZeRO-1: each rank holds its shard's final gradients): the norm is
// over every rank's shard. `sum_over_ranks` receives this shard's sum of squares in
// place and leaves the sum over all ranks there (a collective). Scales only this
// shard. Returns the total norm.
using SumOverRanks = std::function<void(float* values, std::size_t count)>;
double clip_grad_norm_sharded_cpu(float* shard_grads, std::size_t count, double max_norm,
                                  const SumOverRanks& sum_over_ranks);

// Device workspace for clip_grad_norm_cuda: cudaMalloc'd once, reused every step.
class GradientClipper {
  public:
    explicit GradientClipper(std::size_t count);  // throws ember::CudaError without a device
    ~GradientClipper();
    GradientClipper(const GradientClipper&) = delete;
    GradientClipper& operator=(const GradientClipper&) = delete;

    // Two kernel launches on `stream`; the total norm lands in device_total_norm().
    void clip(float* grads, float max_norm, void* stream = nullptr);
    // Sharded form (see clip_grad_norm_sharded_cpu): `count` <= the constructor's count;
    // `sum_over_ranks` gets a device pointer to this shard's sum of squares (one float),
    // ordered on `stream`, and must leave the sum over ranks there (NCCL all-reduce).
    // Three launches around it, no host synchronization.
    void clip_sharded(float* shard_grads, std::size_t count, float max_norm, void* stream,
                      const SumOverRanks& sum_over_ranks);
    const float* device_total_norm() const { return total_norm_; }
    float read_total_norm() const;  // copies it to the host (synchronises)
    int launches_per_clip() const { return 2; }

  private:
    std::size_t count_ = 0;
    int blocks_ = 0;
    double* partials_ = nullptr;
    float* total_norm_ = nullptr;
    float* shard_sum_ = nullptr;  // this shard's, then every rank's, sum of squares
};

}  // namespace ember::optim
