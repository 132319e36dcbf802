// trainer.cpp: the training loop. Read top to bottom: setup (backend, data, model,
// optimizer, schedule, AMP), then epochs of steps, evaluation, checkpoints.
#include "engine/train/run.h"
#include "common/os.h"

#include "engine/amp/autocast.h"
#include "engine/amp/loss_scaler.h"
#include "engine/core/cuda_check.h"
#include "engine/core/device.h"
#include "engine/core/nvtx.h"
#include "engine/core/stream.h"
#include "engine/cuda/context.h"
#include "engine/distributed/context.h"
#include "engine/distributed/data_parallel.h"
#include "engine/distributed/sharded_optimizer.h"
#include "engine/distributed/sync_batchnorm.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/nn/models.h"
#include "engine/nn/training_step.h"
#include "engine/optim/optimizer.h"
#include "engine/optim/schedules.h"
#include "engine/train/batch_source.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

// OpenBLAS (the CPU backend's GEMM) sizes its own thread pool.
extern "C" void openblas_set_num_threads(int threads);

namespace ember::train {
namespace {

using Clock = os::SteadyClock;
using os::seconds_between;

// ---------------------------------------------------------------------------------
// Configuration -> engine objects
// ---------------------------------------------------------------------------------

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
        if (key == "gamma") s.gamma = value;
        else if (key == "step_size") s.step_size = integer();
        else if (key.rfind("milestone", 0) == 0) s.milestones.push_back(integer());
        else if (key == "total_iters") s.total_iters = integer();
        else if (key == "power") s.power = value;
        else if (key == "t_max") s.t_max = integer();
        else if (key == "eta_min") s.eta_min = value;
        else if (key == "t_0") s.t_0 = integer();
        else if (key == "t_mult") s.t_mult = integer();
        else if (key == "start_factor") s.start_factor = value;
        else if (key == "end_factor") s.end_factor = value;
        else if (key == "max_lr") s.max_lr = value;
        else if (key == "total_steps") s.total_steps = integer();
        else if (key == "pct_start") s.pct_start = value;
        else if (key == "anneal_linear") s.anneal_strategy = value != 0 ? "linear" : "cos";
        else if (key == "div_factor") s.div_factor = value;
        else if (key == "final_div_factor") s.final_div_factor = value;
        else if (key == "three_phase") s.three_phase = value != 0;
        else if (key == "warmup_start_factor") s.warmup_start_factor = value;
        else
            throw ConfigError("schedule." + key + " is not a schedule field (gamma, step_size, milestone1.., "
                              "total_iters, power, t_max, eta_min, t_0, t_mult, start_factor, end_factor, "
                              "max_lr, total_steps, pct_start, anneal_linear, div_factor, "
                              "final_div_factor, three_phase, warmup_start_factor)");
    }
    std::sort(s.milestones.begin(), s.milestones.end());
    return s;
}

// Everything about the device side of a run: the compute stream and the context
// that are only built when training on a GPU.
struct DeviceState {
    std::unique_ptr<Stream> stream;
    std::unique_ptr<CudaContext> context;
    cudaStream_t raw() const { return stream ? stream->get() : nullptr; }
};

struct Inputs {
    Tensor images;
    Tensor labels;
};

Inputs inputs_of(const data::Batch& b, bool on_device, cudaStream_t stream) {
    Inputs in;
    if (on_device) {
        if (b.ready) EMBER_CUDA_CHECK(cudaStreamWaitEvent(stream, reinterpret_cast<cudaEvent_t>(b.ready), 0));
        in.images = make_tensor(const_cast<float*>(b.device_images), DType::f32,
                                {b.size, b.shape.channels, b.shape.height, b.shape.width}, Device::cuda);
        in.labels = make_tensor(const_cast<int32_t*>(b.device_labels), DType::i32, {b.size}, Device::cuda);
    } else {
        in.images = make_tensor(const_cast<float*>(b.images), DType::f32,
                                {b.size, b.shape.channels, b.shape.height, b.shape.width});
        in.labels = make_tensor(const_cast<int32_t*>(b.labels), DType::i32, {b.size});
    }
    return in;
}

struct EvalResult {
    double loss = 0, accuracy = 0, seconds = 0;
};

EvalResult evaluate(nn::Trainer& trainer, BatchSource& test, bool on_device, cudaStream_t stream) {
    nvtx::ScopedRange range("evaluation", nvtx::Category::evaluation);
    auto start = Clock::now();
    test.start_epoch(0);
    double loss_sum = 0;
    int64_t correct = 0, seen = 0;
    while (const data::Batch* b = test.next()) {
        Inputs in = inputs_of(*b, on_device, stream);
        nn::EvaluationResult r = trainer.evaluate(in.images, in.labels);
        loss_sum += r.loss * r.samples;
        correct += r.correct;
        seen += r.samples;
        test.release(b, reinterpret_cast<CUstream_st*>(stream));
    }
    EvalResult result;
    result.loss = seen ? loss_sum / seen : 0;
    result.accuracy = seen ? double(correct) / seen : 0;
    result.seconds = seconds_between(start, Clock::now());
    return result;
}

// "max": the largest batch whose activations fit in 80% of the free memory, measured
// from one forward+backward of a 64-sample batch.
int64_t largest_batch(nn::Model& model, bool on_device, const DataSources& shape, int64_t samples,
                      cudaStream_t stream, TrainObserver& observer) {
    const int64_t probe = 64;
    size_t pixels = size_t(probe) * shape.channels * shape.height * shape.width;
    nn::FlatBuffer images(model.backend(), pixels * sizeof(float), "batch-size probe images");
    nn::FlatBuffer labels(model.backend(), probe * sizeof(int32_t), "batch-size probe labels");
    images.zero(stream);
    labels.zero(stream);
    Tensor x = make_tensor(images.data(), DType::f32, {probe, shape.channels, shape.height, shape.width},
                           on_device ? Device::cuda : Device::cpu);
    Tensor y = make_tensor(labels.data(), DType::i32, {probe}, on_device ? Device::cuda : Device::cpu);
    model.reset_activation_peak();
    Tensor logits = model.forward(x, true);
    nn::LossOutput out = model.loss(logits, y, 1.0f);
    model.backward(out.dlogits, ops::GradWrite::store);
    if (on_device) EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
    double per_sample = double(model.activation_bytes()) / probe;
    double available = 0;
    if (on_device) {
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
    observer.info(fmt::format("batch size max: {} ({:.1f} KiB of activations per sample, {:.2f} GiB usable)",
                              batch, per_sample / 1024.0, available / 1073741824.0));
    return batch;
}

// What non-root ranks report: nothing (rank 0 speaks for the job).
class SilentObserver : public TrainObserver {};

// Busy work of a given length: the injected imbalance must occupy the rank like
// compute does, not sleep.
void spin_for(double seconds) {
    auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    volatile uint64_t sink = 0;
    while (Clock::now() < until) sink = sink + 1;
}

class MetricsFile {
public:
    explicit MetricsFile(const std::string& path) : path_(path) {
        if (path.empty()) return;
        out_.open(path, std::ios::out | std::ios::trunc);
        if (!out_) throw ConfigError("output.metrics: cannot write " + path);
    }
    void write(const nlohmann::json& record) {
        if (!out_.is_open()) return;
        out_ << record.dump() << '\n';
        out_.flush();  // a killed run keeps every line written so far
        if (!out_) throw std::runtime_error("writing metrics to " + path_ + " failed");
    }

private:
    std::string path_;
    std::ofstream out_;
};

}  // namespace

TrainSummary run_training(const TrainConfig& config_in, TrainObserver& root_observer) {
    TrainConfig config = config_in;
    validate(config);

    // Per-op synchronization (a debug aid): every kernel launch waits for the kernel,
    // set before the CUDA context exists.
    if (config.sync_each_op) setenv("CUDA_LAUNCH_BLOCKING", "1", 1);

    // --- Device --------------------------------------------------------------------
    CudaRuntimeStatus cuda = cuda_runtime_status();
    bool has_gpu = cuda.device_count > 0;
    if (config.backend == "cuda" && !has_gpu)
        throw ConfigError("train.backend = \"cuda\" but there is no CUDA device: " + cuda.reason);
    bool on_device = config.backend != "cpu" && has_gpu;
    // Launched by mpirun/srun: one rank per process (and GPU); otherwise a single process.
    distributed::Context dist(on_device ? Device::cuda : Device::cpu);
    SilentObserver silent;
    TrainObserver& observer = dist.is_root() ? root_observer : silent;
    if (dist.distributed())
        observer.info(fmt::format("distributed: {} ranks ({} backend), data-parallel with bucketed all-reduce",
                                  dist.world_size(), on_device ? "NCCL" : "MPI"));
    if (config.backend == "auto" && !has_gpu)
        observer.info("no CUDA device (" + cuda.reason + "): training on the CPU backend");
    if (!on_device && !std::getenv("OPENBLAS_NUM_THREADS")) {
        // GEMM threads spin while they wait; sharing the cores with the loader's
        // workers makes them slower, not faster (CNN on 2 cores, 2 workers:
        // 366 img/s with one BLAS thread, 110 with two). Leave the workers a core.
        unsigned cores = std::max(1u, std::thread::hardware_concurrency());
        int threads = std::max(1, int(cores) - std::max(0, config.workers));
        openblas_set_num_threads(threads);
        observer.info(fmt::format("cpu backend: {} GEMM thread{} ({} cores, {} loader workers)", threads,
                                  threads == 1 ? "" : "s", cores, config.workers));
    }
    amp::AutocastPolicy policy{amp::parse_precision(config.precision)};
    if (policy.low_precision() && !on_device) {
        observer.info("precision " + config.precision + " needs the cuda backend: training in fp32");
        policy.precision = amp::Precision::fp32;
        config.precision = "fp32";
    }
    if (config.cuda_graph && !on_device) {
        observer.info("switches.cuda_graph needs the cuda backend: running eagerly");
        config.cuda_graph = false;
    }
    if (config.channels_last && config.model == "mlp")
        observer.info("switches.channels_last: the mlp has no convolutions; its input is reordered to nhwc and "
                      "back at the flatten (no gain, results unchanged)");

    TrainSummary summary;
    summary.backend = on_device ? "cuda" : "cpu";
    summary.device = on_device ? cuda_devices().at(0).name : "cpu";
    summary.model = config.model;

    DeviceState device;
    if (on_device) {
        // A blocking stream: ordered with the legacy default stream that plain
        // cudaMemcpy uses, while the loader's copy stream still overlaps it.
        device.stream = std::make_unique<Stream>(/*non_blocking=*/false);
        CudaContextOptions options;
        options.stream = device.stream->get();
        options.cudnn_benchmark = config.cudnn_benchmark;
        options.allow_tf32 = config.tf32;
        device.context = std::make_unique<CudaContext>(options);
    }
    cudaStream_t stream = device.raw();
    auto* consumer = reinterpret_cast<CUstream_st*>(stream);

    // --- Model ------------------------------------------------------------------------
    nn::ModelOptions model_options;
    model_options.conv_bias_before_bn = config.conv_bias_before_bn;
    std::unique_ptr<nn::Model> model = nn::make_model(config.model, model_options);
    nn::BuildOptions build;
    build.backend = on_device ? Device::cuda : Device::cpu;
    build.cuda = device.context.get();
    build.activation_dtype = policy.compute_dtype();
    build.seed = config.seed;
    build.switches.fused_gelu = config.fused_gelu;
    build.switches.fused_layernorm = config.fused_layernorm;
    build.channels_last = config.channels_last;
    model->build(build);
    if (config.activation_checkpointing) model->checkpoint_composite_layers(true);
    nn::ParameterStore& parameters = model->parameters();
    const std::size_t parameter_count = parameters.parameter_count();
    summary.parameters = static_cast<int64_t>(parameters.parameter_count());

    // --- Data ---------------------------------------------------------------------------
    DataSources probe_shape;  // image geometry of Fashion-MNIST before the data loads
    int64_t batch_size = 0;
    if (config.batch_size == "max") {
        int64_t samples = config.train_limit > 0 ? config.train_limit : 60000;
        batch_size = largest_batch(*model, on_device, probe_shape, samples, stream, observer);
    } else {
        batch_size = std::stoll(config.batch_size);
    }
    summary.batch_size = batch_size;
    DataSources data = make_data_sources(config, batch_size, on_device, dist.rank(), dist.world_size());
    if (!data.note.empty()) observer.info(data.note);
    observer.info(fmt::format("model {} ({} parameters) on {}, batch {}, {}", config.model,
                              summary.parameters, summary.device, batch_size, config.precision));
    observer.info("train data: " + data.train->describe());

    // --- Optimizer, schedule, the step ---------------------------------------------------
    optim::OptimizerBackend optimizer_backend =
        !on_device ? optim::OptimizerBackend::cpu
                   : (config.fused_optimizer ? optim::OptimizerBackend::cuda_fused
                                             : optim::OptimizerBackend::cuda_per_tensor);
    std::unique_ptr<optim::Optimizer> optimizer;
    distributed::ShardedOptimizer* sharded = nullptr;  // ZeRO-1's optimizer, when distributed.zero = 1
    const bool zero_one = config.zero == 1 && dist.distributed();
    if (config.zero == 1 && !dist.distributed())
        observer.info("distributed.zero = 1 shards the optimizer across ranks: a single process keeps it whole");
    // fp16's loss scaler decides per rank whether a step overflowed; under ZeRO-1 each
    // rank sees only its shard of the reduced gradients, so the decisions could differ.
    if (zero_one && policy.needs_loss_scaling())
        throw ConfigError("distributed.zero = 1 with train.precision = \"" + config.precision +
                          "\": the loss scaler's overflow decision is per rank and ZeRO-1 shards the gradients; "
                          "use bf16 (no loss scaling), fp32, or distributed.zero = 0");
    try {
        if (zero_one) {
            auto owned = std::make_unique<distributed::ShardedOptimizer>(config.optimizer, config.optimizer_params,
                                                                  parameters.segments(), parameters.flat_length(),
                                                                  optimizer_backend, dist.communicator());
            sharded = owned.get();
            optimizer = std::move(owned);
        } else {
            optimizer = optim::make_optimizer(config.optimizer, config.optimizer_params, parameters.segments(),
                                              optimizer_backend);
        }
    } catch (const std::invalid_argument& e) {
        throw ConfigError(std::string(zero_one ? "[optimizer] with distributed.zero = 1: " : "[optimizer] ") + e.what());
    }
    if (optimizer->kind() == optim::OptimizerKind::lbfgs)
        throw ConfigError("optimizer.name = \"lbfgs\" is for small full-batch problems "
                          "(see samples/train_mlp_cpu), not mini-batch training");
    if (batch_size % config.grad_accumulation != 0)
        throw ConfigError(fmt::format("data.batch_size = {} does not divide into train.grad_accumulation = {} "
                                      "micro-batches", batch_size, config.grad_accumulation));
    const int64_t steps_per_epoch = data.train->batches_per_epoch();
    int64_t total_steps = steps_per_epoch * config.epochs;
    if (config.max_steps > 0) total_steps = std::min(total_steps, config.max_steps);
    std::unique_ptr<optim::LrSchedule> schedule;
    try {
        schedule = optim::make_schedule(schedule_config(config, optimizer->lr(), total_steps));
    } catch (const std::invalid_argument& e) {
        throw ConfigError(std::string("[schedule] ") + e.what());
    }

    nn::TrainerOptions trainer_options;
    trainer_options.autocast = policy;
    trainer_options.accumulation_steps = config.grad_accumulation;
    trainer_options.grads_set_to_none = config.grads_to_none;
    trainer_options.cuda_graph = config.cuda_graph;
    trainer_options.clip_grad_norm = config.clip_grad_norm;
    // Reading the loss back synchronizes with the GPU: there, only every 20th step.
    trainer_options.loss_read_interval = on_device ? 20 : 1;
    std::unique_ptr<distributed::DataParallel> data_parallel;
    if (dist.distributed()) {
        if (trainer_options.cuda_graph) {
            observer.info("switches.cuda_graph is off in data-parallel runs (all-reduce launches from backward)");
            trainer_options.cuda_graph = false;
        }
        distributed::DataParallelOptions parallel;
        parallel.bucket_bytes = static_cast<std::size_t>(config.bucket_mb * (1 << 20));
        parallel.first_bucket_bytes = static_cast<std::size_t>(config.first_bucket_mb * (1 << 20));
        parallel.overlap = config.overlap;
        parallel.reduction = zero_one ? distributed::GradientReduction::reduce_scatter : distributed::GradientReduction::all_reduce;
        data_parallel = std::make_unique<distributed::DataParallel>(*model, dist.communicator(), parallel);
        observer.info(fmt::format("data parallel: {} gradient buckets ({:g} MiB, first {:g} MiB), overlap {}{}",
                                  data_parallel->buckets().size(), config.bucket_mb, config.first_bucket_mb,
                                  config.overlap ? "on" : "off",
                                  zero_one ? ", ZeRO-1 (reduce-scatter, sharded optimizer state, all-gather)" : ""));
        data_parallel->broadcast_parameters();  // every rank starts from rank 0's weights
        trainer_options.gradient_sync = data_parallel.get();
    }
    // SyncBatchNorm: every BatchNorm of the model (residual blocks included) normalizes
    // by the statistics of all ranks' batches.
    std::unique_ptr<distributed::BatchNormSync> batchnorm_sync;
    if (config.sync_batchnorm && !dist.distributed())
        observer.info("distributed.sync_batchnorm: a single process already normalizes over its whole batch");
    if (config.sync_batchnorm && dist.distributed()) {
        if (on_device)
            throw ConfigError("distributed.sync_batchnorm = true runs on the cpu backend only for now (the CUDA "
                              "version is not written); set it to false or train.backend = \"cpu\"");
        batchnorm_sync = std::make_unique<distributed::BatchNormSync>(dist.communicator());
        model->context().batchnorm_sync = batchnorm_sync.get();
        observer.info("SyncBatchNorm: batch statistics over all ranks");
    }
    nn::Trainer trainer(*model, *optimizer, trainer_options);

    // --- Resume ----------------------------------------------------------------------------
    checkpoint::TrainingPosition position;
    if (!config.resume.empty()) {
        try {
            position = checkpoint::load_checkpoint(config.resume, *model, *optimizer, trainer);
        } catch (const checkpoint::CheckpointError& e) {
            throw ConfigError(std::string("output.resume: ") + e.what());
        }
        observer.info(fmt::format("resumed from {} at step {} (epoch {}, batch {})", config.resume,
                                  trainer.steps(), position.sampler_epoch, position.sampler_index));
    }
    // Called on every rank at the same steps: under ZeRO-1 the optimizer state is first
    // gathered from the shards (a collective); rank 0 alone writes the file.
    auto save = [&](int64_t epoch, int64_t batch_in_epoch) -> std::string {
        nvtx::ScopedRange range("checkpoint", nvtx::Category::checkpoint);
        if (sharded) sharded->gather_state(stream);
        if (!dist.is_root()) return {};
        std::string path = config.checkpoint_dir + "/last.ckpt";
        std::filesystem::create_directories(config.checkpoint_dir);
        checkpoint::TrainingPosition here;
        here.epoch = epoch;
        here.sampler_epoch = epoch;
        here.sampler_index = batch_in_epoch;
        here.rng_state = config.seed;
        checkpoint::save_checkpoint(path, *model, *optimizer, trainer, here);
        return path;
    };

    MetricsFile metrics(dist.is_root() ? config.metrics_path : std::string());
    metrics.write({{"type", "config"}, {"model", config.model}, {"backend", summary.backend},
                   {"device", summary.device}, {"parameters", summary.parameters},
                   {"batch_size", batch_size}, {"precision", config.precision},
                   {"optimizer", config.optimizer}, {"epochs", config.epochs}});

    // --- Epochs ---------------------------------------------------------------------------------
    if (dist.distributed()) dist.record_clock_anchor();  // `ember merge` aligns the rank files on these
    const double imbalance = dist.distributed() ? config.imbalance * dist.rank() / (dist.world_size() - 1) : 0.0;
    double last_step_seconds = 0;
    auto run_start = Clock::now();
    const int64_t first_step = trainer.steps();
    double train_seconds = 0;
    int64_t images = 0;
    bool stop = config.max_steps > 0 && trainer.steps() >= config.max_steps;
    EvalResult last_eval;
    for (int64_t epoch = position.sampler_epoch; epoch < config.epochs && !stop; ++epoch) {
        auto epoch_start = Clock::now();
        double wait_before = data.train->wait_seconds();
        data.train->start_epoch(epoch);
        int64_t batch_index = 0;
        // Resuming mid-epoch: the batches already trained on come again in the same
        // order (the sampler is seeded by epoch) and are skipped.
        if (epoch == position.sampler_epoch)
            for (; batch_index < position.sampler_index; ++batch_index) {
                const data::Batch* b = data.train->next();
                if (!b) break;
                data.train->release(b, consumer);
            }
        double epoch_loss_sum = 0;
        int64_t epoch_images = 0, epoch_measured = 0;
        while (!stop && batch_index < steps_per_epoch) {
            int64_t step = trainer.steps();
            nvtx::ScopedRange step_range("step", nvtx::Category::step, static_cast<uint64_t>(step));
            const data::Batch* b = data.train->next();
            if (!b) break;
            ++batch_index;
            double lr = schedule->lr(step);
            optimizer->set_lr(lr);
            Inputs in = inputs_of(*b, on_device, stream);
            if (imbalance > 0 && last_step_seconds > 0) {
                nvtx::ScopedRange extra("imbalance", nvtx::Category::compute);
                spin_for(imbalance * last_step_seconds);
            }
            auto step_start = Clock::now();
            nn::StepResult result = trainer.step(in.images, in.labels);
            last_step_seconds = seconds_between(step_start, Clock::now());
            if (config.anomaly_check && !policy.needs_loss_scaling()) {  // fp16: the scaler owns overflow
                std::vector<float> host(parameter_count);
                parameters.gradients().download(host.data(), parameter_count * sizeof(float));
                if (!amp::all_finite_cpu(host.data(), parameter_count))
                    throw std::runtime_error(fmt::format("anomaly check: a gradient is NaN or Inf at step {} "
                                                         "(epoch {}, batch {})", step, epoch, batch_index));
            }
            int64_t batch_samples = b->size;
            data.train->release(b, consumer);
            images += batch_samples;
            epoch_images += batch_samples;
            const bool measured = !std::isnan(result.loss);
            if (measured) {
                epoch_loss_sum += result.loss * batch_samples;
                epoch_measured += batch_samples;
            }

            StepReport report;
            report.step = trainer.steps();
            report.total_steps = total_steps;
            report.epoch = epoch;
            report.batch = batch_index;
            report.batches_per_epoch = steps_per_epoch;
            report.images = batch_samples;
            report.lr = lr;
            report.loss_measured = measured;
            report.loss = result.loss;
            report.loss_scale = result.loss_scale;
            report.skipped = !result.applied;
            double epoch_elapsed = seconds_between(epoch_start, Clock::now());
            report.elapsed_seconds = train_seconds + epoch_elapsed;
            report.images_per_second = epoch_images / std::max(epoch_elapsed, 1e-9);
            double per_step = report.elapsed_seconds / double(std::max<int64_t>(1, report.step - first_step));
            report.eta_seconds = per_step * double(total_steps - report.step);
            if (measured) nvtx::counter("loss", result.loss);
            nvtx::counter("lr", lr);
            if (policy.needs_loss_scaling()) nvtx::counter("loss_scale", result.loss_scale);
            observer.step(report);
            if (measured)
                metrics.write({{"type", "step"}, {"step", report.step}, {"epoch", epoch}, {"loss", result.loss},
                           {"lr", lr}, {"loss_scale", result.loss_scale},
                           {"images_per_second", report.images_per_second}, {"skipped", report.skipped}});

            if (config.max_steps > 0 && trainer.steps() >= config.max_steps) stop = true;
            if (!config.checkpoint_dir.empty() && config.checkpoint_every > 0 &&
                trainer.steps() % config.checkpoint_every == 0)
                summary.last_checkpoint = batch_index >= steps_per_epoch ? save(epoch + 1, 0) : save(epoch, batch_index);
        }
        if (on_device) EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
        double epoch_seconds = seconds_between(epoch_start, Clock::now());
        if (dist.distributed()) dist.record_clock_anchor();
        train_seconds += epoch_seconds;
        nvtx::counter("images_per_second", epoch_images / std::max(epoch_seconds, 1e-9));

        last_eval = evaluate(trainer, *data.test, on_device, stream);
        EpochReport er;
        er.epoch = epoch;
        er.steps = trainer.steps();
        er.train_loss = epoch_measured ? epoch_loss_sum / epoch_measured : 0;
        er.test_loss = last_eval.loss;
        er.test_accuracy = last_eval.accuracy;
        er.seconds = epoch_seconds;
        er.images_per_second = epoch_images / std::max(epoch_seconds, 1e-9);
        er.dataloader_wait_seconds = data.train->wait_seconds() - wait_before;
        er.eval_seconds = last_eval.seconds;
        nvtx::counter("test_accuracy", er.test_accuracy);
        observer.epoch(er);
        metrics.write({{"type", "epoch"}, {"epoch", epoch}, {"step", er.steps}, {"train_loss", er.train_loss},
                       {"test_loss", er.test_loss}, {"test_accuracy", er.test_accuracy},
                       {"seconds", er.seconds}, {"images_per_second", er.images_per_second},
                       {"dataloader_wait_seconds", er.dataloader_wait_seconds}});
        summary.best_test_accuracy = std::max(summary.best_test_accuracy, er.test_accuracy);
    }

    if (!config.checkpoint_dir.empty()) summary.last_checkpoint = save(config.epochs, 0);
    summary.steps = trainer.steps();
    summary.images = images;
    summary.seconds = train_seconds;
    summary.images_per_second = images / std::max(train_seconds, 1e-9);
    summary.final_test_accuracy = last_eval.accuracy;
    summary.final_test_loss = last_eval.loss;
    summary.skipped_steps = trainer.optimizer_steps_skipped();
    metrics.write({{"type", "summary"}, {"steps", summary.steps}, {"images", images}, {"seconds", train_seconds},
                   {"images_per_second", summary.images_per_second},
                   {"test_accuracy", summary.final_test_accuracy}, {"test_loss", summary.final_test_loss},
                   {"wall_seconds", seconds_between(run_start, Clock::now())}});
    return summary;
}

}  // namespace ember::train
