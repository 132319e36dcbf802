// engine_main.cpp: `ember-engine`, the commands that run the training engine — train,
// bench, data, doctor. `ember` forwards them here (run_beside.h), so the trace commands
// never load the CUDA, cuDNN, NCCL, oneDNN and MPI libraries these link.
#include "cli/commands.h"
#include "cli/main_app.h"

int main(int argc, char** argv) {
    CLI::App app{ember::cli::kRootDescription, "ember"};
    ember::cli::configure_root_app(app);
    ember::cli::add_doctor_command(app);
    ember::cli::add_train_command(app);
    ember::cli::add_data_command(app);
    ember::cli::add_bench_command(app);
    return ember::cli::run_root_app(app, argc, argv);
}
