// main.cpp: the `ember` command, git-style subcommands (CLI11). The trace commands
// run here; the engine's (train, bench, data, doctor) run in `ember-engine` and the
// viewer in `ember-view`, both beside this program (run_beside.h).
#include "cli/commands.h"
#include "cli/main_app.h"
#include "cli/run_beside.h"

namespace {

constexpr const char* kEngine = "ember-engine";
constexpr const char* kEngineHint = "ember-engine is built with ember (target ember_engine_cli) and installed beside it";

}  // namespace

int main(int argc, char** argv) {
    using namespace ember::cli;
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
