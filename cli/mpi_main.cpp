// mpi_main.cpp: `ember-mpi`, the trace commands under mpirun/srun. `ember` runs it (the
// same arguments) when it finds itself launched as one of several MPI processes, so
// `mpirun -np 8 ember stats rank*.json --report collectives` shards the rank files over
// the processes: each reads its share once, the processes exchange only per-collective
// summaries (MPI_Allgatherv), and the first process prints the answer a single process
// would print. `ember` itself never links MPI, so its commands start at once.
#include "cli/command_errors.h"
#include "cli/commands.h"
#include "cli/job_input.h"
#include "cli/main_app.h"

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void check(int code, const char* what) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw std::runtime_error(std::string(what) + " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

// The exchange of the job analysis over MPI_COMM_WORLD.
class MpiExchange : public ember::analysis::CollectiveExchange {
  public:
    MpiExchange() {
        check(MPI_Comm_rank(MPI_COMM_WORLD, &process_), "MPI_Comm_rank");
        check(MPI_Comm_size(MPI_COMM_WORLD, &processes_), "MPI_Comm_size");
    }
    std::vector<std::string> all_gather(const std::string& mine) override {
        if (mine.size() > static_cast<std::size_t>(INT32_MAX))
            throw std::runtime_error("ember-mpi: a process's summary exceeds MPI's int count (2 GiB)");
        const int size = static_cast<int>(mine.size());
        std::vector<int> sizes(static_cast<std::size_t>(processes_));
        check(MPI_Allgather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
        std::vector<int> offsets(sizes.size());
        std::int64_t total = 0;
        for (std::size_t p = 0; p < sizes.size(); ++p) {
            if (total > INT32_MAX) throw std::runtime_error("ember-mpi: the summaries exceed MPI's int count (2 GiB)");
            offsets[p] = static_cast<int>(total);
            total += sizes[p];
        }
        std::string all(static_cast<std::size_t>(total), '\0');
        check(MPI_Allgatherv(mine.data(), size, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR,
                             MPI_COMM_WORLD),
              "MPI_Allgatherv");
        std::vector<std::string> parts;
        for (std::size_t p = 0; p < sizes.size(); ++p)
            parts.push_back(all.substr(static_cast<std::size_t>(offsets[p]), static_cast<std::size_t>(sizes[p])));
        return parts;
    }
    int process() const override { return process_; }
    int processes() const override { return processes_; }

  private:
    int process_ = 0;
    int processes_ = 1;
};

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int code = 0;
    try {
        MpiExchange exchange;
        ember::cli::set_job_exchange(&exchange);
        CLI::App app{ember::cli::kRootDescription, "ember"};
        ember::cli::configure_root_app(app);
        ember::cli::add_stats_command(app);
        code = ember::cli::run_root_app(app, argc, argv);
    } catch (const std::exception& error) {
        // What failed outside the commands (an MPI call while setting up the exchange;
        // run_root_app catches the commands' own): the one exit-code rule of
        // command_errors.h.
        std::fprintf(stderr, "ember-mpi: %s\n", error.what());
        code = ember::cli::exit_code_of(error);
    }
    std::fflush(stdout);
    // A process that failed (a bad file in its shard) would leave the others waiting in
    // the next exchange: it ends them all, with its exit code.
    if (code != 0) MPI_Abort(MPI_COMM_WORLD, code);
    MPI_Finalize();
    return 0;
}
