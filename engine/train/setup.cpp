// setup.cpp: the phases of a run before its first step (run_state.h), each turning
// a part of the configuration into engine objects and saying what it chose.
#include "engine/core/cuda_check.h"
#include "engine/core/device.h"
#include "engine/nn/models.h"
#include "engine/train/run_state.h"
#include "engine/train/thread_split.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <thread>

// OpenBLAS (the CPU backend's GEMM) sizes its own thread pool.
extern "C" void openblas_set_num_threads(int threads);

namespace ember::train {
namespace {

// What non-root ranks report: nothing (rank 0 speaks for the job).
class SilentObserver : public TrainObserver {};

optim::ScheduleConfig schedule_config(const TrainConfig& c, double base_lr, int64_t total_steps) {
    optim::ScheduleConfig s;
    s.name = c.schedule;
    s.base_lr = base_lr;
    s.warmup_steps = c.warmup_steps;
    // Annealing schedules span the run unless told otherwise.
    int64_t after_warmup = std::max<int64_t>(1, total_steps - c.warmup_steps);
    s.t_max = after_warmup;
    s.total_steps = after_warmup;
    s.total_iters = after_warmup;
    for (const auto& [key, value] : c.schedule_params) {
        auto integer = [&] { return static_cast<int64_t>(std::llround(value)); };
        if (key == "gamma")
            s.gamma = value;
        else if (key == "step_size")
            s.step_size = integer();
        else if (key.rfind("milestone", 0) == 0)
            s.milestones.push_back(integer());
        else if (key == "total_iters")
            s.total_iters = integer();
        else if (key == "power")
            s.power = value;
        else if (key == "t_max")
            s.t_max = integer();
        else if (key == "eta_min")
            s.eta_min = value;
        else if (key == "t_0")
            s.t_0 = integer();
        else if (key == "t_mult")
            s.t_mult = integer();
        else if (key == "start_factor")
            s.start_factor = value;
        else if (key == "end_factor")
            s.end_factor = value;
        else if (key == "max_lr")
            s.max_lr = value;
        else if (key == "total_steps")
            s.total_steps = integer();
        else if (key == "pct_start")
            s.pct_start = value;
        else if (key == "anneal_linear")
            s.anneal_strategy = value != 0 ? "linear" : "cos";
        else if (key == "div_factor")
            s.div_factor = value;
        else if (key == "final_div_factor")
            s.final_div_factor = value;
        else if (key == "three_phase")
            s.three_phase = value != 0;
        else if (key == "warmup_start_factor")
            s.warmup_start_factor = value;
        else
            throw ConfigError("schedule." + key +
                              " is not a schedule field (gamma, step_size, milestone1.., "
                              "total_iters, power, t_max, eta_min, t_0, t_mult, start_factor, end_factor, "
                              "max_lr, total_steps, pct_start, anneal_linear, div_factor, "
                              "final_div_factor, three_phase, warmup_start_factor)");
    }
    std::sort(s.milestones.begin(), s.milestones.end());
    return s;
}

// "max": the largest batch whose activations fit in 80% of the free memory, measured
// from one forward+backward of a 64-sample batch.
int64_t largest_batch(RunState& run, const DataSources& shape, int64_t samples) {
    nn::Model& model = *run.model;
    const cudaStream_t stream = run.compute_stream();
    const Device device = run.on_device ? Device::cuda : Device::cpu;
    const int64_t probe = 64;
    size_t pixels = size_t(probe) * shape.channels * shape.height * shape.width;
    nn::FlatBuffer images(model.backend(), pixels * sizeof(float), "batch-size probe images");
    nn::FlatBuffer labels(model.backend(), probe * sizeof(int32_t), "batch-size probe labels");
    images.zero(stream);
    labels.zero(stream);
    Tensor x = make_tensor(images.data(), DType::f32, {probe, shape.channels, shape.height, shape.width}, device);
    Tensor y = make_tensor(labels.data(), DType::i32, {probe}, device);
    model.reset_activation_peak();
    Tensor logits = model.forward(x, true);
    nn::LossOutput out = model.loss(logits, y, 1.0f);
    model.backward(out.dlogits, ops::GradWrite::store);
    if (run.on_device) EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
    double per_sample = double(model.activation_bytes()) / probe;
    double available = 0;
    if (run.on_device) {
        size_t free_bytes = 0, total = 0;
        EMBER_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
        available = 0.8 * double(free_bytes);
    } else {
        std::ifstream meminfo("/proc/meminfo");
        std::string key;
        double kib = 0;
        while (meminfo >> key >> kib)
            if (key == "MemAvailable:") break;
        available = 0.25 * kib * 1024.0;  // the CPU backend gains nothing from huge batches
    }
    int64_t batch = static_cast<int64_t>(available / std::max(per_sample, 1.0));
    batch = std::clamp<int64_t>(batch / 64 * 64, 64, std::min<int64_t>(65536, samples));
    run.observer->info(fmt::format("batch size max: {} ({:.1f} KiB of activations per sample, {:.2f} GiB usable)",
                                   batch, per_sample / 1024.0, available / 1073741824.0));
    return batch;
}

}  // namespace

void choose_backend(RunState& run) {
    TrainConfig& config = run.config;
    CudaRuntimeStatus cuda = cuda_runtime_status();
    const bool has_gpu = cuda.device_count > 0;
    if (config.backend == "cuda" && !has_gpu)
        throw ConfigError("train.backend = \"cuda\" but there is no CUDA device: " + cuda.reason);
    run.on_device = config.backend != "cpu" && has_gpu;
    // Launched by mpirun/srun: one rank per process (and GPU); otherwise a single process.
    run.dist = std::make_unique<distributed::Context>(run.on_device ? Device::cuda : Device::cpu);
    static SilentObserver silent;
    run.observer = run.dist->is_root() ? &run.root_observer : &silent;
    TrainObserver& observer = *run.observer;
    if (run.dist->distributed())
        observer.info(fmt::format("distributed: {} ranks ({} backend), data-parallel with bucketed all-reduce",
                                  run.dist->world_size(), run.on_device ? "NCCL" : "MPI"));
    if (config.backend == "auto" && !has_gpu)
        observer.info("no CUDA device (" + cuda.reason + "): training on the CPU backend");
    if (!run.on_device && !std::getenv("OPENBLAS_NUM_THREADS")) {
        // A core per loader worker until the loader's need is measured (thread_split.h).
        const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
        const int threads = initial_compute_threads(cores, config.workers);
        openblas_set_num_threads(threads);
        const bool measure = config.workers > 0 && threads < cores;
        if (measure) run.cpu_cores = cores;
        observer.info(fmt::format("cpu backend: {} compute thread{} ({} cores, {} loader workers{})", threads,
                                  threads == 1 ? "" : "s", cores, config.workers,
                                  measure ? "; the split is measured over the first steps" : ""));
    }
    run.policy = amp::AutocastPolicy{amp::parse_precision(config.precision)};
    if (run.policy.low_precision() && !run.on_device) {
        observer.info("precision " + config.precision + " needs the cuda backend: training in fp32");
        run.policy.precision = amp::Precision::fp32;
        config.precision = "fp32";
    }
    if (config.cuda_graph && !run.on_device) {
        observer.info("switches.cuda_graph needs the cuda backend: running eagerly");
        config.cuda_graph = false;
    }
    if (config.channels_last && config.model == "mlp")
        observer.info(
            "switches.channels_last: the mlp has no convolutions; its input is reordered to nhwc and "
            "back at the flatten (no gain, results unchanged)");

    run.summary.backend = run.on_device ? "cuda" : "cpu";
    run.summary.device = run.on_device ? cuda_devices().at(0).name : "cpu";
    run.summary.model = config.model;
    if (run.on_device) {
        // A blocking stream: ordered with the legacy default stream that plain
        // cudaMemcpy uses, while the loader's copy stream still overlaps it.
        run.stream = std::make_unique<Stream>(/*non_blocking=*/false);
        CudaContextOptions options;
        options.stream = run.stream->get();
        options.cudnn_benchmark = config.cudnn_benchmark;
        options.allow_tf32 = config.tf32;
        options.deterministic = config.deterministic;
        run.cuda = std::make_unique<CudaContext>(options);
    }
}

void build_model(RunState& run) {
    const TrainConfig& config = run.config;
    nn::ModelOptions model_options;
    model_options.conv_bias_before_bn = config.conv_bias_before_bn;
    run.model = nn::make_model(config.model, model_options);
    nn::BuildOptions build;
    build.backend = run.on_device ? Device::cuda : Device::cpu;
    build.cuda = run.cuda.get();
    build.activation_dtype = run.policy.compute_dtype();
    build.seed = config.seed;
    build.switches.fused_gelu = config.fused_gelu;
    build.switches.fused_layernorm = config.fused_layernorm;
    build.switches.per_layer_nvtx = config.layer_ranges;
    build.channels_last = config.channels_last;
    run.model->build(build);
    if (config.activation_checkpointing) run.model->checkpoint_composite_layers(true);
    run.summary.parameters = static_cast<int64_t>(run.model->parameters().parameter_count());
}

void open_data(RunState& run) {
    const TrainConfig& config = run.config;
    DataSources probe_shape;  // image geometry of Fashion-MNIST before the data loads
    if (config.batch_size == "max") {
        int64_t samples = config.train_limit > 0 ? config.train_limit : 60000;
        run.batch_size = largest_batch(run, probe_shape, samples);
    } else {
        run.batch_size = std::stoll(config.batch_size);
    }
    run.summary.batch_size = run.batch_size;
    run.data = make_data_sources(config, run.batch_size, run.on_device, run.dist->rank(), run.dist->world_size());
    TrainObserver& observer = *run.observer;
    if (!run.data.note.empty()) observer.info(run.data.note);
    observer.info(fmt::format("model {} ({} parameters) on {}, batch {}, {}", config.model, run.summary.parameters,
                              run.summary.device, run.batch_size, config.precision));
    observer.info("train data: " + run.data.train->describe());
    if (run.batch_size % config.grad_accumulation != 0)
        throw ConfigError(
            fmt::format("data.batch_size = {} does not divide into train.grad_accumulation = {} "
                        "micro-batches",
                        run.batch_size, config.grad_accumulation));
    run.steps_per_epoch = run.data.train->batches_per_epoch();
    if (run.steps_per_epoch <= 0)
        throw ConfigError(
            fmt::format("an epoch holds no batch of {}: the training set is smaller than one batch "
                        "(data.train_limit, data.batch_size, data.drop_last)",
                        run.batch_size));
    run.total_steps = run.steps_per_epoch * config.epochs;
    if (config.max_steps > 0) run.total_steps = std::min(run.total_steps, config.max_steps);
}

void build_optimizer(RunState& run) {
    const TrainConfig& config = run.config;
    nn::ParameterStore& parameters = run.model->parameters();
    const optim::OptimizerBackend optimizer_backend =
        !run.on_device
            ? optim::OptimizerBackend::cpu
            : (config.fused_optimizer ? optim::OptimizerBackend::cuda_fused : optim::OptimizerBackend::cuda_per_tensor);
    const bool zero_one = config.zero == 1 && run.dist->distributed();
    if (config.zero == 1 && !run.dist->distributed())
        run.observer->info("distributed.zero = 1 shards the optimizer across ranks: a single process keeps it whole");
    // fp16's loss scaler decides per rank whether a step overflowed; under ZeRO-1 each
    // rank sees only its shard of the reduced gradients, so the decisions could differ.
    if (zero_one && run.policy.needs_loss_scaling())
        throw ConfigError("distributed.zero = 1 with train.precision = \"" + config.precision +
                          "\": the loss scaler's overflow decision is per rank and ZeRO-1 shards the gradients; "
                          "use bf16 (no loss scaling), fp32, or distributed.zero = 0");
    try {
        if (zero_one) {
            auto owned = std::make_unique<distributed::ShardedOptimizer>(
                config.optimizer, config.optimizer_params, parameters.segments(), parameters.flat_length(),
                optimizer_backend, run.dist->communicator());
            run.sharded = owned.get();
            run.optimizer = std::move(owned);
        } else {
            run.optimizer = optim::make_optimizer(config.optimizer, config.optimizer_params, parameters.segments(),
                                                  optimizer_backend);
        }
    } catch (const std::invalid_argument& e) {
        throw ConfigError(std::string(zero_one ? "[optimizer] with distributed.zero = 1: " : "[optimizer] ") +
                          e.what());
    }
    if (run.optimizer->kind() == optim::OptimizerKind::lbfgs)
        throw ConfigError(
            "optimizer.name = \"lbfgs\" is for small full-batch problems "
            "(see samples/train_mlp_cpu), not mini-batch training");
    try {
        run.schedule = optim::make_schedule(schedule_config(config, run.optimizer->lr(), run.total_steps));
    } catch (const std::invalid_argument& e) {
        throw ConfigError(std::string("[schedule] ") + e.what());
    }
}

void build_step(RunState& run) {
    const TrainConfig& config = run.config;
    TrainObserver& observer = *run.observer;
    distributed::Context& dist = *run.dist;
    const bool zero_one = run.sharded != nullptr;
    nn::TrainerOptions options;
    options.autocast = run.policy;
    options.accumulation_steps = config.grad_accumulation;
    options.grads_set_to_none = config.grads_to_none;
    options.cuda_graph = config.cuda_graph;
    options.clip_grad_norm = config.clip_grad_norm;
    // Reading the loss back synchronizes with the GPU: there, only every 20th step.
    options.loss_read_interval = run.on_device ? 20 : 1;
    if (dist.distributed()) {
        if (options.cuda_graph) {
            observer.info("switches.cuda_graph is off in data-parallel runs (all-reduce launches from backward)");
            options.cuda_graph = false;
        }
        distributed::DataParallelOptions parallel;
        parallel.bucket_bytes = static_cast<std::size_t>(config.bucket_mb * (1 << 20));
        parallel.first_bucket_bytes = static_cast<std::size_t>(config.first_bucket_mb * (1 << 20));
        parallel.overlap = config.overlap;
        parallel.reduction =
            zero_one ? distributed::GradientReduction::reduce_scatter : distributed::GradientReduction::all_reduce;
        run.data_parallel = std::make_unique<distributed::DataParallel>(*run.model, dist.communicator(), parallel);
        observer.info(fmt::format("data parallel: {} gradient buckets ({:g} MiB, first {:g} MiB), overlap {}{}",
                                  run.data_parallel->buckets().size(), config.bucket_mb, config.first_bucket_mb,
                                  config.overlap ? "on" : "off",
                                  zero_one ? ", ZeRO-1 (reduce-scatter, sharded optimizer state, all-gather)" : ""));
        run.data_parallel->broadcast_parameters();  // every rank starts from rank 0's weights
        options.gradient_sync = run.data_parallel.get();
    }
    // SyncBatchNorm: every BatchNorm of the model (residual blocks included) normalizes
    // by the statistics of all ranks' batches.
    if (config.sync_batchnorm && !dist.distributed())
        observer.info("distributed.sync_batchnorm: a single process already normalizes over its whole batch");
    if (config.sync_batchnorm && dist.distributed()) {
        if (run.on_device)
            throw ConfigError(
                "distributed.sync_batchnorm = true runs on the cpu backend only for now (the CUDA "
                "version is not written); set it to false or train.backend = \"cpu\"");
        run.batchnorm_sync = std::make_unique<distributed::BatchNormSync>(dist.communicator());
        run.model->context().batchnorm_sync = run.batchnorm_sync.get();
        observer.info("SyncBatchNorm: batch statistics over all ranks");
    }
    run.trainer = std::make_unique<nn::Trainer>(*run.model, *run.optimizer, options);
}

void resume(RunState& run) {
    const TrainConfig& config = run.config;
    if (config.resume.empty()) return;
    try {
        run.position = checkpoint::load_checkpoint(config.resume, *run.model, *run.optimizer, *run.trainer);
    } catch (const checkpoint::CheckpointError& e) {
        throw ConfigError(std::string("output.resume: ") + e.what());
    }
    run.observer->info(fmt::format("resumed from {} at step {} (epoch {}, batch {})", config.resume,
                                   run.trainer->steps(), run.position.sampler_epoch, run.position.sampler_index));
}

}  // namespace ember::train
