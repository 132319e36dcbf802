// checkpoint.h: ember's checkpoint file, version 1. Little-endian, in this order:
//   header   magic "EMBERCKP", format version (u32), model name, parameter count,
//            flat/state lengths and the parameter layout hash, optimizer name, its
//            step count and state buffer count/length, trainer step and epoch, RNG
//            state, loss scaler state, data loader position (opaque to the engine:
//            sampler epoch + index), payload size and payload CRC-32, then the CRC-32
//            of the header itself
//   payload  the flat fp32 parameters, the running statistics, each optimizer state
//            buffer (one memcpy each - what the flat-buffer design is for), then the
//            optimizer's per-segment norms (NovoGrad). L-BFGS's history is not
//            exported by engine/optim, so an L-BFGS run cannot be checkpointed.
// Written atomically: a temporary file in the same directory, fsync, rename over the
// target, fsync of the directory; a crash leaves the old checkpoint or the new one.
// Loading checks everything before touching the model and refuses with a message that
// names the field that did not match (model, parameter count, layout, optimizer,
// sizes, CRC). Restoring model + optimizer + trainer reproduces the uninterrupted run
// bit for bit on a deterministic backend (docs/engine.md).
#pragma once

#include "engine/amp/loss_scaler.h"
#include "engine/nn/model.h"
#include "engine/nn/training_step.h"
#include "engine/optim/optimizer.h"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace ember::checkpoint {

constexpr uint32_t kFormatVersion = 1;

// Fields the trainer owns and the engine only carries.
struct TrainingPosition {
    int64_t epoch = 0;
    uint64_t rng_state = 0;     // e.g. the augmentation generator's state
    int64_t sampler_epoch = 0;  // data loader position
    int64_t sampler_index = 0;
};

struct CheckpointHeader {
    uint32_t format_version = 0;
    std::string model_name;
    uint64_t parameter_count = 0;
    uint64_t flat_length = 0;
    uint64_t state_length = 0;
    uint64_t layout_hash = 0;
    std::string optimizer_name;
    int64_t optimizer_steps = 0;
    double optimizer_nadam_mu_product = 1.0;
    uint32_t optimizer_state_buffers = 0;
    uint64_t optimizer_state_length = 0;
    uint64_t optimizer_segment_norms = 0;  // NovoGrad's per-segment norms
    int64_t trainer_steps = 0;
    uint64_t model_seed = 0;
    amp::LossScalerState loss_scaler;
    TrainingPosition position;
    uint64_t payload_bytes = 0;
    uint32_t payload_crc = 0;
};

class CheckpointError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

void save_checkpoint(const std::string& path, nn::Model& model, const optim::Optimizer& optimizer, nn::Trainer& trainer,
                     const TrainingPosition& position = {});

// Verifies the whole file, then restores parameters, running statistics, optimizer
// state and step, trainer step and loss scaler. Returns the trainer-owned position.
TrainingPosition load_checkpoint(const std::string& path, nn::Model& model, optim::Optimizer& optimizer,
                                 nn::Trainer& trainer);

// Reads and checks the header only (magic, version, header CRC).
CheckpointHeader read_checkpoint_header(const std::string& path);

}  // namespace ember::checkpoint
