// elementwise_optimizer.h: every optimizer except L-BFGS. Holds the parsed
// hyper-parameters, turns them into UpdateParameters each step (bias corrections,
// NAdam's momentum schedule, Adagrad's decayed lr) and runs the update on the chosen
// backend: plain loops here for cpu, CudaMultiTensorUpdater for the CUDA backends.
#pragma once

#include "engine/core/allocator.h"
#include "engine/optim/optimizer.h"

#include <memory>
#include <vector>

namespace ember::optim {

class CudaMultiTensorUpdater;

// Hyper-parameters fixed for the optimizer's life beyond what UpdateParameters holds.
struct ElementwiseSettings {
    UpdateParameters base;        // kind, eps, betas, weight decay, flags ...
    bool bias_correction = true;  // LAMB / NovoGrad (Apex); always on for the Adam family
    double lr_decay = 0.0;        // Adagrad
    double momentum_decay = 0.0;  // NAdam
    float initial_state0 = 0.0f;  // Adagrad's initial_accumulator_value
    int state_buffers = 0;
};

class ElementwiseOptimizer : public Optimizer {
  public:
    ElementwiseOptimizer(std::string name, OptimizerBackend backend, double lr, std::vector<ParameterSegment> segments,
                         ElementwiseSettings settings);
    ~ElementwiseOptimizer() override;

    using Optimizer::step;
    void step(float* params, const float* grads, const StepOptions& options = {}) override;
    void rewind_step() override;
    OptimizerState export_state() const override;
    void import_state(const OptimizerState& state) override;

    int state_buffer_count() const override { return settings_.state_buffers; }
    const float* state_buffer(int index) const override;

    // The scalars step `step` would use given NAdam's momentum product so far.
    UpdateParameters parameters_for_step(int64_t step, double mu_product) const;
    // Exactly the scalars the next step() will pass to its kernels (grad_scale aside):
    // a CUDA-graph replay of a captured step is valid only while these are equal.
    UpdateParameters next_step_parameters() const { return parameters_for_step(step_count_ + 1, nadam_mu_product_); }

  private:
    void step_cpu(const UpdateParameters& u, float* params, const float* grads, const StepOptions& options);

    ElementwiseSettings settings_;
    double nadam_mu_product_ = 1.0;           // product of NAdam's mu_t so far
    double previous_nadam_mu_product_ = 1.0;  // for rewind_step()
    float* host_state(int index) const;       // parameter_count_ floats (cpu)
    std::vector<Buffer> host_state_;          // from host_allocator()
    std::vector<float> host_segment_norms_;   // NovoGrad (cpu)
    std::unique_ptr<CudaMultiTensorUpdater> cuda_;
};

}  // namespace ember::optim
