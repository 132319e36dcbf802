// main.cpp: the `ember` command, git-style subcommands (CLI11). The trace commands
// run here; the engine's (train, bench, data, doctor) run in `ember-engine` and the
// viewer in `ember-view`, both beside this program (run_beside.h).
#include "cli/commands.h"
#include "cli/main_app.h"
#include "cli/run_beside.h"

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr const char* kEngine = "ember-engine";
constexpr const char* kEngineHint =
    "ember-engine is built with ember (target ember_engine_cli) and installed beside it";

// One of several processes that mpirun (Open MPI, MPICH) or srun started.
bool launched_as_several_mpi_processes() {
    auto above_one = [](const char* name) {
        const char* value = std::getenv(name);
        return value != nullptr && std::atoi(value) > 1;
    };
    if (above_one("OMPI_COMM_WORLD_SIZE") || above_one("PMI_SIZE") || above_one("PMIX_SIZE")) return true;
    return std::getenv("SLURM_STEP_ID") != nullptr && above_one("SLURM_NTASKS");
}

}  // namespace

int main(int argc, char** argv) {
    using namespace ember::cli;
    // Under mpirun/srun, `ember stats` shards the rank files over the processes: that is
    // ember-mpi, which links MPI (this program never does).
    if (argc > 1 && std::string_view(argv[1]) == "stats" && launched_as_several_mpi_processes())
        run_beside("ember-mpi", std::vector<std::string>(argv + 1, argv + argc), "stats",
                   "ember-mpi is built with ember (target ember_mpi_cli) and installed beside it");
    CLI::App app{kRootDescription, "ember"};
    configure_root_app(app);
    add_forwarded_command(app, "doctor", kDoctorDescription, kEngine, kEngineHint);
    add_forwarded_command(app, "train", kTrainDescription, kEngine, kEngineHint);
    add_view_command(app);
    add_synth_command(app);
    add_forwarded_command(app, "data", kDataDescription, kEngine, kEngineHint);
    add_stats_command(app);
    add_export_command(app);
    add_record_command(app);
    add_dump_command(app);
    add_attach_command(app);
    add_import_command(app);
    add_merge_command(app);
    add_diff_command(app);
    add_forwarded_command(app, "bench", kBenchDescription, kEngine, kEngineHint);
    return run_root_app(app, argc, argv);
}
