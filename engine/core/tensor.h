// tensor.h: ember::Tensor, a non-owning view of a dense buffer: pointer, dtype,
// logical shape (rank 1..4), layout and device. Memory is owned elsewhere (the
// caching allocator, the activation arena, a parameter buffer); a Tensor is cheap to
// copy and passing one never allocates.
//
// Shape is always logical. For rank 4 the dims mean (N, C, H, W) and `layout` says how
// they sit in memory (nchw contiguous, or nhwc channels-last); ranks 1..3 are
// row-major. Convolution filters use (K, C, R, S) logically, stored KCRS or KRSC.
#pragma once

#include "engine/core/dtype.h"

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace ember {

struct Tensor {
    void* data = nullptr;
    DType dtype = DType::f32;
    Device device = Device::cpu;
    Layout layout = Layout::nchw;
    int rank = 0;
    int64_t shape[4] = {1, 1, 1, 1};

    int64_t numel() const {
        int64_t n = 1;
        for (int i = 0; i < rank; ++i) n *= shape[i];
        return n;
    }
    std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype); }
    int64_t dim(int i) const { return shape[i]; }
    bool defined() const { return data != nullptr; }

    template <class T>
    T* as() const {
        return static_cast<T*>(data);
    }

    // 4-D index (n, c, h, w) -> element offset, honouring the layout.
    int64_t offset4(int64_t n, int64_t c, int64_t h, int64_t w) const {
        if (layout == Layout::nhwc) return ((n * shape[2] + h) * shape[3] + w) * shape[1] + c;
        return ((n * shape[1] + c) * shape[2] + h) * shape[3] + w;
    }

    // Treats the tensor as a matrix [numel / last_dim, last_dim] (GEMM operands).
    int64_t rows() const { return rank == 0 ? 0 : numel() / shape[rank - 1]; }
    int64_t cols() const { return rank == 0 ? 0 : shape[rank - 1]; }

    std::string describe() const;  // "f32[8,3,28,28] nhwc cuda"
};

// A view of `data` with the given logical shape (1..4 dims).
Tensor make_tensor(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device = Device::cpu,
                   Layout layout = Layout::nchw);
Tensor make_tensor(void* data, DType dtype, int rank, const int64_t* shape, Device device = Device::cpu,
                   Layout layout = Layout::nchw);

// Same buffer, new shape with equal element count. Reshaping a 4-D nhwc tensor
// would reorder elements, so it is refused (convert the layout first).
Tensor reshape(const Tensor& t, std::initializer_list<int64_t> shape);

// flatten: (N, C, H, W) -> (N, C*H*W) as PyTorch's nn.Flatten; a view, no copy.
// Needs nchw memory order (channels-last input: convert_layout first). Its backward
// is the same view of the gradient.
Tensor flatten(const Tensor& t);

// Throws std::invalid_argument naming `op` and the offending tensor when a
// precondition of an op does not hold.
void require(bool condition, const char* op, const std::string& message);
bool same_shape(const Tensor& a, const Tensor& b);

}  // namespace ember
