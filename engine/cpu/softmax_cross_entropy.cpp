// softmax_cross_entropy.cpp: CPU fused softmax + cross-entropy, one row at a time
// in double (max-subtracted log-sum-exp).
#include "engine/cpu/cpu_util.h"
#include "engine/core/cuda_check.h"
#include "engine/ops/softmax_cross_entropy.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <vector>

namespace ember::ops {

void softmax_cross_entropy_cpu(const Tensor& logits, const Tensor& targets, const Tensor& losses, const Tensor& dlogits,
                               float grad_scale) {
    const char* op = "softmax_cross_entropy_cpu";
    cpu::check_float_cpu(logits, op, "logits");
    cpu::check_float_cpu(losses, op, "losses");
    const int64_t rows = logits.rows(), classes = logits.cols();
    require(
        targets.defined() && targets.dtype == DType::i32 && targets.device == Device::cpu && targets.numel() == rows,
        op, "targets must be a cpu i32 tensor with one entry per row");
    require(losses.numel() == rows, op, "losses must have one entry per row");
    if (dlogits.defined()) {
        cpu::check_float_cpu(dlogits, op, "dlogits");
        require(dlogits.numel() == logits.numel(), op, "dlogits must be shaped like logits");
    }
    for (int64_t r = 0; r < rows; ++r) {
        const int32_t target = targets.as<int32_t>()[r];
        require(target >= 0 && target < classes, op,
                "target " + std::to_string(target) + " of row " + std::to_string(r) + " is outside [0, " +
                    std::to_string(classes) + ")");
        const int64_t base = r * classes;
        double max_value = cpu::get(logits, base);
        for (int64_t v = 1; v < classes; ++v) max_value = std::max(max_value, cpu::get(logits, base + v));
        double sum = 0.0;
        for (int64_t v = 0; v < classes; ++v) sum += std::exp(cpu::get(logits, base + v) - max_value);
        const double log_sum = std::log(sum) + max_value;
        cpu::set(losses, r, log_sum - cpu::get(logits, base + target));
        if (!dlogits.defined()) continue;
        for (int64_t v = 0; v < classes; ++v) {
            double p = std::exp(cpu::get(logits, base + v) - log_sum);
            cpu::set(dlogits, base + v, grad_scale * (p - (v == target ? 1.0 : 0.0)));
        }
    }
}

double mean_loss(const Tensor& losses) {
    require(losses.defined() && losses.dtype == DType::f32, "mean_loss", "losses must be f32");
    const int64_t n = losses.numel();
    if (n == 0) return 0.0;
    std::vector<float> host(static_cast<std::size_t>(n));
    if (losses.device == Device::cuda)
        EMBER_CUDA_CHECK(cudaMemcpy(host.data(), losses.data, losses.bytes(), cudaMemcpyDeviceToHost));
    else
        for (int64_t i = 0; i < n; ++i) host[i] = losses.as<float>()[i];
    double sum = 0.0;
    for (float v : host) sum += v;
    return sum / double(n);
}

}  // namespace ember::ops
