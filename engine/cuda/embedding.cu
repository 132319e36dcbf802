// embedding.cu: embedding gather and scatter-add backward (atomicAdd into an f32 table).
#include "engine/cuda/cuda_util.cuh"
#include "engine/ops/embedding.h"

namespace ember::ops {
namespace {

__global__ void embedding_forward_kernel(const int32_t* ids, const void* table, DType tt, void* out, DType ot,
                                         int64_t rows, int64_t D) {
    EMBER_GRID_STRIDE(i, rows * D) {
        int64_t r = i / D, d = i % D;
        store_from_float(out, ot, i, load_as_float(table, tt, int64_t(ids[r]) * D + d));
    }
}

__global__ void embedding_backward_kernel(const int32_t* ids, const void* dout, DType dt, float* dtable, int64_t rows,
                                          int64_t D) {
    EMBER_GRID_STRIDE(i, rows * D) {
        int64_t r = i / D, d = i % D;
        atomicAdd(&dtable[int64_t(ids[r]) * D + d], load_as_float(dout, dt, i));
    }
}

void check_embedding(const char* op, const Tensor& ids, const Tensor& table, const Tensor& rows) {
    require(ids.defined() && ids.dtype == DType::i32 && ids.device == Device::cuda, op,
            "ids must be a cuda i32 tensor");
    cuda::check_float_cuda(table, op, "table");
    cuda::check_float_cuda(rows, op, "rows");
    require(table.rank == 2, op, "table must be [V, D]: " + table.describe());
    require(rows.rows() == ids.numel() && rows.cols() == table.shape[1], op,
            "output must be [ids, D]: " + rows.describe());
}

}  // namespace

void embedding_forward_cuda(CudaContext& ctx, const Tensor& ids, const Tensor& table, const Tensor& out) {
    check_embedding("embedding_forward_cuda", ids, table, out);
    const int64_t rows = ids.numel(), D = table.shape[1];
    if (rows * D == 0) return;
    EMBER_LAUNCH(embedding_forward_kernel, cuda::grid_for(rows * D), cuda::kThreads, 0, ctx.stream)(ids.as<int32_t>(), table.data, table.dtype,
                                                                      out.data, out.dtype, rows, D);
    EMBER_CUDA_CHECK_LAUNCH();
}

void embedding_backward_cuda(CudaContext& ctx, const Tensor& ids, const Tensor& dout, const Tensor& dtable,
                             GradWrite write) {
    const char* op = "embedding_backward_cuda";
    check_embedding(op, ids, dtable, dout);
    require(dtable.dtype == DType::f32, op, "dtable must be f32 (atomic accumulation)");
    if (write == GradWrite::store) EMBER_CUDA_CHECK(cudaMemsetAsync(dtable.data, 0, dtable.bytes(), ctx.stream));
    const int64_t rows = ids.numel(), D = dtable.shape[1];
    if (rows * D == 0) return;
    EMBER_LAUNCH(embedding_backward_kernel, cuda::grid_for(rows * D), cuda::kThreads, 0, ctx.stream)(ids.as<int32_t>(), dout.data, dout.dtype,
                                                                       dtable.as<float>(), rows, D);
    EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::ops
