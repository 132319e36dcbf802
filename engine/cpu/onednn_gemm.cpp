// onednn_gemm.cpp: the fast path of the CPU GEMMs (f32): dnnl_sgemm for one product
// with the bias / bias+GELU epilogue split over the thread team, a oneDNN matmul
// primitive (cached per shape) for a stack of equal products, and the bias gradient's
// column sums split by columns. gemm.cpp calls these for f32 operands; its OpenBLAS
// calls stay the reference.
//
// Why oneDNN's sgemm and not OpenBLAS's for the fast path: one thread pool. OpenBLAS
// keeps its own threads; oneDNN (convolutions) and the threaded loops run on OpenMP's,
// whose idle threads spin for a while after each parallel region, so two pools on the
// same cores take turns instead of working. Measured with `ember train`, batch 128, 2
// threads, the same build but for this call (cpu2, three runs each, interleaved): the
// transformer 13,528 img/s with dnnl_sgemm against 5,738 with cblas_sgemm, the MLP
// 52,624 against 18,724 (the GEMM alone: 0.86 against 1.19 ms for the MLP's first
// layer forward + backward, BM_LinearForwardBackward).
#include "engine/cpu/onednn.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/cpu/parallel.h"
#include "engine/ops/gelu.h"

#include <cmath>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace ember::cpu {

void fast_gemm(const Tensor& a, const Tensor& b, const Tensor& c, const ops::GemmArgs& args, int64_t m, int64_t n,
               int64_t k) {
    thread_team();
    const dnnl_status_t status =
        dnnl_sgemm(args.transpose_a ? 'T' : 'N', args.transpose_b ? 'T' : 'N', m, n, k, args.alpha, a.as<float>(),
                   a.cols(), b.as<float>(), b.cols(), args.beta, c.as<float>(), n);
    if (status != dnnl_success)
        throw std::runtime_error("oneDNN dnnl_sgemm (" + std::string(args.transpose_a ? "A^T " : "A ") + a.describe() +
                                 (args.transpose_b ? " x B^T " : " x B ") + b.describe() + " -> C " + c.describe() +
                                 "): status " + std::to_string(static_cast<int>(status)));
    if (args.epilogue == ops::Epilogue::none) return;
    // The reference's epilogue in float: c + bias rounds the same whether the sum is
    // formed in double or float, and GELU reads that rounded value either way.
    const float* bias = args.bias.as<float>();
    float* values = c.as<float>();
    const bool gelu = args.epilogue == ops::Epilogue::bias_gelu;
    float* pre_activation = gelu && args.pre_activation.defined() ? args.pre_activation.as<float>() : nullptr;
    parallel_for(m, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n)), [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
            float* out = values + row * n;
            float* pre = pre_activation ? pre_activation + row * n : nullptr;
            if (!gelu) {
                for (int64_t col = 0; col < n; ++col) out[col] += bias[col];
                continue;
            }
            for (int64_t col = 0; col < n; ++col) {
                const float v = out[col] + bias[col];
                if (pre) pre[col] = v;
                out[col] = ops::gelu_tanh(v);
            }
        }
    });
}

void fast_bias_backward(const Tensor& dy, const Tensor& dbias, ops::GradWrite write) {
    const int64_t rows = dy.rows(), cols = dy.cols();
    const float* grad = dy.as<float>();
    float* out = dbias.as<float>();
    // Each column summed by one thread, in row order and in double: the reference's sums.
    parallel_for(cols, 64, [&](int64_t begin, int64_t end) {
        std::vector<double> sums(static_cast<std::size_t>(end - begin), 0.0);
        for (int64_t r = 0; r < rows; ++r) {
            const float* row = grad + r * cols;
            for (int64_t col = begin; col < end; ++col) sums[col - begin] += row[col];
        }
        for (int64_t col = begin; col < end; ++col) {
            const double total = write == ops::GradWrite::accumulate ? out[col] + sums[col - begin] : sums[col - begin];
            out[col] = static_cast<float>(total);
        }
    });
}

namespace {

struct MatmulKey {
    int64_t count, m, n, k;
    bool transpose_a, transpose_b;
    float alpha;
    int threads;  // a primitive splits its work for the team it was created with
    bool operator==(const MatmulKey&) const = default;
};

struct MatmulKeyHash {
    std::size_t operator()(const MatmulKey& key) const {
        return onednn::hash_fields({key.count, key.m, key.n, key.k, key.transpose_a * 2 + key.transpose_b,
                                    static_cast<int64_t>(std::hash<float>()(key.alpha)), key.threads});
    }
};

struct MatmulPlan {
    dnnl::matmul primitive;
    dnnl::memory::desc a, b, c, scratchpad;
    std::string implementation;
};

std::string describe(const MatmulKey& key) {
    return std::to_string(key.count) + " x [" + std::to_string(key.m) + "," + std::to_string(key.k) + "]" +
           (key.transpose_a ? " (A stored transposed)" : "") + " x [" + std::to_string(key.k) + "," +
           std::to_string(key.n) + "]" + (key.transpose_b ? " (B stored transposed)" : "") + ", alpha " +
           std::to_string(key.alpha);
}

std::unique_ptr<MatmulPlan> make_plan(const MatmulKey& key) {
    using dnnl::memory;
    // Row-major stacks; a transposed operand is the same buffer read with swapped strides.
    const memory::dims a_strides =
        key.transpose_a ? memory::dims{key.m * key.k, 1, key.m} : memory::dims{key.m * key.k, key.k, 1};
    const memory::dims b_strides =
        key.transpose_b ? memory::dims{key.k * key.n, 1, key.k} : memory::dims{key.k * key.n, key.n, 1};
    auto plan = std::make_unique<MatmulPlan>();
    plan->a = memory::desc({key.count, key.m, key.k}, memory::data_type::f32, a_strides);
    plan->b = memory::desc({key.count, key.k, key.n}, memory::data_type::f32, b_strides);
    plan->c = memory::desc({key.count, key.m, key.n}, memory::data_type::f32, memory::dims{key.m * key.n, key.n, 1});
    try {
        dnnl::primitive_attr attributes;
        attributes.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        if (key.alpha != 1.0f) attributes.set_output_scales(0, {key.alpha});
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(plan->a, plan->b, plan->c), attributes,
                                        onednn::cpu_engine());
        plan->primitive = dnnl::matmul(pd);
        plan->scratchpad = pd.scratchpad_desc();
        plan->implementation = pd.impl_info_str();
    } catch (const dnnl::error& e) {
        onednn::rethrow("matmul::primitive_desc", describe(key), e);
    }
    return plan;
}

const MatmulPlan& plan_for(const MatmulKey& key) {
    static std::mutex mutex;
    static std::unordered_map<MatmulKey, std::unique_ptr<MatmulPlan>, MatmulKeyHash> plans;
    std::lock_guard<std::mutex> lock(mutex);
    auto found = plans.find(key);
    if (found != plans.end()) return *found->second;
    return *plans.emplace(key, make_plan(key)).first->second;
}

}  // namespace

void onednn_batched_gemm(const Tensor& a, const Tensor& b, const Tensor& c, const ops::BatchedGemmShape& shape) {
    const MatmulKey key{shape.count,       shape.m,           shape.n,     shape.k,
                        shape.transpose_a, shape.transpose_b, shape.alpha, thread_team()};
    const MatmulPlan& plan = plan_for(key);
    try {
        onednn::execute(plan.primitive, plan.scratchpad,
                        {{DNNL_ARG_SRC, dnnl::memory(plan.a, onednn::cpu_engine(), a.data)},
                         {DNNL_ARG_WEIGHTS, dnnl::memory(plan.b, onednn::cpu_engine(), b.data)},
                         {DNNL_ARG_DST, dnnl::memory(plan.c, onednn::cpu_engine(), c.data)}});
    } catch (const dnnl::error& e) {
        onednn::rethrow("matmul::execute", describe(key) + ", " + plan.implementation, e);
    }
}

}  // namespace ember::cpu
