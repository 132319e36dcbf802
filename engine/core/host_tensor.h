// host_tensor.h: an owning host buffer of any dtype with a Tensor view over it, and
// random or constant fills: what the op tests and the op benchmarks build inputs from.
#pragma once

#include "engine/core/tensor.h"

#include <cstdint>
#include <initializer_list>
#include <random>
#include <vector>

namespace ember {

// An owning host buffer of any dtype with a Tensor view over it.
struct HostTensor {
    std::vector<uint8_t> storage;
    Tensor view;

    HostTensor() = default;
    HostTensor(DType dtype, std::initializer_list<int64_t> shape, Layout layout = Layout::nchw) {
        view = make_tensor(nullptr, dtype, shape, Device::cpu, layout);
        storage.assign(view.bytes() + 8, 0);
        view.data = storage.data();
    }
    HostTensor(DType dtype, const std::vector<int64_t>& shape, Layout layout = Layout::nchw) {
        view = make_tensor(nullptr, dtype, static_cast<int>(shape.size()), shape.data(), Device::cpu, layout);
        storage.assign(view.bytes() + 8, 0);
        view.data = storage.data();
    }
    HostTensor(const HostTensor& other) : storage(other.storage), view(other.view) { view.data = storage.data(); }
    HostTensor& operator=(const HostTensor& other) {
        storage = other.storage;
        view = other.view;
        view.data = storage.data();
        return *this;
    }
    int64_t numel() const { return view.numel(); }
    double get(int64_t i) const { return load_as_double(view.data, view.dtype, i); }
    void set(int64_t i, double v) { store_from_double(view.data, view.dtype, i, v); }
    operator const Tensor&() const { return view; }
};

inline void fill_random(HostTensor& t, std::mt19937& rng, double low = -1.0, double high = 1.0) {
    std::uniform_real_distribution<double> dist(low, high);
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, dist(rng));
}

inline void fill_value(HostTensor& t, double v) {
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, v);
}

}  // namespace ember
