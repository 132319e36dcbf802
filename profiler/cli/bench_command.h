// bench_command.h: `ember bench <what>` groups the benchmarks (store, dataloader,
// train, allreduce, ...). Each benchmark adds itself under the `bench` app that
// add_bench_command creates; `bench` is hidden until one has.
#pragma once

namespace CLI {
class App;
}

namespace ember::cli {

// Creates `ember bench` and returns it so add_bench_* functions can hang below it.
CLI::App* add_bench_command(CLI::App& app);

}  // namespace ember::cli
