// parameters.h: every parameter of a model in ONE flat buffer, every gradient in
// another of the same layout, plus (AMP) a low-precision copy of the parameters that
// GEMM/conv read, and a flat buffer of non-trained state (BatchNorm running
// statistics). Layers register named tensors at construction; allocate() lays them out
// as segments (each aligned to 64 elements = 256 bytes, so every view is aligned for
// vector loads and tensor cores) compatible with engine/optim's ParameterSegment, with
// kSegmentNoWeightDecay on biases and norm parameters.
//
// The master dtype is f32 for training; the finite-difference gradient checks build
// the same model with f64 masters (CPU only).
#pragma once

#include "engine/nn/flat_buffer.h"
#include "engine/optim/optimizer.h"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace ember::nn {

// How a tensor is initialized (PyTorch defaults): uniform(-bound, bound) or constant.
struct ParameterInit {
    enum class Kind : uint8_t { uniform, constant } kind = Kind::constant;
    double value = 0.0;  // bound for uniform, the value for constant
    static ParameterInit uniform(double bound) { return {Kind::uniform, bound}; }
    static ParameterInit constant(double value) { return {Kind::constant, value}; }
};

struct ParameterRef {
    int index = -1;
    bool valid() const { return index >= 0; }
};

struct ParameterEntry {
    std::string name;
    int rank = 0;
    int64_t shape[4] = {1, 1, 1, 1};
    std::size_t offset = 0;  // elements, into the flat buffer
    std::size_t length = 0;
    uint32_t flags = 0;
    ParameterInit init;
};

class ParameterStore {
  public:
    // Trained tensors (gradient, optimizer) and non-trained state (running stats).
    ParameterRef add_parameter(const std::string& name, std::initializer_list<int64_t> shape, ParameterInit init,
                               bool no_weight_decay = false);
    ParameterRef add_state(const std::string& name, std::initializer_list<int64_t> shape, ParameterInit init);

    // Lays out and allocates the buffers. low_precision: f16/bf16 for AMP, f32 = none.
    void allocate(Device backend, DType master_dtype, DType low_precision);
    bool allocated() const { return allocated_; }

    // Host-side seeded initialization in registration order, then upload.
    void initialize(uint64_t seed);

    // Views into the buffers.
    Tensor parameter(ParameterRef ref) const;          // master (f32 / f64)
    Tensor compute_parameter(ParameterRef ref) const;  // low-precision copy under AMP, else master
    Tensor gradient(ParameterRef ref) const;           // same dtype as master
    Tensor state(ParameterRef ref) const;              // running statistics (master dtype)

    // Refreshes the low-precision copy from the masters (after init / load; the
    // optimizer refreshes it after every step through StepOptions).
    void refresh_low_precision(void* stream = nullptr);

    std::size_t parameter_count() const { return parameter_count_; }  // sum of lengths
    std::size_t flat_length() const { return flat_length_; }          // incl. alignment gaps
    std::size_t state_length() const { return state_length_; }
    const std::vector<ParameterEntry>& parameters() const { return parameters_; }
    const std::vector<ParameterEntry>& states() const { return states_; }
    std::vector<optim::ParameterSegment> segments() const;
    // FNV-1a over names, shapes, offsets and flags: two models with equal hashes lay
    // their parameters out identically (a checkpoint field).
    uint64_t layout_hash() const;

    Device backend() const { return backend_; }
    DType master_dtype() const { return master_dtype_; }
    DType low_precision_dtype() const { return low_precision_; }
    FlatBuffer& master() { return master_; }
    FlatBuffer& gradients() { return gradients_; }
    FlatBuffer& low_precision() { return low_precision_copy_; }
    FlatBuffer& state_buffer() { return state_; }
    float* master_f32() const;  // throws unless the master dtype is f32
    float* gradients_f32() const;

  private:
    Tensor view(void* base, DType dtype, const ParameterEntry& entry) const;
    std::vector<ParameterEntry> parameters_;
    std::vector<ParameterEntry> states_;
    bool allocated_ = false;
    Device backend_ = Device::cpu;
    DType master_dtype_ = DType::f32;
    DType low_precision_ = DType::f32;
    std::size_t parameter_count_ = 0, flat_length_ = 0, state_length_ = 0;
    FlatBuffer master_, gradients_, low_precision_copy_, state_;
};

// The deterministic generator behind initialization (and anything else seeded in nn):
// splitmix64, so a seed gives the same numbers on every platform.
class SplitMix64 {
  public:
    explicit SplitMix64(uint64_t seed) : state_(seed) {}
    uint64_t next();
    double uniform01() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
    uint64_t state() const { return state_; }

  private:
    uint64_t state_;
};

}  // namespace ember::nn
