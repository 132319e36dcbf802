// communicator.h: the collectives data-parallel training needs, over one of two
// engines: MPI (host memory; the CPU backend, and the bootstrap of everything) and
// NCCL (device memory, on a communication stream). All counts are in float elements;
// reductions are sums.
//
// Async forms return a PendingCollective. For MPI wait() blocks until the data is in
// place; for NCCL it makes the caller's stream wait for the communication stream (the
// host does not block), so work enqueued afterwards sees the result.
#pragma once

#include <cstddef>
#include <memory>

namespace ember::distributed {

class PendingCollective {
  public:
    virtual ~PendingCollective() = default;
    virtual void wait() = 0;
    // Drives progress without blocking (MPI progresses nonblocking collectives only
    // inside MPI calls); true when complete.
    virtual bool test() = 0;
};

class Communicator {
  public:
    virtual ~Communicator() = default;
    int rank() const { return rank_; }
    int world_size() const { return world_size_; }
    virtual const char* engine_name() const = 0;  // "mpi" or "nccl"

    // stream: the cudaStream_t whose work produced the data (NCCL); ignored by MPI.
    virtual std::unique_ptr<PendingCollective> allreduce_sum_async(float* data, std::size_t count, void* stream) = 0;
    // send holds world_size * count elements; rank r receives the sum of block r.
    virtual std::unique_ptr<PendingCollective> reduce_scatter_sum_async(const float* send, float* receive,
                                                                        std::size_t count, void* stream) = 0;
    // receive holds world_size * count elements: block r is rank r's send.
    virtual std::unique_ptr<PendingCollective> all_gather_async(const float* send, float* receive, std::size_t count,
                                                                void* stream) = 0;
    virtual void broadcast(void* data, std::size_t bytes, int root, void* stream) = 0;
    virtual void barrier() = 0;

    void allreduce_sum(float* data, std::size_t count, void* stream = nullptr) {
        allreduce_sum_async(data, count, stream)->wait();
    }
    void reduce_scatter_sum(const float* send, float* receive, std::size_t count, void* stream = nullptr) {
        reduce_scatter_sum_async(send, receive, count, stream)->wait();
    }
    void all_gather(const float* send, float* receive, std::size_t count, void* stream = nullptr) {
        all_gather_async(send, receive, count, stream)->wait();
    }

  protected:
    Communicator(int rank, int world_size) : rank_(rank), world_size_(world_size) {}
    int rank_;
    int world_size_;
};

// MPI: initializes MPI on first use (MPI_Init_thread, funneled) unless the program
// already did; finalizes at process exit only if it initialized.
void ensure_mpi_initialized();
std::unique_ptr<Communicator> make_mpi_communicator();  // over MPI_COMM_WORLD

// NCCL: rank 0 creates the unique id, MPI broadcasts it, every rank joins. The
// caller has selected its device (cudaSetDevice) first. Collectives run on a
// communication stream created here.
std::unique_ptr<Communicator> make_nccl_communicator();

}  // namespace ember::distributed
