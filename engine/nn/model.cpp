// model.cpp: the layer list's forward/backward, checkpointing and the loss (model.h).
#include "engine/nn/model.h"

#include "engine/core/nvtx.h"
#include "engine/ops/dispatch.h"

#include <optional>
#include <sstream>

namespace ember::nn {

Model::Model(std::string name, LayerList layers, TensorShape sample_shape)
    : name_(std::move(name)), layers_(std::move(layers)), sample_shape_(sample_shape) {
    for (auto& layer : layers_) {
        layer_parameter_begin_.push_back(parameters_.parameters().size());
        layer->register_parameters(parameters_);
    }
}

Model::~Model() = default;

void Model::build(const BuildOptions& options) {
    if (built_) throw std::logic_error("model " + name_ + " is already built");
    if (options.backend == Device::cuda && !options.cuda)
        throw std::invalid_argument("model " + name_ + ": the cuda backend needs a CudaContext");
    options_ = options;
    DType low = options.activation_dtype == DType::f16 || options.activation_dtype == DType::bf16
                    ? options.activation_dtype
                    : DType::f32;
    parameters_.allocate(options.backend, options.master_dtype, low);
    parameters_.initialize(options.seed);
    pool_ = std::make_unique<ActivationPool>(options.backend, options.pool_chunk_bytes, "activations");
    recompute_pool_ =
        std::make_unique<ActivationPool>(options.backend, options.pool_chunk_bytes / 4, "recomputed activations");
    context_.backend = options.backend;
    context_.cuda = options.cuda;
    context_.pool = pool_.get();
    context_.parameters = &parameters_;
    context_.activation_dtype = options.activation_dtype;
    set_seed(options.seed);
    context_.switches = options.switches;
    built_ = true;
}

void Model::set_seed(uint64_t seed) {
    options_.seed = seed;
    context_.dropout_seed = seed ^ 0xd1b54a32d192ed03ull;  // a stream apart from parameter init
}

namespace {
// Copies `t` into `pool` (a checkpointed layer's output or input gradient must outlive
// the recompute pool's next reset).
Tensor copy_into(RunContext& ctx, ActivationPool& pool, const Tensor& t) {
    Tensor copy = pool.allocate(t.dtype, shape_of(t));
    copy.layout = t.layout;
    ops::accumulate_grad(ctx, t, copy, ops::GradWrite::store);
    return copy;
}
}  // namespace

Tensor Model::forward(const Tensor& input, bool training) {
    if (!built_) throw std::logic_error("model " + name_ + ": forward before build()");
    if (input.rank != sample_shape_.rank + 1)
        throw std::invalid_argument("model " + name_ + ": input " + input.describe() + " does not match samples " +
                                    sample_shape_.describe());
    nvtx::ScopedRange range(training ? nvtx::range::kForward : std::string_view("evaluation/forward"),
                            training ? nvtx::Category::compute : nvtx::Category::evaluation);
    pool_->reset();
    recompute_pool_->reset();
    context_.pool = pool_.get();
    context_.training = training;
    context_.recomputing = false;
    Tensor x = input;
    const Layout layout = options_.channels_last ? Layout::nhwc : Layout::nchw;
    if (x.rank == 4 && x.layout != layout) {
        // One reorder at the entry (it casts as it copies); the data pipeline stays
        // layout-agnostic and hands nchw batches to either kind of model.
        Tensor reordered = context_.allocate(context_.activation_dtype, shape_of(x), layout);
        ops::convert_layout(context_, x, reordered);
        x = reordered;
    } else if (x.dtype != context_.activation_dtype) {
        Tensor cast = context_.allocate(context_.activation_dtype, shape_of(x), x.layout);
        ops::cast(context_, x, cast);
        x = cast;
    }
    layer_inputs_.assign(layers_.size(), Tensor{});
    for (std::size_t i = 0; i < layers_.size(); ++i) {
        Layer& layer = *layers_[i];
        std::optional<nvtx::ScopedRange> layer_range;
        if (context_.switches.per_layer_nvtx) layer_range.emplace(layer.name().c_str(), nvtx::Category::compute);
        layer_inputs_[i] = x;
        if (training && layer.checkpointed) {
            recompute_pool_->reset();
            context_.pool = recompute_pool_.get();
            Tensor inside = layer.forward(context_, x);
            context_.pool = pool_.get();
            x = copy_into(context_, *pool_, inside);
        } else {
            x = layer.forward(context_, x);
        }
    }
    last_forward_training_ = training;
    return x;
}

LossOutput Model::loss(const Tensor& logits, const Tensor& labels, float grad_scale, bool want_gradient) {
    LossOutput out;
    const int64_t batch = logits.shape[0];
    out.losses = pool_->allocate(full_precision_dtype(logits.dtype), make_shape({batch}));
    if (want_gradient) out.dlogits = pool_->allocate(logits.dtype, shape_of(logits));
    ops::softmax_cross_entropy(context_, logits, labels, out.losses, out.dlogits, grad_scale);
    return out;
}

void Model::backward(const Tensor& dlogits, ops::GradWrite parameter_write) {
    if (!last_forward_training_) throw std::logic_error("model " + name_ + ": backward after an evaluation forward");
    nvtx::ScopedRange range(nvtx::range::kBackward, nvtx::Category::compute);
    context_.parameter_write = parameter_write;
    context_.training = true;
    Tensor dy = dlogits;
    for (std::size_t i = layers_.size(); i-- > 0;) {
        Layer& layer = *layers_[i];
        std::optional<nvtx::ScopedRange> layer_range;
        if (context_.switches.per_layer_nvtx) layer_range.emplace(layer.name().c_str(), nvtx::Category::compute);
        const bool need_input_grad = i > 0;
        if (layer.checkpointed) {
            recompute_pool_->reset();
            context_.pool = recompute_pool_.get();
            context_.recomputing = true;
            layer.forward(context_, layer_inputs_[i]);
            context_.recomputing = false;
            Tensor inside = layer.backward(context_, dy, need_input_grad);
            context_.pool = pool_.get();
            dy = need_input_grad ? copy_into(context_, *pool_, inside) : Tensor{};
        } else {
            dy = layer.backward(context_, dy, need_input_grad);
        }
        if (gradients_ready_) gradients_ready_(i);
    }
}

void Model::set_checkpointed(const std::vector<int>& layer_indices) {
    for (auto& layer : layers_) layer->checkpointed = false;
    for (int index : layer_indices) {
        if (index < 0 || index >= static_cast<int>(layers_.size()))
            throw std::out_of_range("model " + name_ + " has no layer " + std::to_string(index));
        layers_[index]->checkpointed = true;
    }
}

void Model::checkpoint_composite_layers(bool enabled) {
    for (auto& layer : layers_) {
        std::string kind = layer->kind();
        layer->checkpointed = enabled && (kind == "basic_block" || kind == "transformer_block");
    }
}

std::size_t Model::activation_bytes() const {
    return (pool_ ? pool_->peak_bytes() : 0) + (recompute_pool_ ? recompute_pool_->peak_bytes() : 0);
}

std::size_t Model::recompute_bytes() const {
    return recompute_pool_ ? recompute_pool_->peak_bytes() : 0;
}

void Model::reset_activation_peak() {
    if (pool_) pool_->reset_peak();
    if (recompute_pool_) recompute_pool_->reset_peak();
}

std::string Model::summary(int64_t batch) const {
    std::ostringstream out;
    TensorShape shape = sample_shape_;
    TensorShape with_batch;
    with_batch.rank = shape.rank + 1;
    with_batch.dims[0] = batch;
    for (int i = 0; i < shape.rank; ++i) with_batch.dims[i + 1] = shape.dims[i];
    shape = with_batch;
    out << name_ << " (input " << shape.describe() << ")\n";
    for (const auto& layer : layers_) {
        shape = layer->output_shape(shape);
        out << "  " << layer->name() << "  " << layer->kind() << "  -> " << shape.describe()
            << (layer->checkpointed ? "  [checkpointed]" : "") << "\n";
    }
    out << "parameters: " << parameters_.parameter_count() << "\n";
    return out.str();
}

}  // namespace ember::nn
