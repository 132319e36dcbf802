// context.h: a process's place in a distributed job and its communicator.
//
//   distributed::Context dist(backend);          // reads the launcher's environment
//   if (dist.is_root()) print(...);       // rank-0-only console output and checkpoints
//   dist.communicator().allreduce_sum(...);
//
// One GPU per rank: on the cuda backend the context selects device
// local_rank % device_count and builds a NCCL communicator (unique id broadcast over
// MPI); on cpu it all-reduces through MPI. A single process (no launcher) gets an MPI
// communicator of one rank only when MPI is asked for (`force_mpi`), so plain runs
// never start MPI.
#pragma once

#include "engine/distributed/communicator.h"
#include "engine/distributed/launcher.h"
#include "engine/nn/flat_buffer.h"

#include <cstdint>
#include <memory>

namespace ember::distributed {

class Context {
  public:
    explicit Context(Device backend, bool force_mpi = false);
    Context(const LaunchEnvironment& environment, std::unique_ptr<Communicator> communicator);

    int rank() const { return environment_.rank; }
    int world_size() const { return environment_.world_size; }
    int local_rank() const { return environment_.local_rank; }
    bool is_root() const { return environment_.rank == 0; }
    bool distributed() const { return environment_.world_size > 1; }
    const LaunchEnvironment& environment() const { return environment_; }
    // Throws std::logic_error when this is a single process without a communicator.
    Communicator& communicator();
    bool has_communicator() const { return communicator_ != nullptr; }

    // Clock alignment for a job trace: a barrier, then an NVTX mark `clock/anchor`
    // (category communication, payload = the anchor's sequence number). Every rank leaves
    // the barrier at nearly the same instant, so the marks of one sequence number are
    // simultaneous events on each rank's own clock: a merge of the per-rank trace files
    // shifts each rank by (rank 0's anchor - its anchor). Call at start-up and at
    // intervals (e.g. every epoch) so drift can be corrected. No-op for a single process.
    void record_clock_anchor();

  private:
    LaunchEnvironment environment_;
    std::unique_ptr<Communicator> communicator_;
    int64_t anchors_recorded_ = 0;
};

}  // namespace ember::distributed
