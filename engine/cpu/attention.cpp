// attention.cpp: CPU reference of the attention helpers (ops/attention.h), in double
// like the rest of the CPU reference. On the fast path (parallel.h) f32 tensors take
// plain-pointer loops with the same arithmetic, split over the thread team by head
// blocks or rows, so both paths agree bit for bit.
#include "engine/ops/attention.h"

#include "engine/cpu/parallel.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ember::ops {

namespace {
int64_t row_index(const HeadLayout& l, int64_t i) {
    int64_t e = i % l.head_dim;
    int64_t t = (i / l.head_dim) % l.tokens;
    int64_t h = (i / (l.head_dim * l.tokens)) % l.heads;
    int64_t b = i / (l.head_dim * l.tokens * l.heads);
    return (b * l.tokens + t) * (l.parts * l.model_dim()) + l.part * l.model_dim() + h * l.head_dim + e;
}

void check_heads(const Tensor& rows, const Tensor& heads, const HeadLayout& l) {
    require(rows.numel() == l.batch * l.tokens * l.parts * l.model_dim(), "move_heads",
            "rows " + rows.describe() + " do not match the head layout");
    require(heads.numel() == l.batch * l.heads * l.tokens * l.head_dim, "move_heads",
            "heads " + heads.describe() + " do not match the head layout");
    require(rows.dtype == heads.dtype, "move_heads", "rows and heads dtypes differ");
}
}  // namespace

void move_heads_cpu(const Tensor& rows, const Tensor& heads, const HeadLayout& l, bool to_heads) {
    check_heads(rows, heads, l);
    if (cpu::fast_f32({&rows, &heads})) {
        // One (b, h, t) moves head_dim contiguous values each way.
        const int64_t blocks = l.batch * l.heads * l.tokens, dh = l.head_dim;
        float* row_data = rows.as<float>();
        float* head_data = heads.as<float>();
        cpu::parallel_for(blocks, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, dh)),
                          [&](int64_t begin, int64_t end) {
                              for (int64_t block = begin; block < end; ++block) {
                                  float* head = head_data + block * dh;
                                  float* row = row_data + row_index(l, block * dh);
                                  if (to_heads)
                                      std::copy(row, row + dh, head);
                                  else
                                      std::copy(head, head + dh, row);
                              }
                          });
        return;
    }
    const int64_t n = heads.numel();
    for (int64_t i = 0; i < n; ++i) {
        int64_t r = row_index(l, i);
        if (to_heads)
            store_from_double(heads.data, heads.dtype, i, load_as_double(rows.data, rows.dtype, r));
        else
            store_from_double(rows.data, rows.dtype, r, load_as_double(heads.data, heads.dtype, i));
    }
}

void softmax_rows_cpu(const Tensor& s, const Tensor& p) {
    require(same_shape(s, p), "softmax_rows", "shapes differ: " + s.describe() + " vs " + p.describe());
    const int64_t rows = s.rows(), cols = s.cols();
    if (cpu::fast_f32({&s, &p})) {
        const float* scores = s.as<float>();
        float* probabilities = p.as<float>();
        cpu::parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, cols)),
                          [&](int64_t begin, int64_t end) {
                              std::vector<double> row(static_cast<std::size_t>(cols));
                              for (int64_t r = begin; r < end; ++r) {
                                  double max_value = -INFINITY;
                                  for (int64_t c = 0; c < cols; ++c) {
                                      row[c] = scores[r * cols + c];
                                      max_value = std::max(max_value, row[c]);
                                  }
                                  double sum = 0.0;
                                  for (int64_t c = 0; c < cols; ++c) sum += (row[c] = std::exp(row[c] - max_value));
                                  for (int64_t c = 0; c < cols; ++c)
                                      probabilities[r * cols + c] = static_cast<float>(row[c] / sum);
                              }
                          });
        return;
    }
    std::vector<double> row(static_cast<std::size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        double max_value = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) {
            row[c] = load_as_double(s.data, s.dtype, r * cols + c);
            max_value = std::max(max_value, row[c]);
        }
        double sum = 0.0;
        for (int64_t c = 0; c < cols; ++c) sum += (row[c] = std::exp(row[c] - max_value));
        for (int64_t c = 0; c < cols; ++c) store_from_double(p.data, p.dtype, r * cols + c, row[c] / sum);
    }
}

void softmax_rows_backward_cpu(const Tensor& p, const Tensor& dp, const Tensor& ds, float scale) {
    require(same_shape(p, dp) && same_shape(p, ds), "softmax_rows_backward", "shapes differ");
    const int64_t rows = p.rows(), cols = p.cols();
    if (cpu::fast_f32({&p, &dp, &ds})) {
        const float *probabilities = p.as<float>(), *grad_p = dp.as<float>();
        float* grad_s = ds.as<float>();
        cpu::parallel_for(
            rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, cols)), [&](int64_t begin, int64_t end) {
                for (int64_t r = begin; r < end; ++r) {
                    const float *pr = probabilities + r * cols, *gr = grad_p + r * cols;
                    double dot = 0.0;
                    for (int64_t c = 0; c < cols; ++c) dot += double(pr[c]) * double(gr[c]);
                    for (int64_t c = 0; c < cols; ++c)
                        grad_s[r * cols + c] = static_cast<float>(static_cast<double>(scale) * pr[c] * (gr[c] - dot));
                }
            });
        return;
    }
    for (int64_t r = 0; r < rows; ++r) {
        double dot = 0.0;
        for (int64_t c = 0; c < cols; ++c)
            dot += load_as_double(p.data, p.dtype, r * cols + c) * load_as_double(dp.data, dp.dtype, r * cols + c);
        for (int64_t c = 0; c < cols; ++c) {
            double pv = load_as_double(p.data, p.dtype, r * cols + c);
            double g = load_as_double(dp.data, dp.dtype, r * cols + c);
            store_from_double(ds.data, ds.dtype, r * cols + c, static_cast<double>(scale) * pv * (g - dot));
        }
    }
}

}  // namespace ember::ops
