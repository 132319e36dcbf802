// import_fuzz_targets.cpp: the importers' fuzz entry points.
#include "tests/profiler/import/fuzz/import_fuzz_targets.h"

#include "profiler/import/import.h"
#include "profiler/store/reader.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ember::import_fuzz {

namespace {

namespace fs = std::filesystem;

std::string g_outcome;
bool g_succeeded = false;

// Where the cases are written: tmpfs when there is one, since every import ends in an
// fsync and a disk makes that most of a case's time.
fs::path scratch_root() {
    std::error_code error;
    if (fs::is_directory("/dev/shm", error) && ::access("/dev/shm", W_OK) == 0) return "/dev/shm";
    return fs::temp_directory_path();
}

// One folder per process for the input and the output, removed at exit.
const fs::path& work_folder() {
    static const fs::path folder = [] {
        fs::path path = scratch_root() / ("ember-import-fuzz-" + std::to_string(::getpid()));
        fs::remove_all(path);
        fs::create_directories(path);
        std::atexit([] {
            std::error_code ignored;
            fs::remove_all(scratch_root() / ("ember-import-fuzz-" + std::to_string(::getpid())), ignored);
        });
        return path;
    }();
    return folder;
}

[[noreturn]] void finding(const std::string& what) {
    std::fprintf(stderr, "import fuzz finding: %s\n", what.c_str());
    std::fflush(stderr);
    std::abort();
}

int run(const std::uint8_t* data, std::size_t size, importing::SourceFormat format) {
    const fs::path& folder = work_folder();
    const std::string input = (folder / "input").string();
    const std::string output = (folder / "output.db").string();
    {
        std::ofstream out(input, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
        if (!out) finding("cannot write the fuzz input " + input);
    }
    std::remove(output.c_str());
    importing::ImportOptions options;
    options.format = format;
    g_succeeded = false;
    try {
        importing::ImportedFile imported = importing::import_file(input, output, options);
        store::TraceReader reader(output);
        std::int64_t stored = 0;
        for (const char* table : {"kernels", "memcpys", "memsets", "synchronizations", "api_calls", "ranges", "marks",
                                  "counter_samples", "collector_overhead", "stack_samples"}) {
            stored += reader.event_count(table);
        }
        stored += reader.memory_event_count();
        if (stored != imported.counts.written()) {
            finding("the report counts " + std::to_string(imported.counts.written()) + " events, the file holds " +
                    std::to_string(stored));
        }
        if (imported.counts.flows + imported.counts.unlinked_gpu_events !=
            imported.counts.kernels + imported.counts.memcpys + imported.counts.memsets) {
            finding("linked + unlinked GPU events differ from the GPU events written");
        }
        g_outcome = "ok";
        g_succeeded = true;
    } catch (const store::TraceError& error) {
        g_outcome = error.what();
        if (g_outcome.find(input) == std::string::npos && g_outcome.find(output) == std::string::npos &&
            g_outcome.find(folder.string()) == std::string::npos) {
            finding("an error that names no file: " + g_outcome);
        }
        if (fs::exists(output)) finding("a failed import left " + output + " behind (" + g_outcome + ")");
    } catch (const std::exception& error) {
        finding(std::string("not a TraceError: ") + error.what());
    }
    // Only the input (and a successful output) may remain.
    for (const auto& entry : fs::directory_iterator(folder)) {
        std::string name = entry.path().filename().string();
        if (name != "input" && !(g_succeeded && name == "output.db"))
            finding("left behind: " + name + " (" + g_outcome + ")");
    }
    return 0;
}

}  // namespace

int fuzz_kineto(const std::uint8_t* data, std::size_t size) {
    return run(data, size, importing::SourceFormat::kineto);
}
int fuzz_chrome(const std::uint8_t* data, std::size_t size) {
    return run(data, size, importing::SourceFormat::chrome);
}
int fuzz_nsys(const std::uint8_t* data, std::size_t size) {
    return run(data, size, importing::SourceFormat::nsys);
}
int fuzz_nvprof(const std::uint8_t* data, std::size_t size) {
    return run(data, size, importing::SourceFormat::nvprof);
}
int fuzz_memory_snapshot(const std::uint8_t* data, std::size_t size) {
    return run(data, size, importing::SourceFormat::memory_snapshot);
}

const std::string& last_outcome() {
    return g_outcome;
}
bool last_succeeded() {
    return g_succeeded;
}

}  // namespace ember::import_fuzz
