// column_sums.cuh: deterministic column reductions of a row-major [rows, C] matrix
// through the context workspace, for the bias gradients (conv_bias.cu) and layer norm's
// dgamma/dbeta (layernorm.cu). Stage 1: block (column tile, group) sums rows group,
// group + groups, ... of kThreads neighbouring columns (coalesced) into partials in the
// workspace; stage 2 adds the groups in order, so the result does not depend on timing.
#pragma once

#include "engine/cuda/cuda_util.cuh"

#include <algorithm>
#include <cstddef>

namespace ember::cuda {

// The launch of stage 1: tiles of kThreads columns in x, `groups` row groups in y (as
// many as fill about 1024 blocks, at most one per row, and as many partial rows of
// bytes_per_column * C as the workspace holds).
struct ColumnGrid {
    int groups = 1;
    dim3 grid;
};

inline ColumnGrid column_grid(const CudaContext& ctx, int64_t rows, int64_t C, std::size_t bytes_per_column,
                              const char* op) {
    const std::size_t per_group = std::size_t(C) * bytes_per_column;
    require(ctx.workspace != nullptr && ctx.workspace_bytes >= per_group, op,
            "the context workspace is too small for the column partial sums");
    const int64_t tiles = (C + kThreads - 1) / kThreads;
    ColumnGrid g;
    g.groups =
        static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({rows, std::max<int64_t>(1, 1024 / tiles),
                                                                 int64_t(ctx.workspace_bytes / per_group), 65535})));
    g.grid = dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(g.groups));
    return g;
}

// out[c] (=|+=) sum over rows of in[r, c] (conv_bias.cu).
void column_sums(CudaContext& ctx, const char* op, const void* in, DType in_type, int64_t rows, int64_t C, float* out,
                 ops::GradWrite write);

}  // namespace ember::cuda
