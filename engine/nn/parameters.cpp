// parameters.cpp: layout, initialization and views of the flat buffers (parameters.h).
#include "engine/nn/parameters.h"

#include "engine/core/cuda_check.h"
#include "engine/ops/elementwise.h"
#include "engine/optim/update_rules.h"

#include <cuda_runtime_api.h>

#include <stdexcept>

namespace ember::nn {

namespace {
constexpr std::size_t kSegmentAlignment = 64;  // elements: 256 bytes of f32

std::size_t align_up(std::size_t n) {
    return (n + kSegmentAlignment - 1) / kSegmentAlignment * kSegmentAlignment;
}

ParameterEntry make_entry(const std::string& name, std::initializer_list<int64_t> shape, ParameterInit init) {
    ParameterEntry e;
    e.name = name;
    e.init = init;
    e.length = 1;
    if (shape.size() < 1 || shape.size() > 4) throw std::invalid_argument("parameter " + name + ": rank must be 1..4");
    for (int64_t d : shape) {
        if (d <= 0) throw std::invalid_argument("parameter " + name + " has a non-positive dimension");
        e.shape[e.rank++] = d;
        e.length *= static_cast<std::size_t>(d);
    }
    return e;
}

uint64_t fnv1a(uint64_t hash, const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) {
        hash ^= p[i];
        hash *= 1099511628211ull;
    }
    return hash;
}
}  // namespace

uint64_t SplitMix64::next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

ParameterRef ParameterStore::add_parameter(const std::string& name, std::initializer_list<int64_t> shape,
                                           ParameterInit init, bool no_weight_decay) {
    if (allocated_) throw std::logic_error("parameter " + name + " registered after allocate()");
    ParameterEntry e = make_entry(name, shape, init);
    e.flags = no_weight_decay ? optim::kSegmentNoWeightDecay : 0u;
    parameters_.push_back(e);
    parameter_count_ += e.length;
    return ParameterRef{static_cast<int>(parameters_.size()) - 1};
}

ParameterRef ParameterStore::add_state(const std::string& name, std::initializer_list<int64_t> shape,
                                       ParameterInit init) {
    if (allocated_) throw std::logic_error("state " + name + " registered after allocate()");
    states_.push_back(make_entry(name, shape, init));
    return ParameterRef{static_cast<int>(states_.size()) - 1};
}

void ParameterStore::allocate(Device backend, DType master_dtype, DType low_precision) {
    if (allocated_) throw std::logic_error("ParameterStore::allocate called twice");
    if (master_dtype != DType::f32 && master_dtype != DType::f64)
        throw std::invalid_argument(std::string("master parameters must be f32 or f64, not ") +
                                    dtype_name(master_dtype));
    if (master_dtype == DType::f64 && backend != Device::cpu)
        throw std::invalid_argument("f64 parameters exist on the cpu backend only (gradient checks)");
    backend_ = backend;
    master_dtype_ = master_dtype;
    low_precision_ = low_precision;
    std::size_t offset = 0;
    for (ParameterEntry& e : parameters_) {
        e.offset = offset;
        offset = align_up(offset + e.length);
    }
    flat_length_ = offset;
    offset = 0;
    for (ParameterEntry& e : states_) {
        e.offset = offset;
        offset = align_up(offset + e.length);
    }
    state_length_ = offset;
    std::size_t element = dtype_size(master_dtype);
    master_ = FlatBuffer(backend, flat_length_ * element, "parameters");
    gradients_ = FlatBuffer(backend, flat_length_ * element, "gradients");
    state_ = FlatBuffer(backend, state_length_ * element, "running statistics");
    if (low_precision == DType::f16 || low_precision == DType::bf16)
        low_precision_copy_ = FlatBuffer(backend, flat_length_ * 2, "low-precision parameters");
    master_.zero();
    gradients_.zero();
    state_.zero();
    allocated_ = true;
}

void ParameterStore::initialize(uint64_t seed) {
    if (!allocated_) throw std::logic_error("ParameterStore::initialize before allocate()");
    SplitMix64 rng(seed);
    auto fill = [&](const std::vector<ParameterEntry>& entries, std::size_t length, FlatBuffer& target) {
        std::vector<double> values(length, 0.0);
        for (const ParameterEntry& e : entries) {
            for (std::size_t i = 0; i < e.length; ++i) {
                double v = e.init.value;
                if (e.init.kind == ParameterInit::Kind::uniform) v = (2.0 * rng.uniform01() - 1.0) * e.init.value;
                values[e.offset + i] = v;
            }
        }
        if (master_dtype_ == DType::f64) {
            target.upload(values.data(), length * sizeof(double));
        } else {
            std::vector<float> narrow(values.begin(), values.end());
            target.upload(narrow.data(), length * sizeof(float));
        }
    };
    fill(parameters_, flat_length_, master_);
    fill(states_, state_length_, state_);
    refresh_low_precision();
}

Tensor ParameterStore::view(void* base, DType dtype, const ParameterEntry& e) const {
    char* p = static_cast<char*>(base) + e.offset * dtype_size(dtype);
    return make_tensor(p, dtype, e.rank, e.shape, backend_);
}

Tensor ParameterStore::parameter(ParameterRef ref) const {
    return view(master_.data(), master_dtype_, parameters_.at(ref.index));
}

Tensor ParameterStore::compute_parameter(ParameterRef ref) const {
    if (low_precision_copy_.data()) return view(low_precision_copy_.data(), low_precision_, parameters_.at(ref.index));
    return parameter(ref);
}

Tensor ParameterStore::gradient(ParameterRef ref) const {
    return view(gradients_.data(), master_dtype_, parameters_.at(ref.index));
}

Tensor ParameterStore::state(ParameterRef ref) const {
    return view(state_.data(), master_dtype_, states_.at(ref.index));
}

void ParameterStore::refresh_low_precision(void* stream) {
    if (!low_precision_copy_.data() || flat_length_ == 0) return;
    Tensor source = make_tensor(master_.data(), master_dtype_, {static_cast<int64_t>(flat_length_)}, backend_);
    Tensor target =
        make_tensor(low_precision_copy_.data(), low_precision_, {static_cast<int64_t>(flat_length_)}, backend_);
    if (backend_ == Device::cpu) {
        ops::cast_cpu(source, target);
    } else {
        // cast_cuda needs a context; a plain conversion through the host is enough here
        // (called at init and load, never in the step loop).
        std::vector<float> host(flat_length_);
        master_.download(host.data(), flat_length_ * sizeof(float));
        std::vector<uint16_t> narrow(flat_length_);
        for (std::size_t i = 0; i < flat_length_; ++i)
            narrow[i] = low_precision_ == DType::f16 ? float_to_f16_bits(host[i]) : float_to_bf16_bits(host[i]);
        (void)stream;
        low_precision_copy_.upload(narrow.data(), flat_length_ * 2);
    }
}

std::vector<optim::ParameterSegment> ParameterStore::segments() const {
    std::vector<optim::ParameterSegment> segments;
    for (const ParameterEntry& e : parameters_) segments.push_back({e.offset, e.length, e.flags, e.name});
    return segments;
}

uint64_t ParameterStore::layout_hash() const {
    uint64_t hash = 14695981039346656037ull;
    for (const auto* list : {&parameters_, &states_}) {
        for (const ParameterEntry& e : *list) {
            hash = fnv1a(hash, e.name.data(), e.name.size());
            hash = fnv1a(hash, &e.rank, sizeof e.rank);
            hash = fnv1a(hash, e.shape, sizeof e.shape);
            uint64_t fields[3] = {e.offset, e.length, e.flags};
            hash = fnv1a(hash, fields, sizeof fields);
        }
    }
    return hash;
}

float* ParameterStore::master_f32() const {
    if (master_dtype_ != DType::f32) throw std::logic_error("master parameters are not f32");
    return static_cast<float*>(master_.data());
}

float* ParameterStore::gradients_f32() const {
    if (master_dtype_ != DType::f32) throw std::logic_error("gradients are not f32");
    return static_cast<float*>(gradients_.data());
}

}  // namespace ember::nn
