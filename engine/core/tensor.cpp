// tensor.cpp: Tensor construction, reshaping and descriptions.
#include "engine/core/tensor.h"

#include <stdexcept>
#include <string>

namespace ember {

const char* dtype_name(DType t) {
    switch (t) {
        case DType::f32:
            return "f32";
        case DType::f16:
            return "f16";
        case DType::bf16:
            return "bf16";
        case DType::i32:
            return "i32";
        case DType::u8:
            return "u8";
        case DType::f64:
            return "f64";
    }
    return "?";
}

const char* layout_name(Layout l) {
    return l == Layout::nhwc ? "nhwc" : "nchw";
}
const char* device_name(Device d) {
    return d == Device::cuda ? "cuda" : "cpu";
}

Device parse_device(const std::string& name) {
    if (name == "cpu") return Device::cpu;
    if (name == "cuda") return Device::cuda;
    throw std::invalid_argument("unknown backend '" + name + "' (expected cpu or cuda)");
}

std::string Tensor::describe() const {
    std::string s = std::string(dtype_name(dtype)) + "[";
    for (int i = 0; i < rank; ++i) {
        if (i > 0) s += ",";
        s += std::to_string(shape[i]);
    }
    s += "]";
    if (rank == 4) s += std::string(" ") + layout_name(layout);
    s += std::string(" ") + device_name(device);
    return s;
}

Tensor make_tensor(void* data, DType dtype, int rank, const int64_t* shape, Device device, Layout layout) {
    if (rank < 1 || rank > 4)
        throw std::invalid_argument("make_tensor: rank must be 1..4, got " + std::to_string(rank));
    Tensor t{.data = data, .dtype = dtype, .device = device, .layout = layout, .rank = rank};
    for (int i = 0; i < rank; ++i) {
        if (shape[i] < 0) throw std::invalid_argument("make_tensor: negative dimension");
        t.shape[i] = shape[i];
    }
    return t;
}

Tensor make_tensor(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device, Layout layout) {
    return make_tensor(data, dtype, static_cast<int>(shape.size()), shape.begin(), device, layout);
}

Tensor reshape(const Tensor& t, std::initializer_list<int64_t> shape) {
    require(!(t.rank == 4 && t.layout == Layout::nhwc && shape.size() != 4), "reshape",
            "an nhwc tensor cannot be reshaped without reordering; convert_layout first: " + t.describe());
    Tensor r = make_tensor(t.data, t.dtype, shape, t.device, t.layout);
    require(r.numel() == t.numel(), "reshape", "element count differs: " + t.describe() + " -> " + r.describe());
    return r;
}

Tensor flatten(const Tensor& t) {
    require(t.rank >= 1, "flatten", "empty tensor");
    require(!(t.rank == 4 && t.layout == Layout::nhwc), "flatten",
            "channels-last input would flatten in a different order than nchw; convert_layout "
            "first: " +
                t.describe());
    int64_t n = t.shape[0];
    return make_tensor(t.data, t.dtype, {n, n == 0 ? 0 : t.numel() / n}, t.device, Layout::nchw);
}

void require(bool condition, const char* op, const std::string& message) {
    if (!condition) throw std::invalid_argument(std::string(op) + ": " + message);
}

bool same_shape(const Tensor& a, const Tensor& b) {
    if (a.rank != b.rank) return false;
    for (int i = 0; i < a.rank; ++i)
        if (a.shape[i] != b.shape[i]) return false;
    return true;
}

}  // namespace ember
