// implementation.h: the CPU backend's two implementations of its hot ops.
//
// The CPU twins (engine/cpu/) are the reference every other backend is tested against:
// plain, obviously correct loops. For training speed on a CPU, the ops that dominate a
// step also have a fast path: oneDNN primitives (convolution, BatchNorm, pooling) and
// threaded, vectorized loops, all on one OpenMP thread team. ops::<op>_cpu runs the fast
// path for f32 tensors and the reference for every other dtype; the plain loops stay
// callable as ops::<op>_reference_cpu, and the whole backend switches to them with
// set_op_implementation(reference) or EMBER_CPU_REFERENCE=1 in the environment (read once,
// at the first op). tests/engine/ops/cpu_fast_path_test.cpp compares the two.
//
// Threads: OpenBLAS (GEMM) and OpenMP (oneDNN and the threaded loops) are two pools. The
// fast paths size their OpenMP team to OpenBLAS's thread count on every call, so the one
// knob `ember train` turns (openblas_set_num_threads: cores minus loader workers, or
// OPENBLAS_NUM_THREADS) sets both.
#pragma once

#include "engine/ops/batchnorm.h"
#include "engine/ops/conv.h"
#include "engine/ops/gemm.h"
#include "engine/ops/pooling.h"

#include <cstdint>
#include <string>

namespace ember::cpu {

enum class OpImplementation : uint8_t { fast = 0, reference = 1 };

// Process-wide; the default is fast unless EMBER_CPU_REFERENCE=1.
void set_op_implementation(OpImplementation implementation);
OpImplementation op_implementation();

// Sets the implementation for a scope (tests, benchmarks) and restores the previous one.
class ScopedOpImplementation {
  public:
    explicit ScopedOpImplementation(OpImplementation implementation) : previous_(op_implementation()) {
        set_op_implementation(implementation);
    }
    ~ScopedOpImplementation() { set_op_implementation(previous_); }
    ScopedOpImplementation(const ScopedOpImplementation&) = delete;
    ScopedOpImplementation& operator=(const ScopedOpImplementation&) = delete;

  private:
    OpImplementation previous_;
};

// Threads of the fast paths: OpenBLAS's count, which the OpenMP team follows, at most
// the CPUs of this process's affinity mask (mpirun binds ranks to cores).
int compute_threads();
// Sets that count (openblas_set_num_threads; the OpenMP team follows at the next op).
void set_compute_threads(int threads);

// Names the fast paths' JIT kernels for profilers: oneDNN writes each kernel it
// generates, with its address range, to /tmp/perf-PID.map, the convention ember's CPU
// sampler and Linux perf read. Call before the first op. Returns the map's path, or ""
// when oneDNN refused. The caller removes the file once the profile is written.
std::string name_jit_kernels_for_profilers();

}  // namespace ember::cpu

namespace ember::ops {

// The plain loops behind the fast paths (same arguments as the ops::<op>_cpu twins).
void conv2d_forward_reference_cpu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                                  const Conv2dParams& params);
void conv2d_backward_data_reference_cpu(const Tensor& weight, const Tensor& dy, const Tensor& dx,
                                        const Conv2dParams& params, GradWrite write);
void conv2d_backward_filter_reference_cpu(const Tensor& x, const Tensor& dy, const Tensor& dweight,
                                          const Conv2dParams& params, GradWrite write);
void conv2d_backward_bias_reference_cpu(const Tensor& dy, const Tensor& dbias, GradWrite write);
void gemm_reference_cpu(const Tensor& a, const Tensor& b, const Tensor& c, const GemmArgs& args = {});
void batched_gemm_reference_cpu(const Tensor& a, const Tensor& b, const Tensor& c, const BatchedGemmShape& shape);
void bias_backward_reference_cpu(const Tensor& dy, const Tensor& dbias, GradWrite write);

}  // namespace ember::ops
