// run.cpp: the training run behind `ember train`, read top to bottom: run_training()
// sets the run up phase by phase (setup.cpp), then trains epoch by epoch — each batch
// a `step` NVTX range holding forward, backward and optimizer — with evaluation on
// the test set after each epoch and checkpoints on schedule.
#include "engine/train/run.h"

#include "common/os.h"
#include "engine/amp/loss_scaler.h"
#include "engine/core/allocator.h"
#include "engine/core/cuda_check.h"
#include "engine/core/nvtx.h"
#include "engine/cpu/implementation.h"
#include "engine/train/run_state.h"
#include "engine/train/tensorboard.h"
#include "engine/train/thread_split.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ember::train {
namespace {

using Clock = os::SteadyClock;
using os::seconds_between;

TrainSummary train_epochs(RunState& run);

}  // namespace

TrainSummary run_training(const TrainConfig& config, TrainObserver& observer) {
    RunState run(config, observer);
    validate(run.config);
    // Per-op synchronization (a debug aid): every kernel launch waits for the kernel,
    // set before the CUDA context exists.
    if (run.config.sync_each_op) setenv("CUDA_LAUNCH_BLOCKING", "1", 1);
    choose_backend(run);
    // The phases that allocate the run's long-lived memory (parameters, gradients,
    // optimizer state) are ranges, so a profile attributes that memory to them.
    {
        nvtx::ScopedRange range("setup/model");
        build_model(run);
    }
    open_data(run);
    {
        nvtx::ScopedRange range("setup/optimizer");
        build_optimizer(run);
    }
    {
        nvtx::ScopedRange range("setup/step");
        build_step(run);
    }
    resume(run);
    return train_epochs(run);
}

namespace {

// ---------------------------------------------------------------------------------
// Pieces of an epoch
// ---------------------------------------------------------------------------------

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

EvalResult evaluate(RunState& run) {
    nvtx::ScopedRange range("evaluation", nvtx::Category::evaluation);
    BatchSource& test = *run.data.test;
    const cudaStream_t stream = run.compute_stream();
    auto start = Clock::now();
    test.start_epoch(0);
    double loss_sum = 0;
    int64_t correct = 0, seen = 0;
    while (const data::Batch* b = test.next()) {
        Inputs in = inputs_of(*b, run.on_device, stream);
        nn::EvaluationResult r = run.trainer->evaluate(in.images, in.labels);
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

// Called on every rank at the same steps: under ZeRO-1 the optimizer state is first
// gathered from the shards (a collective); rank 0 alone writes the file.
std::string save_checkpoint(RunState& run, int64_t epoch, int64_t batch_in_epoch) {
    nvtx::ScopedRange range("checkpoint", nvtx::Category::checkpoint);
    if (run.sharded) run.sharded->gather_state(run.compute_stream());
    if (!run.dist->is_root()) return {};
    const TrainConfig& config = run.config;
    std::string path = config.checkpoint_dir + "/last.ckpt";
    std::filesystem::create_directories(config.checkpoint_dir);
    checkpoint::TrainingPosition here;
    here.epoch = epoch;
    here.sampler_epoch = epoch;
    here.sampler_index = batch_in_epoch;
    here.rng_state = config.seed;
    checkpoint::save_checkpoint(path, *run.model, *run.optimizer, *run.trainer, here);
    return path;
}

// ---------------------------------------------------------------------------------
// The epochs
// ---------------------------------------------------------------------------------

// The CPU backend's split of the cores between compute and the loader's workers
// (thread_split.h). Steps 3 to 10 of the run (the first ones also create oneDNN's
// primitives) measure the compute time a step and the loader's CPU time a batch at the
// starting split; when the loader needs less than that split keeps for it, steps 12 to
// 16 try the split it does need (step 11 creates the primitives for the new team), and
// the faster of the two, in wall time a step, loader waits included, stays for the rest
// of the run. A trial, not a formula alone: other work on the machine can make a larger
// team slower (its threads spin waiting for one that was preempted).
class ThreadSplitProbe {
  public:
    void after_step(RunState& run, const BatchSource& train, int64_t steps_done, double compute_seconds) {
        if (run.cpu_cores == 0 || phase_ == Phase::done) return;
        const auto now = std::chrono::steady_clock::now();
        if (steps_done == kFirst) {
            at_first_ = train.loader_stats();
            window_start_ = now;
            return;
        }
        if (phase_ == Phase::measuring && steps_done > kFirst) {
            compute_seconds_ += compute_seconds;
            if (steps_done < kFirst + kWindow) return;
            const data::LoaderStats stats = train.loader_stats();
            const int64_t batches = stats.batches_filled - at_first_.batches_filled;
            start_threads_ = cpu::compute_threads();
            start_seconds_ = seconds_between(window_start_, now) / double(kWindow);
            if (batches <= 0) return finish(run, start_threads_, "");
            split_ = measured_thread_split(run.cpu_cores, run.config.workers, start_threads_,
                                           (stats.fill_cpu_seconds - at_first_.fill_cpu_seconds) / double(batches),
                                           compute_seconds_ / double(kWindow));
            if (split_.compute_threads == start_threads_) return finish(run, start_threads_, "");
            cpu::set_compute_threads(split_.compute_threads);
            phase_ = Phase::trying;
            trial_begins_ = steps_done + 1;  // that step builds the primitives for the new team
            return;
        }
        if (phase_ == Phase::trying) {
            if (steps_done == trial_begins_) window_start_ = now;
            if (steps_done < trial_begins_ + kTrial) return;
            const double trial_seconds = seconds_between(window_start_, now) / double(kTrial);
            const int keep = trial_seconds < 0.97 * start_seconds_ ? split_.compute_threads : start_threads_;
            if (keep != split_.compute_threads) cpu::set_compute_threads(keep);
            finish(run, keep,
                   fmt::format("; tried: {:.1f} ms a step with {} compute thread{}, {:.1f} ms with {}",
                               trial_seconds * 1e3, split_.compute_threads, split_.compute_threads == 1 ? "" : "s",
                               start_seconds_ * 1e3, start_threads_));
        }
    }

  private:
    static constexpr int64_t kFirst = 2, kWindow = 8, kTrial = 5;
    enum class Phase { measuring, trying, done };

    void finish(RunState& run, int threads, const std::string& trial) {
        phase_ = Phase::done;
        if (split_.explanation.empty()) return;
        run.observer->info(fmt::format("cpu backend: {} compute thread{} of {} cores{}; {}", threads,
                                       threads == 1 ? "" : "s", run.cpu_cores, trial, split_.explanation));
    }

    Phase phase_ = Phase::measuring;
    data::LoaderStats at_first_;
    std::chrono::steady_clock::time_point window_start_;
    double compute_seconds_ = 0, start_seconds_ = 0;
    int start_threads_ = 1;
    int64_t trial_begins_ = 0;
    ThreadSplit split_;
};

TrainSummary train_epochs(RunState& run) {
    const TrainConfig& config = run.config;
    TrainObserver& observer = *run.observer;
    distributed::Context& dist = *run.dist;
    nn::Trainer& trainer = *run.trainer;
    BatchSource& train = *run.data.train;
    TrainSummary& summary = run.summary;
    const cudaStream_t stream = run.compute_stream();
    auto* consumer = reinterpret_cast<CUstream_st*>(stream);
    nn::ParameterStore& parameters = run.model->parameters();
    const std::size_t parameter_count = parameters.parameter_count();

    MetricsFile metrics(dist.is_root() ? config.metrics_path : std::string());
    metrics.write({{"type", "config"},
                   {"model", config.model},
                   {"backend", summary.backend},
                   {"device", summary.device},
                   {"parameters", summary.parameters},
                   {"batch_size", run.batch_size},
                   {"precision", config.precision},
                   {"optimizer", config.optimizer},
                   {"epochs", config.epochs}});

    std::unique_ptr<TensorBoardWriter> tensorboard;
    if (dist.is_root() && !config.tensorboard_dir.empty())
        tensorboard = std::make_unique<TensorBoardWriter>(config.tensorboard_dir);
    // Host seconds spent waiting for gradient and parameter collectives so far.
    auto collective_wait_seconds = [&run] {
        return (run.data_parallel ? run.data_parallel->wait_seconds() : 0.0) +
               (run.sharded ? run.sharded->wait_seconds() : 0.0);
    };

    if (dist.distributed()) dist.record_clock_anchor();  // `ember merge` aligns the rank files on these
    const double imbalance = dist.distributed() ? config.imbalance * dist.rank() / (dist.world_size() - 1) : 0.0;
    double last_step_seconds = 0;
    auto run_start = Clock::now();
    const int64_t first_step = trainer.steps();
    ThreadSplitProbe thread_split;
    double train_seconds = 0;
    int64_t images = 0;
    bool stop = config.max_steps > 0 && trainer.steps() >= config.max_steps;
    EvalResult last_eval;
    for (int64_t epoch = run.position.sampler_epoch; epoch < config.epochs && !stop; ++epoch) {
        auto epoch_start = Clock::now();
        double wait_before = train.wait_seconds();
        train.start_epoch(epoch);
        int64_t batch_index = 0;
        // Resuming mid-epoch: the batches already trained on come again in the same
        // order (the sampler is seeded by epoch) and are skipped.
        if (epoch == run.position.sampler_epoch)
            for (; batch_index < run.position.sampler_index; ++batch_index) {
                const data::Batch* b = train.next();
                if (!b) break;
                train.release(b, consumer);
            }
        double epoch_loss_sum = 0;
        int64_t epoch_images = 0, epoch_measured = 0;
        while (!stop && batch_index < run.steps_per_epoch) {
            int64_t step = trainer.steps();
            nvtx::ScopedRange step_range(nvtx::range::kStep, nvtx::Category::step, static_cast<uint64_t>(step));
            const double loader_wait_before = train.wait_seconds();
            const data::Batch* b = train.next();
            if (!b) break;
            const double loader_wait = train.wait_seconds() - loader_wait_before;
            ++batch_index;
            double lr = run.schedule->lr(step);
            run.optimizer->set_lr(lr);
            Inputs in = inputs_of(*b, run.on_device, stream);
            if (imbalance > 0 && last_step_seconds > 0) {
                nvtx::ScopedRange extra("imbalance", nvtx::Category::compute);
                spin_for(imbalance * last_step_seconds);
            }
            auto step_start = Clock::now();
            const double collective_wait_before = collective_wait_seconds();
            nn::StepResult result = trainer.step(in.images, in.labels);
            last_step_seconds = seconds_between(step_start, Clock::now());
            const double collective_wait = collective_wait_seconds() - collective_wait_before;
            thread_split.after_step(run, train, trainer.steps() - first_step, last_step_seconds);
            if (config.anomaly_check && !run.policy.needs_loss_scaling()) {  // fp16: the scaler owns overflow
                std::vector<float> host(parameter_count);
                parameters.gradients().download(host.data(), parameter_count * sizeof(float));
                if (!amp::all_finite_cpu(host.data(), parameter_count))
                    throw std::runtime_error(
                        fmt::format("anomaly check: a gradient is NaN or Inf at step {} "
                                    "(epoch {}, batch {})",
                                    step, epoch, batch_index));
            }
            int64_t batch_samples = b->size;
            train.release(b, consumer);
            images += batch_samples;
            epoch_images += batch_samples;
            const bool measured = !std::isnan(result.loss);
            if (measured) {
                epoch_loss_sum += result.loss * batch_samples;
                epoch_measured += batch_samples;
            }

            StepReport report;
            report.step = trainer.steps();
            report.total_steps = run.total_steps;
            report.epoch = epoch;
            report.batch = batch_index;
            report.batches_per_epoch = run.steps_per_epoch;
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
            report.eta_seconds = per_step * double(run.total_steps - report.step);
            if (measured) nvtx::counter("loss", result.loss);
            nvtx::counter("lr", lr);
            if (run.policy.needs_loss_scaling()) nvtx::counter("loss_scale", result.loss_scale);
            observer.step(report);
            if (measured)
                metrics.write({{"type", "step"},
                               {"step", report.step},
                               {"epoch", epoch},
                               {"loss", result.loss},
                               {"lr", lr},
                               {"loss_scale", result.loss_scale},
                               {"images_per_second", report.images_per_second},
                               {"skipped", report.skipped}});
            if (tensorboard) {
                std::vector<std::pair<std::string, double>> scalars;
                if (measured) scalars.emplace_back("train/loss", result.loss);
                scalars.emplace_back("train/learning_rate", lr);
                if (run.policy.needs_loss_scaling()) scalars.emplace_back("train/loss_scale", result.loss_scale);
                scalars.emplace_back("train/images_per_second", batch_samples / std::max(last_step_seconds, 1e-9));
                scalars.emplace_back("train/dataloader_wait_ms", loader_wait * 1e3);
                if (dist.distributed()) scalars.emplace_back("train/allreduce_wait_ms", collective_wait * 1e3);
                tensorboard->scalars(report.step, scalars);
            }

            if (config.max_steps > 0 && trainer.steps() >= config.max_steps) stop = true;
            if (!config.checkpoint_dir.empty() && config.checkpoint_every > 0 &&
                trainer.steps() % config.checkpoint_every == 0)
                summary.last_checkpoint = batch_index >= run.steps_per_epoch ? save_checkpoint(run, epoch + 1, 0)
                                                                             : save_checkpoint(run, epoch, batch_index);
        }
        if (run.on_device) EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
        double epoch_seconds = seconds_between(epoch_start, Clock::now());
        if (dist.distributed()) dist.record_clock_anchor();
        train_seconds += epoch_seconds;
        nvtx::counter("images_per_second", epoch_images / std::max(epoch_seconds, 1e-9));

        last_eval = evaluate(run);
        EpochReport er;
        er.epoch = epoch;
        er.steps = trainer.steps();
        er.train_loss = epoch_measured ? epoch_loss_sum / epoch_measured : 0;
        er.test_loss = last_eval.loss;
        er.test_accuracy = last_eval.accuracy;
        er.seconds = epoch_seconds;
        er.images_per_second = epoch_images / std::max(epoch_seconds, 1e-9);
        er.dataloader_wait_seconds = train.wait_seconds() - wait_before;
        er.eval_seconds = last_eval.seconds;
        nvtx::counter("test_accuracy", er.test_accuracy);
        observer.epoch(er);
        if (tensorboard)
            tensorboard->scalars(er.steps, {{"test/accuracy", er.test_accuracy},
                                            {"test/loss", er.test_loss},
                                            {"epoch/train_loss", er.train_loss},
                                            {"epoch/images_per_second", er.images_per_second},
                                            {"epoch/dataloader_wait_seconds", er.dataloader_wait_seconds}});
        metrics.write({{"type", "epoch"},
                       {"epoch", epoch},
                       {"step", er.steps},
                       {"train_loss", er.train_loss},
                       {"test_loss", er.test_loss},
                       {"test_accuracy", er.test_accuracy},
                       {"seconds", er.seconds},
                       {"images_per_second", er.images_per_second},
                       {"dataloader_wait_seconds", er.dataloader_wait_seconds}});
        summary.best_test_accuracy = std::max(summary.best_test_accuracy, er.test_accuracy);
    }

    if (!config.checkpoint_dir.empty()) summary.last_checkpoint = save_checkpoint(run, config.epochs, 0);
    summary.steps = trainer.steps();
    summary.images = images;
    summary.seconds = train_seconds;
    summary.images_per_second = images / std::max(train_seconds, 1e-9);
    summary.final_test_accuracy = last_eval.accuracy;
    summary.final_test_loss = last_eval.loss;
    summary.skipped_steps = trainer.optimizer_steps_skipped();
    // The backend allocator's peaks (parameters, gradients, optimizer state, activations):
    // what a trace of the run shows as the device's peak (`ember stats --report gpu_memory`).
    const AllocatorStats memory = allocator_for(run.on_device ? Device::cuda : Device::cpu).stats();
    summary.peak_allocated_bytes = static_cast<int64_t>(memory.peak_allocated_bytes);
    summary.peak_reserved_bytes = static_cast<int64_t>(memory.peak_reserved_bytes);
    metrics.write({{"type", "summary"},
                   {"steps", summary.steps},
                   {"images", images},
                   {"seconds", train_seconds},
                   {"images_per_second", summary.images_per_second},
                   {"test_accuracy", summary.final_test_accuracy},
                   {"test_loss", summary.final_test_loss},
                   {"peak_allocated_bytes", summary.peak_allocated_bytes},
                   {"peak_reserved_bytes", summary.peak_reserved_bytes},
                   {"wall_seconds", seconds_between(run_start, Clock::now())}});
    return summary;
}

}  // namespace
}  // namespace ember::train
