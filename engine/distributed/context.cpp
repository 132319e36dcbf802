// context.cpp: the launcher environment, device selection and communicator (context.h).
#include "engine/distributed/context.h"

#include "engine/core/cuda_check.h"
#include "engine/core/device.h"
#include "engine/core/nvtx.h"

#include <cuda_runtime.h>

#include <stdexcept>

namespace ember::distributed {

Context::Context(Device backend, bool force_mpi) : environment_(detect_launch_environment()) {
    if (!environment_.distributed() && !force_mpi) return;
    if (backend == Device::cuda) {
        const int devices = cuda_runtime_status().device_count;
        if (devices == 0) throw std::runtime_error("dist: the cuda backend needs a GPU per rank; none is visible");
        EMBER_CUDA_CHECK(cudaSetDevice(environment_.local_rank % devices));
        communicator_ = make_nccl_communicator();
    } else {
        communicator_ = make_mpi_communicator();
    }
    if (communicator_->rank() != environment_.rank || communicator_->world_size() != environment_.world_size) {
        // MPI is the authority once it runs (e.g. a launcher whose variables we misread).
        environment_.rank = communicator_->rank();
        environment_.world_size = communicator_->world_size();
    }
}

Context::Context(const LaunchEnvironment& environment, std::unique_ptr<Communicator> communicator)
    : environment_(environment), communicator_(std::move(communicator)) {}

Communicator& Context::communicator() {
    if (!communicator_)
        throw std::logic_error("dist: a single process has no communicator (launch with mpirun or srun)");
    return *communicator_;
}

void Context::record_clock_anchor() {
    if (!communicator_) return;
    communicator_->barrier();
    nvtx::mark_value(nvtx::range::kClockAnchor.data(), static_cast<double>(anchors_recorded_++),
                     nvtx::Category::communication);
}

}  // namespace ember::distributed
