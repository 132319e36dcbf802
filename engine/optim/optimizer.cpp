// optimizer.cpp: the Optimizer base, segment validation and make_optimizer, which
// reads each optimizer's hyper-parameters with torch.optim's (Apex's for LAMB and
// NovoGrad, Apex LARC's for LARS) defaults.
#include "engine/optim/optimizer.h"

#include "engine/optim/elementwise_optimizer.h"
#include "engine/optim/lbfgs.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace ember::optim {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}

std::size_t validate_segments(const std::vector<ParameterSegment>& segments) {
    if (segments.empty()) throw std::invalid_argument("optimizer: no parameter segments given");
    std::vector<const ParameterSegment*> sorted;
    std::size_t count = 0;
    for (const auto& s : segments) {
        if (s.length == 0) throw std::invalid_argument("optimizer: segment '" + s.name + "' has length 0");
        sorted.push_back(&s);
        count = std::max(count, s.offset + s.length);
    }
    std::sort(sorted.begin(), sorted.end(),
              [](const ParameterSegment* a, const ParameterSegment* b) { return a->offset < b->offset; });
    for (std::size_t i = 1; i < sorted.size(); ++i)
        if (sorted[i - 1]->offset + sorted[i - 1]->length > sorted[i]->offset)
            throw std::invalid_argument("optimizer: segments '" + sorted[i - 1]->name + "' and '" + sorted[i]->name +
                                        "' overlap");
    return count;
}

OptimizerBackend parse_optimizer_backend(std::string_view name) {
    if (name == "cpu") return OptimizerBackend::cpu;
    if (name == "cuda_fused") return OptimizerBackend::cuda_fused;
    if (name == "cuda_per_tensor") return OptimizerBackend::cuda_per_tensor;
    throw std::invalid_argument("optimizer: unknown backend '" + std::string(name) +
                                "' (cpu, cuda_fused, cuda_per_tensor)");
}

const char* optimizer_backend_name(OptimizerBackend backend) {
    switch (backend) {
        case OptimizerBackend::cpu:
            return "cpu";
        case OptimizerBackend::cuda_fused:
            return "cuda_fused";
        case OptimizerBackend::cuda_per_tensor:
            return "cuda_per_tensor";
    }
    return "?";
}

Optimizer::Optimizer(std::string name, OptimizerKind kind, OptimizerBackend backend, double lr,
                     std::vector<ParameterSegment> segments)
    : name_(std::move(name)), kind_(kind), backend_(backend), lr_(lr), segments_(std::move(segments)) {
    parameter_count_ = validate_segments(segments_);
}

double Optimizer::step(float* params, float* grads, const Closure& closure, const StepOptions& options) {
    double loss = closure();
    step(params, grads, options);
    return loss;
}

OptimizerState Optimizer::export_state() const {
    OptimizerState state;
    state.step_count = step_count_;
    return state;
}

void Optimizer::import_state(const OptimizerState& state) {
    if (!state.buffers.empty())
        throw std::invalid_argument(name_ + ": import_state: " + std::to_string(state.buffers.size()) +
                                    " state buffers given, this optimizer has none");
    step_count_ = state.step_count;
}

void Optimizer::rewind_step() {
    if (step_count_ > 0) --step_count_;
}

const std::vector<std::string>& optimizer_names() {
    static const std::vector<std::string> names = {"sgd",   "adagrad", "adadelta", "rmsprop", "adam",     "adamw",
                                                   "nadam", "adamax",  "lamb",     "lars",    "novograd", "lbfgs"};
    return names;
}

namespace {

// Adam, AdamW, NAdam, AdaMax, LAMB, NovoGrad: betas in [0, 1).
// What the Adam family, LAMB and NovoGrad all read, with each one's defaults: betas
// (0.9, 0.999 everywhere), eps and weight_decay. Returns lr.
double read_adam_like(HyperparameterReader& r, UpdateParameters& u, double lr, double eps, double weight_decay) {
    const double rate = r.number("lr", lr, 0.0, kInf);
    u.beta1 = (float)r.number("beta1", 0.9, 0.0, 0.999999999);
    u.beta2 = (float)r.number("beta2", 0.999, 0.0, 0.999999999);
    u.eps = (float)r.number("eps", eps, 0.0, kInf);
    u.weight_decay = (float)r.number("weight_decay", weight_decay, 0.0, kInf);
    return rate;
}

// LAMB's and NovoGrad's grad_averaging: the moment update's gradient weight (1 - beta1, or 1).
float read_grad_averaging(HyperparameterReader& r, const UpdateParameters& u) {
    return r.flag("grad_averaging", true) ? 1.0f - u.beta1 : 1.0f;
}

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const Hyperparameters& hyperparameters,
                                          std::vector<ParameterSegment> segments, OptimizerBackend backend) {
    HyperparameterReader r(name, hyperparameters);
    ElementwiseSettings s;
    UpdateParameters& u = s.base;
    double lr = 0.0;

    if (name == "lbfgs") {
        LbfgsSettings l;
        lr = r.number("lr", 1.0, 0.0, kInf);
        l.max_iter = (int)r.number("max_iter", 20, 1, 1e9);
        l.max_eval = (int)r.number("max_eval", l.max_iter * 5 / 4, 1, 1e9);
        l.tolerance_grad = r.number("tolerance_grad", 1e-7, 0.0, kInf);
        l.tolerance_change = r.number("tolerance_change", 1e-9, 0.0, kInf);
        l.history_size = (int)r.number("history_size", 100, 1, 1e6);
        l.strong_wolfe = r.flag("strong_wolfe", false);
        r.reject_unknown();
        if (backend != OptimizerBackend::cpu)
            r.fail("backend", std::string("is ") + optimizer_backend_name(backend) + ", lbfgs runs on cpu only");
        return std::make_unique<Lbfgs>(lr, std::move(segments), l);
    }

    if (name == "sgd" || name == "lars") {
        u.kind = name == "sgd" ? OptimizerKind::sgd : OptimizerKind::lars;
        lr = r.number("lr", 1e-3, 0.0, kInf);
        u.momentum = (float)r.number("momentum", name == "lars" ? 0.9 : 0.0, 0.0, kInf);
        u.dampening = (float)r.number("dampening", 0.0, -kInf, kInf);
        u.nesterov = r.flag("nesterov", false);
        u.weight_decay = (float)r.number("weight_decay", 0.0, 0.0, kInf);
        if (name == "lars") {
            u.trust_coefficient = (float)r.number("trust_coefficient", 0.02, 0.0, kInf);
            u.eps = (float)r.number("eps", 1e-8, 0.0, kInf);
            u.lars_clip = r.flag("clip", false);
        }
        if (u.nesterov && (u.momentum <= 0.0f || u.dampening != 0.0f))
            r.fail("nesterov", "requires momentum > 0 and dampening = 0");
        s.state_buffers = u.momentum != 0.0f ? 1 : 0;
    } else if (name == "adagrad") {
        u.kind = OptimizerKind::adagrad;
        lr = r.number("lr", 1e-2, 0.0, kInf);
        s.lr_decay = r.number("lr_decay", 0.0, 0.0, kInf);
        u.weight_decay = (float)r.number("weight_decay", 0.0, 0.0, kInf);
        s.initial_state0 = (float)r.number("initial_accumulator_value", 0.0, 0.0, kInf);
        u.eps = (float)r.number("eps", 1e-10, 0.0, kInf);
        s.state_buffers = 1;
    } else if (name == "adadelta") {
        u.kind = OptimizerKind::adadelta;
        lr = r.number("lr", 1.0, 0.0, kInf);
        u.alpha = (float)r.number("rho", 0.9, 0.0, 1.0);
        u.eps = (float)r.number("eps", 1e-6, 0.0, kInf);
        u.weight_decay = (float)r.number("weight_decay", 0.0, 0.0, kInf);
        s.state_buffers = 2;
    } else if (name == "rmsprop") {
        u.kind = OptimizerKind::rmsprop;
        lr = r.number("lr", 1e-2, 0.0, kInf);
        u.alpha = (float)r.number("alpha", 0.99, 0.0, kInf);
        u.eps = (float)r.number("eps", 1e-8, 0.0, kInf);
        u.weight_decay = (float)r.number("weight_decay", 0.0, 0.0, kInf);
        u.momentum = (float)r.number("momentum", 0.0, 0.0, kInf);
        u.centered = r.flag("centered", false);
        // 0 square average, 1 gradient average (centered), 2 momentum buffer.
        s.state_buffers = u.momentum > 0.0f ? 3 : (u.centered ? 2 : 1);
    } else if (name == "adam" || name == "adamw") {
        u.kind = name == "adam" ? OptimizerKind::adam : OptimizerKind::adamw;
        lr = read_adam_like(r, u, 1e-3, 1e-8, name == "adam" ? 0.0 : 1e-2);
        u.amsgrad = r.flag("amsgrad", false);
        u.decoupled_weight_decay = name == "adamw";
        s.state_buffers = u.amsgrad ? 3 : 2;
    } else if (name == "nadam") {
        u.kind = OptimizerKind::nadam;
        lr = read_adam_like(r, u, 2e-3, 1e-8, 0.0);
        s.momentum_decay = r.number("momentum_decay", 4e-3, 0.0, kInf);
        u.decoupled_weight_decay = r.flag("decoupled_weight_decay", false);
        s.state_buffers = 2;
    } else if (name == "adamax") {
        u.kind = OptimizerKind::adamax;
        lr = read_adam_like(r, u, 2e-3, 1e-8, 0.0);
        s.state_buffers = 2;
    } else if (name == "lamb") {
        u.kind = OptimizerKind::lamb;
        lr = read_adam_like(r, u, 1e-3, 1e-6, 0.01);
        s.bias_correction = r.flag("bias_correction", true);
        u.decoupled_weight_decay = r.flag("adam_w_mode", true);
        u.beta3 = read_grad_averaging(r, u);
        u.max_grad_norm = (float)r.number("max_grad_norm", 1.0, 0.0, kInf);
        u.use_nvlamb = r.flag("use_nvlamb", false);
        s.state_buffers = 3;
    } else if (name == "novograd") {
        u.kind = OptimizerKind::novograd;
        lr = read_adam_like(r, u, 1e-3, 1e-8, 0.0);
        s.bias_correction = r.flag("bias_correction", true);
        u.beta3 = read_grad_averaging(r, u);
        u.reg_inside_moment = r.flag("reg_inside_moment", false);
        u.init_zero = r.flag("init_zero", false);
        s.state_buffers = 1;
    } else {
        std::string known;
        for (const auto& n : optimizer_names()) known += (known.empty() ? "" : ", ") + n;
        throw std::invalid_argument("optimizer: unknown name '" + name + "' (known: " + known + ")");
    }
    // torch's maximize (ascend the objective): every optimizer above takes it but Apex's
    // LARS, LAMB and NovoGrad.
    if (name != "lars" && name != "lamb" && name != "novograd") u.maximize = r.flag("maximize", false);
    r.reject_unknown();
    return std::make_unique<ElementwiseOptimizer>(name, backend, lr, std::move(segments), s);
}

}  // namespace ember::optim
