// run_state.h: what one training run builds, phase by phase, and the phases
// themselves (setup.cpp), in the order run_training() (run.cpp) calls them. Each phase
// reads what the earlier ones set and adds its own part; nothing here outlives the run.
#pragma once

#include "engine/amp/autocast.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/core/stream.h"
#include "engine/cuda/context.h"
#include "engine/distributed/context.h"
#include "engine/distributed/data_parallel.h"
#include "engine/distributed/sharded_optimizer.h"
#include "engine/distributed/sync_batchnorm.h"
#include "engine/nn/model.h"
#include "engine/nn/training_step.h"
#include "engine/optim/optimizer.h"
#include "engine/optim/schedules.h"
#include "engine/train/batch_source.h"
#include "engine/train/run.h"

#include <cuda_runtime_api.h>

#include <memory>

namespace ember::train {

struct RunState {
    RunState(const TrainConfig& config_in, TrainObserver& root) : config(config_in), root_observer(root) {}

    TrainConfig config;  // as given, then with the fallbacks applied (precision, CUDA Graphs, ...)
    TrainObserver& root_observer;
    TrainObserver* observer = nullptr;  // rank 0: the root observer; other ranks: a silent one
    TrainSummary summary;

    // choose_backend
    bool on_device = false;
    amp::AutocastPolicy policy;
    std::unique_ptr<distributed::Context> dist;  // ranks under mpirun/srun, else one process
    std::unique_ptr<Stream> stream;              // cuda only: the compute stream
    std::unique_ptr<CudaContext> cuda;           // cuda only: handles, autotune cache
    int cpu_cores = 0;                           // cpu only, when ember chooses the thread split:
                                                 // measured after the first steps (thread_split.h)
    cudaStream_t compute_stream() const { return stream ? stream->get() : nullptr; }
    // build_model
    std::unique_ptr<nn::Model> model;
    // open_data
    int64_t batch_size = 0;
    DataSources data;
    int64_t steps_per_epoch = 0;
    int64_t total_steps = 0;
    // build_optimizer
    std::unique_ptr<optim::Optimizer> optimizer;
    distributed::ShardedOptimizer* sharded = nullptr;  // the optimizer, when ZeRO-1 shards it
    std::unique_ptr<optim::LrSchedule> schedule;
    // build_step
    std::unique_ptr<distributed::DataParallel> data_parallel;
    std::unique_ptr<distributed::BatchNormSync> batchnorm_sync;
    std::unique_ptr<nn::Trainer> trainer;
    // resume
    checkpoint::TrainingPosition position;  // where training starts (0 unless resumed)
};

// setup.cpp. Each throws ConfigError naming the setting at fault.
void choose_backend(RunState& run);   // device, ranks, CPU threads, precision and switch fallbacks
void build_model(RunState& run);      // the model on the backend, parameters initialized
void open_data(RunState& run);        // batch size ("max" probes memory), the train and test loaders
void build_optimizer(RunState& run);  // the optimizer (sharded under ZeRO-1) and the LR schedule
void build_step(RunState& run);       // the training step, data parallel, SyncBatchNorm
void resume(RunState& run);           // from output.resume, when set

}  // namespace ember::train
