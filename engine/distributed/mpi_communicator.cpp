// mpi_communicator.cpp: the Communicator over MPI_COMM_WORLD (communicator.h). Host
// memory only; nonblocking collectives (MPI_Iallreduce, ...) give the async forms.
#include "engine/distributed/communicator.h"

#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace ember::distributed {

namespace {
void check_mpi(int code, const char* call) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw std::runtime_error(std::string("mpi: ") + call +
                             " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

int checked_count(std::size_t count, const char* call) {
    if (count > static_cast<std::size_t>(INT_MAX))
        throw std::invalid_argument(std::string("mpi: ") + call + " of " + std::to_string(count) +
                                    " elements exceeds MPI's int count");
    return static_cast<int>(count);
}

void finalize_mpi_at_exit() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

class MpiPending final : public PendingCollective {
  public:
    explicit MpiPending(MPI_Request request) : request_(request) {}
    ~MpiPending() override {
        if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);  // never leave a request dangling
    }
    void wait() override { check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait"); }
    bool test() override {
        int done = 0;
        check_mpi(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test");
        return done != 0;
    }

  private:
    MPI_Request request_;
};

class MpiCommunicator final : public Communicator {
  public:
    MpiCommunicator(int rank, int world_size) : Communicator(rank, world_size) {}
    const char* engine_name() const override { return "mpi"; }

    std::unique_ptr<PendingCollective> allreduce_sum_async(float* data, std::size_t count, void*) override {
        MPI_Request request;
        check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, checked_count(count, "MPI_Iallreduce"), MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD, &request),
                  "MPI_Iallreduce");
        return std::make_unique<MpiPending>(request);
    }
    std::unique_ptr<PendingCollective> reduce_scatter_sum_async(const float* send, float* receive, std::size_t count,
                                                                void*) override {
        MPI_Request request;
        check_mpi(MPI_Ireduce_scatter_block(send, receive, checked_count(count, "MPI_Ireduce_scatter_block"), MPI_FLOAT,
                                            MPI_SUM, MPI_COMM_WORLD, &request),
                  "MPI_Ireduce_scatter_block");
        return std::make_unique<MpiPending>(request);
    }
    std::unique_ptr<PendingCollective> all_gather_async(const float* send, float* receive, std::size_t count,
                                                        void*) override {
        MPI_Request request;
        const int n = checked_count(count, "MPI_Iallgather");
        // In place (NCCL's convention: send is this rank's block of receive) is MPI_IN_PLACE for MPI.
        const bool in_place = send == receive + static_cast<std::size_t>(rank_) * count;
        check_mpi(MPI_Iallgather(in_place ? MPI_IN_PLACE : send, n, MPI_FLOAT, receive, n, MPI_FLOAT, MPI_COMM_WORLD,
                                 &request),
                  "MPI_Iallgather");
        return std::make_unique<MpiPending>(request);
    }
    void broadcast(void* data, std::size_t bytes, int root, void*) override {
        check_mpi(MPI_Bcast(data, checked_count(bytes, "MPI_Bcast"), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
    }
    void barrier() override { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
};
}  // namespace

void ensure_mpi_initialized() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    std::atexit(finalize_mpi_at_exit);
}

std::unique_ptr<Communicator> make_mpi_communicator() {
    ensure_mpi_initialized();
    int rank = 0, size = 1;
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
    return std::make_unique<MpiCommunicator>(rank, size);
}

}  // namespace ember::distributed
