// run.h: run_training(), the run behind `ember train`, written to be read top to
// bottom (run.cpp; its setup phases in setup.cpp): resolve the backend, load the data, build the model and the
// optimizer, then per epoch: for each batch a `step` NVTX range holding forward,
// backward and optimizer; evaluation on the test set at the end of each epoch;
// checkpoints on schedule. What happens is reported to a TrainObserver (the command
// line draws a progress bar from it) and, when configured, to a JSONL metrics file
// and as NVTX counters (loss, lr, images_per_second, loss_scale).
#pragma once

#include "engine/train/config.h"

#include <cstdint>
#include <string>

namespace ember::train {

struct StepReport {
    int64_t step = 0;         // optimizer steps done, this one included
    int64_t total_steps = 0;  // planned for the whole run
    int64_t epoch = 0;        // 0-based
    int64_t batch = 0;        // batches done in this epoch
    int64_t batches_per_epoch = 0;
    int64_t images = 0;          // samples in this step
    bool loss_measured = false;  // the loss is read back only every few steps on a GPU
    double loss = 0.0;           // mean loss of the last measured batch
    double lr = 0.0;
    double images_per_second = 0.0;  // over the epoch so far
    double elapsed_seconds = 0.0;
    double eta_seconds = 0.0;
    double loss_scale = 1.0;
    bool skipped = false;  // fp16 overflow: step skipped
};

struct EpochReport {
    int64_t epoch = 0;
    int64_t steps = 0;        // total optimizer steps so far
    double train_loss = 0.0;  // mean over the measured batches of the epoch
    double train_accuracy = 0.0;
    double test_loss = 0.0;
    double test_accuracy = 0.0;
    double seconds = 0.0;  // training time of the epoch (evaluation excluded)
    double images_per_second = 0.0;
    double dataloader_wait_seconds = 0.0;
    double eval_seconds = 0.0;
};

struct TrainSummary {
    std::string backend;  // "cpu" or "cuda"
    std::string device;   // GPU name, or "cpu"
    std::string model;
    int64_t parameters = 0;
    int64_t batch_size = 0;
    int64_t steps = 0;
    int64_t images = 0;
    int64_t skipped_steps = 0;
    double seconds = 0.0;  // training time, evaluation excluded
    double images_per_second = 0.0;
    double final_test_accuracy = 0.0;
    double final_test_loss = 0.0;
    double best_test_accuracy = 0.0;
    std::string last_checkpoint;  // empty when none was written
    // The backend's caching allocator (allocator_for: device_allocator() or
    // host_allocator()) at the end of training: its peaks since the process began or
    // its last reset_peak(), activations included.
    int64_t peak_allocated_bytes = 0;
    int64_t peak_reserved_bytes = 0;
};

class TrainObserver {
  public:
    virtual ~TrainObserver() = default;
    virtual void info(const std::string& line) {}
    virtual void step(const StepReport& report) {}
    virtual void epoch(const EpochReport& report) {}
};

// Trains as configured. Throws ConfigError for bad configuration, and the data,
// checkpoint and CUDA errors of the parts (each names what failed).
TrainSummary run_training(const TrainConfig& config, TrainObserver& observer);

}  // namespace ember::train
