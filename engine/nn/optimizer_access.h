// optimizer_access.h: read/write access to an optimizer's step counter, which
// engine/optim keeps protected without a setter. Checkpoint restore needs to set it
// (Adam's bias correction depends on it) and CUDA Graph replay advances it for steps
// that ran without calling step() on the host. Uses the standard pointer-to-member
// route through a derived class; nothing of that class is ever constructed.
#pragma once

#include "engine/optim/optimizer.h"

namespace ember::nn {

struct OptimizerStepAccess : optim::Optimizer {
    static int64_t optim::Optimizer::*step_member() { return &OptimizerStepAccess::step_count_; }
};

inline void set_optimizer_step_count(optim::Optimizer& optimizer, int64_t steps) {
    optimizer.*OptimizerStepAccess::step_member() = steps;
}

}  // namespace ember::nn
