// stack_samples_trace.cpp: writes a trace of CPU samples with many distinct stacks, the
// input of the stack-reading measurements in docs/performance.md ("Reading sampled
// stacks"): THREADS threads x SAMPLES samples at 1 kHz whose Python-like stacks
// random-walk a call tree of 300 functions (depth 4 to 30), 10% of them idle.
//   ember_bench_stack_samples_trace OUT.db THREADS SAMPLES
#include "profiler/store/writer.h"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace ember;
using namespace ember::trace;

int main(int argc, char** argv) {
    if (argc != 4 || std::atoi(argv[2]) <= 0 || std::atoi(argv[3]) <= 0) {
        std::fprintf(stderr, "usage: %s OUT.db THREADS SAMPLES (both above 0)\n", argv[0]);
        return 2;
    }
    const int threads = std::atoi(argv[2]);
    const int per_thread = std::atoi(argv[3]);
    RunInfo run;
    run.command_line = "stack_samples_trace";
    run.pid = 100;
    store::WriterOptions options;
    options.install_signal_handlers = false;
    options.overflow = store::OverflowPolicy::block;
    store::TraceWriter writer(argv[1], run, options);
    writer.register_process({100, "python3"});
    std::vector<FrameId> frames;
    for (int f = 0; f < 300; ++f)
        frames.push_back(writer.intern_frame("function_" + std::to_string(f),
                                             "module_" + std::to_string(f % 17) + ".py", 0, 10 + f));
    std::mt19937 rng(1);
    for (int t = 0; t < threads; ++t) {
        const ThreadId thread = writer.register_thread({0, 100, 100 + t, "worker"});
        std::vector<StackId> path{0};
        auto push = [&] { path.push_back(writer.intern_stack(path.back(), frames[rng() % 300])); };
        for (int depth = 0; depth < 8; ++depth) push();
        for (int i = 0; i < per_thread; ++i) {
            if (rng() % 100 >= 60) {  // 40% of the samples move: up 1-3 frames, then down 1-3
                for (int pop = 1 + static_cast<int>(rng() % 3); pop > 0 && path.size() > 5; --pop) path.pop_back();
                for (int more = 1 + static_cast<int>(rng() % 3); more > 0 && path.size() < 31; --more) push();
            }
            writer.record_stack_sample(
                {1'000'000'000LL + i * 1'000'000LL + t * 1000, thread, path.back(), rng() % 10 == 0});
        }
    }
    writer.close();
    return 0;
}
