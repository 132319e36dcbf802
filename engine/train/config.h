// config.h: TrainConfig, everything `ember train` can be told, and its three
// sources in increasing priority: defaults, a TOML file, command-line overrides
// (`--set section.key=value` and the named flags). Every field is described once in
// a table (config.cpp) that the TOML reader, the override parser and the printer of
// the effective config all walk, so they cannot disagree. Errors name the file,
// line and key, or the flag.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember::train {

class ConfigError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

struct TrainConfig {
    // [model]
    std::string model = "cnn";  // mlp | cnn | resnet | transformer

    // [data]
    std::string data_root = "/usr/share/datasets/fashion-mnist";
    std::string data_source = "idx";  // idx (in memory) | png (image folder) | gpu (resident)
    std::string png_dir;              // for data_source = png
    std::string batch_size = "128";   // a number, or "max" (largest that fits on the device)
    int workers = 2;
    int prefetch_factor = 2;
    bool pin_memory = true;
    bool persistent_workers = true;
    bool augment = false;  // random crop (pad 2) + horizontal flip
    bool drop_last = true;
    std::int64_t train_limit = 0;  // use the first N training images (0 = all 60,000)
    std::int64_t test_limit = 0;   // evaluate on the first N test images (0 = all 10,000)

    // [train]
    int epochs = 1;
    std::int64_t max_steps = 0;  // stop after N optimizer steps (0 = no limit)
    std::uint64_t seed = 0;
    std::string backend = "auto";    // auto | cpu | cuda
    std::string precision = "fp32";  // fp32 | fp16 | bf16 (AMP)
    int grad_accumulation = 1;       // micro-batches per optimizer step
    double clip_grad_norm = 0.0;     // 0 = no clipping
    bool deterministic = false;
    // Distributed runs: rank r does imbalance * r / (world - 1) of a step's compute
    // again, busy, before each step (shows one slow rank making the others wait).
    double imbalance = 0.0;

    // [distributed]: data-parallel runs under mpirun/srun (docs/distributed.md).
    double bucket_mb = 25.0;       // gradient bucket size, MiB
    double first_bucket_mb = 1.0;  // the first bucket (last layers): small, so communication starts early
    bool overlap = true;           // all-reduce each bucket during backward (false: all after backward)
    int zero = 0;                  // 1 = ZeRO-1: reduce-scatter, sharded optimizer state, all-gather
    bool sync_batchnorm = false;   // BatchNorm statistics over every rank's batch (cpu backend)

    // [optimizer]: name plus its hyper-parameters, checked by the optimizer itself.
    std::string optimizer = "sgd";
    std::map<std::string, double> optimizer_params = {{"lr", 0.05}, {"momentum", 0.9}};

    // [schedule]: name plus its fields (engine/optim/schedules.h).
    std::string schedule = "constant";
    std::map<std::string, double> schedule_params;
    // "optimizer.nesterov" / "schedule.three_phase": parameters given as booleans or
    // integers, printed back the way they were written (the maps hold numbers).
    std::set<std::string> boolean_parameters;
    std::set<std::string> integer_parameters;
    std::int64_t warmup_steps = 0;  // linear warm-up before the schedule

    // [switches]: each optimization of the tuning canon, on by default where it helps.
    bool cudnn_benchmark = true;
    bool channels_last = false;        // nhwc activations in conv/BN/pool (nn::BuildOptions::channels_last)
    bool conv_bias_before_bn = false;  // the canon: no conv bias before BatchNorm
    bool grads_to_none = true;         // first backward write stores instead of accumulating
    bool fused_gelu = true;
    bool fused_layernorm = true;
    bool fused_optimizer = true;
    bool cuda_graph = false;
    bool tf32 = true;
    bool activation_checkpointing = false;
    bool layer_ranges = false;  // an NVTX range per layer inside forward/backward (profiles)
    // Debug aids, off by default as the canon advises.
    bool anomaly_check = false;  // NaN/Inf check after every step
    bool sync_each_op = false;   // synchronize after every op (serializes the GPU)

    // [output]
    std::string checkpoint_dir;         // empty = no checkpoints
    std::int64_t checkpoint_every = 0;  // steps between checkpoints (0 = only at the end)
    std::string resume;                 // checkpoint file to resume from
    std::string metrics_path;           // JSONL metrics (empty = none)
    std::string tensorboard_dir;        // TensorBoard event files (empty = none)
    std::string profile_path;           // record the run in-process to this trace file
    bool progress = true;               // a progress bar on a terminal, plain lines otherwise
};

// Reads `path` over `config`. Throws ConfigError "FILE:LINE:COL: ..." on a TOML syntax
// error, an unknown section or key, or a value of the wrong type or out of range.
void load_toml_file(const std::string& path, TrainConfig& config);
void load_toml_string(const std::string& text, const std::string& source_name, TrainConfig& config);

// Applies one "section.key=value" override (value in TOML syntax or bare text).
// Throws ConfigError naming the override.
void apply_override(const std::string& assignment, TrainConfig& config);

// Checks cross-field rules (e.g. png needs png_dir); throws ConfigError naming fields.
void validate(const TrainConfig& config);

// The effective configuration as TOML, loadable again with load_toml_string.
// The settings that shape a run, in one line as a user would write them:
// "cnn, sgd (lr 0.05, momentum 0.9, nesterov), onecycle (max_lr 0.1), batch 128,
// 1 epoch, fp32, backend auto, 2 workers".
std::string settings_line(const TrainConfig& config);
std::string to_toml(const TrainConfig& config);

// Every "section.key" the config knows, for help texts and suggestions.
std::vector<std::string> known_keys();

}  // namespace ember::train
