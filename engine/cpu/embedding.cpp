// embedding.cpp: CPU embedding lookup and its scatter-add backward.
#include "engine/cpu/cpu_util.h"
#include "engine/ops/embedding.h"

namespace ember::ops {
namespace {

void check_embedding(const char* op, const Tensor& ids, const Tensor& table, const Tensor& rows) {
    require(ids.defined() && ids.dtype == DType::i32 && ids.device == Device::cpu, op, "ids must be a cpu i32 tensor");
    cpu::check_float_cpu(table, op, "table");
    cpu::check_float_cpu(rows, op, "rows");
    require(table.rank == 2, op, "table must be [V, D]: " + table.describe());
    require(rows.rows() == ids.numel() && rows.cols() == table.shape[1], op,
            "output must be [ids, D]: " + rows.describe());
    for (int64_t i = 0, end = ids.numel(); i < end; ++i) {
        int32_t id = ids.as<int32_t>()[i];
        require(id >= 0 && id < table.shape[0], op,
                "id " + std::to_string(id) + " outside [0, " + std::to_string(table.shape[0]) + ")");
    }
}

}  // namespace

void embedding_forward_cpu(const Tensor& ids, const Tensor& table, const Tensor& out) {
    check_embedding("embedding_forward_cpu", ids, table, out);
    const int64_t D = table.shape[1];
    for (int64_t i = 0, end = ids.numel(); i < end; ++i) {
        const int64_t row = ids.as<int32_t>()[i];
        for (int64_t d = 0; d < D; ++d) cpu::set(out, i * D + d, cpu::get(table, row * D + d));
    }
}

void embedding_backward_cpu(const Tensor& ids, const Tensor& dout, const Tensor& dtable, GradWrite write) {
    check_embedding("embedding_backward_cpu", ids, dtable, dout);
    const int64_t D = dtable.shape[1];
    if (write == GradWrite::store)
        for (int64_t i = 0, end = dtable.numel(); i < end; ++i) cpu::set(dtable, i, 0.0);
    for (int64_t i = 0, end = ids.numel(); i < end; ++i) {
        const int64_t row = ids.as<int32_t>()[i];
        for (int64_t d = 0; d < D; ++d)
            cpu::write(dtable, row * D + d, cpu::get(dout, i * D + d), GradWrite::accumulate);
    }
}

}  // namespace ember::ops
