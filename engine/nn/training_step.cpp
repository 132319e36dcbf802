// trainer.cpp: the training step and evaluation (trainer.h).
#include "engine/nn/training_step.h"

#include "engine/core/cuda_check.h"
#include "engine/core/nvtx.h"
#include "engine/cuda/context.h"
#include "engine/ops/dispatch.h"
#include "engine/nn/optimizer_access.h"
#include "engine/optim/clip.h"
#include "engine/optim/elementwise_optimizer.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace ember::nn {

namespace {
// Samples [first, first + count) of a batch tensor, as a view.
Tensor batch_slice(const Tensor& t, int64_t first, int64_t count) {
    const int64_t per_sample = t.numel() / t.shape[0];
    char* base = static_cast<char*>(t.data) + first * per_sample * static_cast<int64_t>(dtype_size(t.dtype));
    Tensor view = t;
    view.data = base;
    view.shape[0] = count;
    return view;
}

bool has_dropout(Model& model) {
    for (auto& layer : model.layers())
        if (std::string(layer->kind()) == "dropout") return true;
    return false;
}

template <class T>
void append_bytes(std::vector<uint8_t>& key, const T& value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    key.insert(key.end(), p, p + sizeof(T));
}

cudaStream_t stream_of(Model& model) {
    return model.context().cuda ? model.context().cuda->stream : nullptr;
}
}  // namespace

Trainer::Trainer(Model& model, optim::Optimizer& optimizer, const TrainerOptions& options)
    : model_(model), optimizer_(optimizer), options_(options), loss_scaler_(options.loss_scaler) {
    if (!model.built()) throw std::logic_error("trainer: model " + model.name() + " is not built");
    ParameterStore& store = model.parameters();
    if (store.master_dtype() != DType::f32)
        throw std::invalid_argument("trainer: training needs f32 master parameters");
    if (options.autocast.compute_dtype() != model.context().activation_dtype)
        throw std::invalid_argument(
            std::string("trainer: precision ") + amp::precision_name(options.autocast.precision) +
            " does not match the model's activation dtype " + dtype_name(model.context().activation_dtype));
    if (optimizer.parameter_count() > store.flat_length())
        throw std::invalid_argument("trainer: optimizer " + optimizer.name() + " covers " +
                                    std::to_string(optimizer.parameter_count()) + " parameters, model " + model.name() +
                                    " has " + std::to_string(store.flat_length()));
    if (options.accumulation_steps < 1) throw std::invalid_argument("trainer: accumulation_steps must be >= 1");
    const bool cuda = model.backend() == Device::cuda;
    if ((optimizer.backend() == optim::OptimizerBackend::cpu) == cuda)
        throw std::invalid_argument(std::string("trainer: optimizer backend ") +
                                    optim::optimizer_backend_name(optimizer.backend()) + " does not match the " +
                                    device_name(model.backend()) + " model");
    if (optimizer.kind() == optim::OptimizerKind::lbfgs && options.autocast.low_precision())
        throw std::invalid_argument("trainer: lbfgs runs in fp32 only");
    if (options.cuda_graph && !cuda)
        throw std::invalid_argument("trainer: cuda_graph needs the cuda backend (this model runs on cpu)");
    if (options.cuda_graph && model.context().cuda->stream == nullptr)
        throw std::invalid_argument(
            "trainer: cuda_graph needs the model's CudaContext on a created stream (CudaContextOptions::stream); "
            "the legacy default stream cannot be captured");
    if (options.cuda_graph && optimizer.kind() == optim::OptimizerKind::lbfgs)
        throw std::invalid_argument("trainer: lbfgs's line search cannot be captured in a CUDA graph");
    if (options.gradient_sync && options.cuda_graph)
        throw std::invalid_argument("trainer: cuda_graph with distributed gradient synchronization is not supported");
    if (options.gradient_sync && optimizer.kind() == optim::OptimizerKind::lbfgs)
        throw std::invalid_argument("trainer: lbfgs does not support distributed gradient synchronization");
    if (options.gradient_sync) {
        GradientSynchronizer* sync = options.gradient_sync;
        model.set_gradients_ready_callback([sync](std::size_t layer) { sync->layer_gradients_ready(layer); });
    }
    if (cuda && options.autocast.needs_loss_scaling()) overflow_check_ = std::make_unique<amp::DeviceOverflowCheck>();
    if (cuda && options.clip_grad_norm > 0) clipper_ = std::make_unique<optim::GradientClipper>(store.flat_length());
}

Trainer::~Trainer() {
    if (options_.gradient_sync) model_.set_gradients_ready_callback(nullptr);
}

void Trainer::run_micro_batches(const Tensor& images, const Tensor& labels, double loss_scale,
                                bool first_writes_store) {
    ParameterStore& store = model_.parameters();
    if (!first_writes_store) store.gradients().zero(stream_of(model_));
    const int64_t batch = images.shape[0];
    const int64_t micro = batch / options_.accumulation_steps;
    // d(mean over the whole step)/d(loss of one sample), times the fp16 loss scale.
    const float grad_scale = static_cast<float>(loss_scale / static_cast<double>(batch));
    Tensor all_losses = make_tensor(step_losses_.data(), DType::f32, {batch}, model_.backend());
    for (int m = 0; m < options_.accumulation_steps; ++m) {
        model_.set_step_for_dropout(static_cast<uint64_t>(steps_ * options_.accumulation_steps + m));
        Tensor logits = model_.forward(batch_slice(images, m * micro, micro), true);
        LossOutput out = model_.loss(logits, batch_slice(labels, m * micro, micro), grad_scale);
        ops::accumulate_grad(model_.context(), out.losses, batch_slice(all_losses, m * micro, micro),
                             ops::GradWrite::store);
        if (options_.gradient_sync) options_.gradient_sync->begin_backward(m == options_.accumulation_steps - 1);
        model_.backward(out.dlogits, first_writes_store && m == 0 ? ops::GradWrite::store : ops::GradWrite::accumulate);
    }
}

void Trainer::enqueue_step(const Tensor& images, const Tensor& labels, double loss_scale) {
    ParameterStore& store = model_.parameters();
    RunContext& ctx = model_.context();
    const bool cuda = model_.backend() == Device::cuda;
    run_micro_batches(images, labels, loss_scale, options_.grads_set_to_none);
    if (options_.gradient_sync) options_.gradient_sync->finish_gradients();

    float* grads = store.gradients_f32();
    const std::size_t n = store.flat_length();
    const bool scaled = options_.autocast.needs_loss_scaling();
    float grad_scale = scaled ? static_cast<float>(1.0 / loss_scale) : 1.0f;
    if (scaled) {
        if (cuda)
            overflow_check_->check(grads, n, ctx.cuda->stream);
        else
            cpu_overflow_ = !amp::all_finite_cpu(grads, n);
    }
    nvtx::ScopedRange range(nvtx::range::kOptimizer, nvtx::Category::compute);
    if (options_.clip_grad_norm > 0) {
        Tensor flat = make_tensor(grads, DType::f32, {static_cast<int64_t>(n)}, model_.backend());
        if (scaled) {  // clipping needs true gradients: unscale first
            ops::scale(ctx, flat, grad_scale);
            grad_scale = 1.0f;
        }
        const GradientRange owned =
            options_.gradient_sync ? options_.gradient_sync->final_gradients(n) : GradientRange{0, n};
        if (owned.begin == 0 && owned.end == n) {
            if (cuda)
                clipper_->clip(grads, static_cast<float>(options_.clip_grad_norm), ctx.cuda->stream);
            else
                optim::clip_grad_norm_cpu(grads, n, options_.clip_grad_norm);
        } else {
            // ZeRO-1: this rank's shard only, with the norm over every rank's shard.
            GradientSynchronizer* sync = options_.gradient_sync;
            void* stream = cuda ? ctx.cuda->stream : nullptr;
            auto sum_over_ranks = [sync, stream](float* values, std::size_t count) {
                sync->sum_over_ranks(values, count, stream);
            };
            if (cuda)
                clipper_->clip_sharded(grads + owned.begin, owned.end - owned.begin,
                                       static_cast<float>(options_.clip_grad_norm), stream, sum_over_ranks);
            else
                optim::clip_grad_norm_sharded_cpu(grads + owned.begin, owned.end - owned.begin, options_.clip_grad_norm,
                                                  sum_over_ranks);
        }
    }
    optim::StepOptions step_options;
    step_options.grad_scale = grad_scale;
    step_options.stream = cuda ? ctx.cuda->stream : nullptr;
    if (store.low_precision().data()) {
        step_options.low_precision_params = store.low_precision().data();
        step_options.low_precision = options_.autocast.optimizer_copy();
    }
    if (cuda && scaled) step_options.skip_flag = overflow_check_->device_flag();
    if (!cuda && scaled && cpu_overflow_) return;  // skipped: parameters and state untouched
    optimizer_.step(store.master_f32(), grads, step_options);
}

double Trainer::read_mean_loss(int64_t samples) {
    Tensor losses = make_tensor(step_losses_.data(), DType::f32, {samples}, model_.backend());
    if (model_.backend() == Device::cuda) EMBER_CUDA_CHECK(cudaStreamSynchronize(stream_of(model_)));
    return ops::mean_loss(losses);
}

std::vector<uint8_t> Trainer::graph_key(double loss_scale) const {
    std::vector<uint8_t> key;
    append_bytes(key, loss_scale);
    append_bytes(key, optimizer_.lr());
    if (has_dropout(model_)) append_bytes(key, steps_);
    if (auto* elementwise = dynamic_cast<const optim::ElementwiseOptimizer*>(&optimizer_)) {
        optim::UpdateParameters next = elementwise->next_step_parameters();
        append_bytes(key, next);
    } else {
        append_bytes(key, optimizer_.step_count());  // unknown scalars: never replay blindly
    }
    return key;
}

StepResult Trainer::step(const Tensor& images, const Tensor& labels) {
    const int64_t batch = images.shape[0];
    if (batch % options_.accumulation_steps != 0)
        throw std::invalid_argument("trainer: batch of " + std::to_string(batch) + " does not divide into " +
                                    std::to_string(options_.accumulation_steps) + " micro-batches");
    if (labels.numel() != batch || labels.dtype != DType::i32)
        throw std::invalid_argument("trainer: labels must be i32 [" + std::to_string(batch) + "], got " +
                                    labels.describe());
    const Device device = model_.backend();
    if (images.device != device || labels.device != device)
        throw std::invalid_argument(std::string("trainer: the batch must be on the model's device (") +
                                    device_name(device) + ")");
    if (step_losses_capacity_ < batch) {
        step_losses_ = FlatBuffer(model_.backend(), static_cast<std::size_t>(batch) * sizeof(float), "step losses");
        step_losses_capacity_ = batch;
    }
    const bool scaled = options_.autocast.needs_loss_scaling();
    const double loss_scale = scaled ? loss_scaler_.scale() : 1.0;
    ParameterStore& store = model_.parameters();
    StepResult result;
    result.loss_scale = loss_scale;

    if (optimizer_.kind() == optim::OptimizerKind::lbfgs) {
        // L-BFGS re-evaluates loss and gradients during its line search.
        auto closure = [&]() {
            run_micro_batches(images, labels, 1.0, options_.grads_set_to_none);
            return read_mean_loss(batch);
        };
        nvtx::ScopedRange range(nvtx::range::kOptimizer, nvtx::Category::compute);
        result.loss = optimizer_.step(store.master_f32(), store.gradients_f32(), closure);
        ++steps_;
        return result;
    }

    const bool use_graph = options_.cuda_graph && steps_ >= 1;  // step 0 warms up allocations and autotuning
    bool replayed_without_step_call = false;
    if (use_graph) {
        cudaStream_t stream = stream_of(model_);
        if (graph_images_.bytes() != images.bytes()) {
            graph_images_ = FlatBuffer(Device::cuda, images.bytes(), "graph input images");
            graph_labels_ = FlatBuffer(Device::cuda, labels.bytes(), "graph input labels");
            captured_key_.clear();
        }
        EMBER_CUDA_CHECK(
            cudaMemcpyAsync(graph_images_.data(), images.data, images.bytes(), cudaMemcpyDeviceToDevice, stream));
        EMBER_CUDA_CHECK(
            cudaMemcpyAsync(graph_labels_.data(), labels.data, labels.bytes(), cudaMemcpyDeviceToDevice, stream));
        Tensor static_images = images, static_labels = labels;
        static_images.data = graph_images_.data();
        static_labels.data = graph_labels_.data();
        std::vector<uint8_t> key = graph_key(loss_scale);
        if (!graph_.ready() || key != captured_key_) {
            graph_.capture(stream, [&] { enqueue_step(static_images, static_labels, loss_scale); });
            captured_key_ = key;  // the capture called optimizer.step() once: its count advanced
        } else {
            set_optimizer_step_count(optimizer_, optimizer_.step_count() + 1);
            replayed_without_step_call = true;
        }
        graph_.replay(stream);
    } else {
        enqueue_step(images, labels, loss_scale);
    }

    if (scaled) {
        bool found_inf =
            model_.backend() == Device::cuda ? overflow_check_->read_flag(stream_of(model_)) : cpu_overflow_;
        if (found_inf && model_.backend() == Device::cuda) {
            // rewind_step() undoes the last host-side step() call; a pure replay made
            // none, so only its count advance is undone.
            if (replayed_without_step_call)
                set_optimizer_step_count(optimizer_, optimizer_.step_count() - 1);
            else
                optimizer_.rewind_step();
        }
        result.applied = loss_scaler_.update(found_inf);
        nvtx::counter("loss_scale", loss_scaler_.scale());
    }
    const bool read_loss = options_.loss_read_interval <= 1 || steps_ % options_.loss_read_interval == 0;
    result.loss = read_loss ? read_mean_loss(batch) : std::nan("");
    ++steps_;
    return result;
}

EvaluationResult Trainer::evaluate(const Tensor& images, const Tensor& labels) {
    EvaluationResult result;
    const int64_t batch = images.shape[0];
    Tensor logits = model_.forward(images, false);
    LossOutput out = model_.loss(logits, labels, 1.0f, false);
    if (model_.backend() == Device::cuda) EMBER_CUDA_CHECK(cudaStreamSynchronize(stream_of(model_)));
    result.loss = ops::mean_loss(out.losses);
    std::vector<uint8_t> host_logits(logits.bytes());
    std::vector<int32_t> host_labels(static_cast<std::size_t>(batch));
    if (model_.backend() == Device::cuda) {
        EMBER_CUDA_CHECK(cudaMemcpy(host_logits.data(), logits.data, logits.bytes(), cudaMemcpyDeviceToHost));
        EMBER_CUDA_CHECK(cudaMemcpy(host_labels.data(), labels.data, labels.bytes(), cudaMemcpyDeviceToHost));
    } else {
        std::memcpy(host_logits.data(), logits.data, logits.bytes());
        std::memcpy(host_labels.data(), labels.data, labels.bytes());
    }
    const int64_t classes = logits.shape[1];
    for (int64_t b = 0; b < batch; ++b) {
        int64_t best = 0;
        double best_value = load_as_double(host_logits.data(), logits.dtype, b * classes);
        for (int64_t c = 1; c < classes; ++c) {
            double v = load_as_double(host_logits.data(), logits.dtype, b * classes + c);
            if (v > best_value) best_value = v, best = c;
        }
        result.correct += best == host_labels[static_cast<std::size_t>(b)] ? 1 : 0;
    }
    result.samples = batch;
    return result;
}

}  // namespace ember::nn
