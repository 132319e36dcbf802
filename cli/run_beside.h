// run_beside.h: `ember` runs two programs of its own by name: `ember view` is
// `ember-view` (the GUI stack: ImGui, GLFW, OpenGL) and `ember train|bench|data|doctor`
// are `ember-engine` (the training engine: CUDA runtime, cuBLAS, cuDNN, NCCL, oneDNN,
// MPI). Keeping those out of `ember` itself is what makes the trace commands (stats,
// export, import, merge, diff) start in a few milliseconds instead of the ~70 ms the
// dynamic loader spends mapping the CUDA and oneDNN libraries.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace ember::cli {

// Replaces this process with `program` (found beside the running `ember`, else on
// PATH) given `arguments` (argv[0] is added). Never returns: on failure it prints why
// and `how_to_get` the program, and exits with 1.
[[noreturn]] void run_beside(const std::string& program, const std::vector<std::string>& arguments, const char* command,
                             const char* how_to_get);

// A subcommand of `ember` whose every argument (--help included) belongs to `program`,
// which is run with `name` followed by them.
void add_forwarded_command(CLI::App& app, const char* name, const char* description, const char* program,
                           const char* how_to_get);

}  // namespace ember::cli
