// nccl_communicator.cpp: the Communicator over NCCL (communicator.h). The unique id
// comes from rank 0 over MPI (llm.c's bootstrap); collectives run on a communication
// stream that first waits for the caller's stream (an event), so a bucket's all-reduce
// overlaps the rest of backward; wait() makes the caller's stream wait in turn.
#include "engine/core/cuda_check.h"
#include "engine/distributed/communicator.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

namespace ember::distributed {

namespace {
void check_nccl(ncclResult_t result, const char* call) {
    if (result != ncclSuccess)
        throw std::runtime_error(std::string("nccl: ") + call + " failed: " + ncclGetErrorString(result));
}

class NcclPending final : public PendingCollective {
  public:
    NcclPending(cudaEvent_t done, cudaStream_t caller) : done_(done), caller_(caller) {}
    ~NcclPending() override { cudaEventDestroy(done_); }
    void wait() override { EMBER_CUDA_CHECK(cudaStreamWaitEvent(caller_, done_, 0)); }
    bool test() override { return cudaEventQuery(done_) == cudaSuccess; }

  private:
    cudaEvent_t done_;
    cudaStream_t caller_;
};

class NcclCommunicator final : public Communicator {
  public:
    NcclCommunicator(int rank, int world_size) : Communicator(rank, world_size) {
        ncclUniqueId id;
        if (rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
        if (MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
            throw std::runtime_error("nccl: MPI_Bcast of the NCCL unique id failed");
        check_nccl(ncclCommInitRank(&comm_, world_size, id, rank), "ncclCommInitRank");
        EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
    }
    ~NcclCommunicator() override {
        ncclCommDestroy(comm_);
        cudaStreamDestroy(comm_stream_);
    }
    const char* engine_name() const override { return "nccl"; }

    std::unique_ptr<PendingCollective> allreduce_sum_async(float* data, std::size_t count, void* stream) override {
        cudaStream_t caller = follow(stream);
        check_nccl(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, comm_stream_), "ncclAllReduce");
        return finish(caller);
    }
    std::unique_ptr<PendingCollective> reduce_scatter_sum_async(const float* send, float* receive, std::size_t count,
                                                                void* stream) override {
        cudaStream_t caller = follow(stream);
        check_nccl(ncclReduceScatter(send, receive, count, ncclFloat32, ncclSum, comm_, comm_stream_),
                   "ncclReduceScatter");
        return finish(caller);
    }
    std::unique_ptr<PendingCollective> all_gather_async(const float* send, float* receive, std::size_t count,
                                                        void* stream) override {
        cudaStream_t caller = follow(stream);
        check_nccl(ncclAllGather(send, receive, count, ncclFloat32, comm_, comm_stream_), "ncclAllGather");
        return finish(caller);
    }
    void broadcast(void* data, std::size_t bytes, int root, void* stream) override {
        cudaStream_t caller = follow(stream);
        check_nccl(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, comm_stream_), "ncclBroadcast");
        finish(caller)->wait();
    }
    void barrier() override {
        // A one-element all-reduce, completed on the host: every rank has reached it.
        float* scratch = nullptr;
        EMBER_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&scratch), sizeof(float), comm_stream_));
        check_nccl(ncclAllReduce(scratch, scratch, 1, ncclFloat32, ncclSum, comm_, comm_stream_), "ncclAllReduce");
        EMBER_CUDA_CHECK(cudaFreeAsync(scratch, comm_stream_));
        EMBER_CUDA_CHECK(cudaStreamSynchronize(comm_stream_));
    }

  private:
    // The communication stream waits for everything the caller's stream enqueued so far.
    cudaStream_t follow(void* stream) {
        cudaStream_t caller = static_cast<cudaStream_t>(stream);
        cudaEvent_t ready;
        EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
        EMBER_CUDA_CHECK(cudaEventRecord(ready, caller));
        EMBER_CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, ready, 0));
        EMBER_CUDA_CHECK(cudaEventDestroy(ready));  // released once the wait has been satisfied
        return caller;
    }
    std::unique_ptr<PendingCollective> finish(cudaStream_t caller) {
        cudaEvent_t done;
        EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
        EMBER_CUDA_CHECK(cudaEventRecord(done, comm_stream_));
        return std::make_unique<NcclPending>(done, caller);
    }

    ncclComm_t comm_ = nullptr;
    cudaStream_t comm_stream_ = nullptr;
};
}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator() {
    ensure_mpi_initialized();
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    return std::make_unique<NcclCommunicator>(rank, size);
}

}  // namespace ember::distributed
