// record_command.cpp: `ember record [-o FILE] [options] -- CMD ARGS`. Runs CMD with
// libember_collector.so injected (CUDA_INJECTION64_PATH for CUDA,
// NVTX_INJECTION64_PATH for NVTX) and tells the library, through EMBER_RECORD_*
// variables, where and what to record. Forwards SIGINT/SIGTERM/SIGHUP to CMD,
// waits for it, prints the files written and their event counts, and exits with
// CMD's exit status (128 + signal when it was killed).
//
// While CMD runs, its Python stacks are sampled from outside as with --pid (every
// thread, running or idle, --python-hz per second) once it is a CPython process; with
// --subprocesses those of every CPython process it starts too. The samples go to
// FILE when the collector wrote no FILE (a program that never used CUDA or NVTX: the
// usual Python script), else beside it as FILE-stem.python.db, a trace of its own.
//
// `ember record --pid PID [--duration 10s] [-o FILE]` samples the Python stacks of a
// process already running, from outside (collectors/python/outside_sampler.h), until
// the duration passes, Ctrl-C, or the process exits; the process goes on.
//
// --native (both forms) makes those samples mixed stacks: the native frames around the
// Python ones (collectors/python/native_stack.h); the threads are ptrace-stopped for
// the moment of each unwind. A process that is not CPython (CMD or PID itself, and with
// --subprocesses its descendants) is then sampled too, its native stacks alone, so
// that any program can be recorded, as with perf record.
#include "cli/commands.h"
#include "cli/trace_input.h"
#include "collectors/launch.h"
#include "collectors/python/outside_sampler.h"
#include "profiler/store/reader.h"
#include "profiler/store/trace_files.h"

#include <CLI/CLI.hpp>

#include <atomic>
#include <thread>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <sys/types.h>

namespace ember::cli {

namespace {

struct RecordOptions {
    std::string output = "ember-record.db";
    // What the library in CMD is told (its defaults are the contract's); output,
    // children and the two flags below are filled in from the options.
    collector::RecordSettings settings;
    std::string children = collector::child_policy_name(collector::RecordSettings{}.children);
    bool no_cuda = false;
    bool no_socket = false;
    int pid = 0;
    std::string duration;
    double python_hz = 100.0;
    bool subprocesses = false;
    bool native = false;
    std::vector<std::string> command;
};

std::string stem_of(const std::string& output) {
    if (output.size() > 3 && output.compare(output.size() - 3, 3, ".db") == 0)
        return output.substr(0, output.size() - 3);
    return output;
}

// Where the Python samples of `ember record -- CMD` are written while CMD runs.
std::string python_side_file(const std::string& output) {
    return stem_of(output) + ".python.db";
}

// The files this recording produced: FILE, FILE-stem.pid<N>.db, FILE-stem.rank<N>.db,
// FILE-stem.python.db.
std::vector<std::string> recorded_files(const std::string& output) {
    std::vector<std::string> files;
    std::error_code error;
    if (std::filesystem::exists(output, error)) files.push_back(output);
    std::filesystem::path stem(stem_of(output));
    std::filesystem::path directory = stem.parent_path().empty() ? "." : stem.parent_path();
    std::string prefix = stem.filename().string();
    for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
        std::string name = entry.path().filename().string();
        bool suffixed = name.rfind(prefix + ".pid", 0) == 0 || name.rfind(prefix + ".rank", 0) == 0 ||
                        name == prefix + ".python.db";
        if (suffixed && name.size() > 3 && name.compare(name.size() - 3, 3, ".db") == 0)
            files.push_back((stem.parent_path().empty() ? std::filesystem::path(name) : directory / name).string());
    }
    return files;
}

// The perf maps in /tmp now (JIT code names: /tmp/perf-PID.map).
std::set<std::string> perf_maps() {
    std::set<std::string> maps;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator("/tmp", error)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("perf-", 0) == 0 && name.size() > 4 && name.compare(name.size() - 4, 4, ".map") == 0)
            maps.insert(entry.path().string());
    }
    return maps;
}

// Removes the perf maps of the recorded processes (the pid each trace file records) that
// were not there before the recording.
void remove_perf_maps(const std::vector<std::string>& files, const std::set<std::string>& before) {
    for (const std::string& file : files) {
        try {
            store::TraceReader reader(file);
            const std::string map = "/tmp/perf-" + std::to_string(reader.run().pid) + ".map";
            std::error_code error;
            if (before.count(map) == 0) std::filesystem::remove(map, error);
        } catch (const std::exception&) {
            // an unreadable trace is reported by print_summary
        }
    }
}

void print_summary(const std::string& path) {
    try {
        store::TraceReader reader(path);
        std::fprintf(stderr,
                     "ember record: %s%s: %lld kernels, %lld memcpys, %lld memsets, %lld API calls, "
                     "%lld NVTX ranges, %lld marks, %lld counter samples, %lld CPU samples, %llu dropped\n",
                     path.c_str(), reader.complete() ? "" : " (not closed cleanly)",
                     static_cast<long long>(reader.event_count("kernels")),
                     static_cast<long long>(reader.event_count("memcpys")),
                     static_cast<long long>(reader.event_count("memsets")),
                     static_cast<long long>(reader.event_count("api_calls")),
                     static_cast<long long>(reader.event_count("ranges")),
                     static_cast<long long>(reader.event_count("marks")),
                     static_cast<long long>(reader.event_count("counter_samples")),
                     static_cast<long long>(reader.event_count("stack_samples")),
                     static_cast<unsigned long long>(reader.total_dropped()));
    } catch (const std::exception& error) {
        std::fprintf(stderr, "ember record: %s\n", error.what());
    }
}

std::atomic<bool> g_stop_sampling{false};

void stop_sampling(int) {
    g_stop_sampling.store(true);
}

// "10s", "500ms", "2m", "1h" or plain seconds; nullopt when malformed.
std::optional<std::chrono::nanoseconds> parse_duration(const std::string& text) {
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || !(value > 0)) return std::nullopt;
    const std::string unit(end);
    double seconds = value;
    if (unit == "ms")
        seconds = value / 1e3;
    else if (unit == "m" || unit == "min")
        seconds = value * 60;
    else if (unit == "h")
        seconds = value * 3600;
    else if (!unit.empty() && unit != "s")
        return std::nullopt;
    return std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9));
}

// ember record --pid: the Python stacks of a running process, sampled from outside.
int run_record_pid(const RecordOptions& options) {
    if (!options.command.empty()) fail_command("record", "--pid records a running process: give no command after --");
    if (options.pid <= 0) fail_command("record", "--pid must be a process id, not " + std::to_string(options.pid));
    if (!(options.python_hz > 0) || options.python_hz > 10000)
        fail_command("record",
                     "--python-hz must be above 0 (with --pid, sampling is all there is to record) and at most "
                     "10000, not " +
                         std::to_string(options.python_hz));
    collector::python::OutsideRecordOptions sampling;
    sampling.pid = options.pid;
    sampling.output = options.output;
    sampling.hz = options.python_hz;
    sampling.subprocesses = options.subprocesses;
    sampling.native = options.native;
    // With --subprocesses the root need not be CPython (a shell or launcher that starts
    // Python workers): it must exist, and something under it must be readable.
    // With --native a root that is not CPython is sampled itself (native stacks alone).
    std::string root_error;
    if (options.subprocesses && !options.native) {
        try {
            collector::python::PythonProcess root(options.pid);
        } catch (const collector::python::PythonReadError& error) {
            root_error = error.what();
            if (root_error.find("is not a CPython process") == std::string::npos)
                fail_command("record", "--pid " + std::to_string(options.pid) + ": " + root_error);
            sampling.wait_for_python = true;
        }
    }
    if (!options.duration.empty()) {
        const auto duration = parse_duration(options.duration);
        if (!duration)
            fail_command("record",
                         "--duration must be a length such as 10s, 500ms or 2m, not '" + options.duration + "'");
        sampling.duration = *duration;
    }
    g_stop_sampling.store(false);
    sampling.stop = &g_stop_sampling;
    struct sigaction stop {};
    stop.sa_handler = stop_sampling;
    sigemptyset(&stop.sa_mask);
    struct sigaction previous[3];
    const int stopping[] = {SIGINT, SIGTERM, SIGHUP};
    for (int index = 0; index < 3; ++index) sigaction(stopping[index], &stop, &previous[index]);
    collector::python::OutsideRecordResult result;
    try {
        if (!options.settings.quiet)
            std::fprintf(stderr, "ember record: sampling the %s stacks of process %d at %g Hz%s\n",
                         options.native ? "native (and Python)" : "Python", options.pid, options.python_hz,
                         options.duration.empty() ? " until Ctrl-C or its exit" : "");
        result = collector::python::record_python_process(sampling);
    } catch (const collector::python::PythonReadError& error) {
        for (int index = 0; index < 3; ++index) sigaction(stopping[index], &previous[index], nullptr);
        fail_command("record", "--pid " + std::to_string(options.pid) + ": " + error.what());
    }
    for (int index = 0; index < 3; ++index) sigaction(stopping[index], &previous[index], nullptr);
    if (result.processes.empty())
        fail_command("record", "--pid " + std::to_string(options.pid) + ": " + root_error +
                                   ", and no CPython process descending from it could be read while sampling");
    if (!result.error.empty()) std::fprintf(stderr, "ember record: stopped early: %s\n", result.error.c_str());
    if (result.native_failures > 0)
        std::fprintf(stderr, "ember record: --native: %lld snapshots have Python frames only: %s\n",
                     static_cast<long long>(result.native_failures), result.native_error.c_str());
    if (!options.settings.quiet) {
        std::fprintf(stderr,
                     "ember record: %lld snapshots in %.2f s (%.1f per second), %lld thread samples (%lld idle)%s\n",
                     static_cast<long long>(result.snapshots), result.seconds,
                     result.seconds > 0 ? static_cast<double>(result.snapshots) / result.seconds : 0.0,
                     static_cast<long long>(result.samples), static_cast<long long>(result.idle_samples),
                     result.process_exited ? "; the process exited" : "");
        if (result.processes.size() == 1 && !result.native_only.empty())
            std::fprintf(stderr, "ember record: not a CPython process: its native stacks alone\n");
        else if (result.processes.size() > 1)
            std::fprintf(stderr, "ember record: %zu processes sampled (%zu CPython, %zu native stacks only)\n",
                         result.processes.size(), result.processes.size() - result.native_only.size(),
                         result.native_only.size());
        print_summary(options.output);
    }
    return result.error.empty() ? 0 : kRunTimeFailureExitCode;
}

int run_record(const RecordOptions& options) {
    if (options.pid != 0) return run_record_pid(options);
    if (options.command.empty())
        fail_command("record", "no command to record (ember record -o FILE -- CMD ARGS, or --pid PID)");
    if (!options.duration.empty())
        fail_command("record", "--duration goes with --pid (a recorded command runs until it exits)");
    if (options.python_hz < 0 || options.python_hz > 10000)
        fail_command("record",
                     "--python-hz must be between 0 (off) and 10000, not " + std::to_string(options.python_hz));
    if (options.native && options.python_hz == 0)
        fail_command("record", "--native samples at the --python-hz rate: it needs --python-hz above 0");
    const std::optional<collector::ChildPolicy> children = collector::parse_child_policy(options.children);
    if (!children) fail_command("record", "--children must be suffix or skip, not '" + options.children + "'");
    std::string library = collector::find_collector_library();
    if (library.empty())
        fail_command("record",
                     "libember_collector.so not found next to the ember executable; set EMBER_COLLECTOR_LIBRARY");
    std::string output = std::filesystem::absolute(options.output).string();
    // Files of an earlier recording with the same name would be reported as ours.
    for (const std::string& stale : recorded_files(output)) std::filesystem::remove(stale);

    // With CPU sampling or --native, a program that runs oneDNN (PyTorch on the CPU, ember's CPU
    // backend) is asked to name its JIT kernels in /tmp/perf-PID.map, which the
    // sampler reads; unless the user set the variable. The maps the recorded processes
    // leave are removed at the end (those that were there before are not touched).
    const bool name_jit_kernels = (options.settings.cpu_sample_hz > 0 || (options.native && options.python_hz > 0)) &&
                                  std::getenv("ONEDNN_JIT_PROFILE") == nullptr &&
                                  std::getenv("DNNL_JIT_PROFILE") == nullptr;
    const std::set<std::string> perf_maps_before = name_jit_kernels ? perf_maps() : std::set<std::string>{};

    // With --native the sampler takes CMD as it is when it starts: a process that is not
    // CPython is sampled at once. It starts once CMD has exec'd, so that ember's own
    // forked copy is never taken for CMD.
    collector::LaunchOptions launch;
    launch.command = options.command;
    launch.collector_library = library;
    launch.record = options.settings;
    launch.record->output = output;
    launch.record->children = *children;
    launch.record->control_socket = !options.no_socket;
    launch.record->trace_cuda = !options.no_cuda;
    // No flag: EMBER_RECORD_PYTHON_CALL_SITES=0 in ember's own environment turns it off.
    launch.record->python_call_sites = collector::RecordSettings::from_environment().python_call_sites;
    if (name_jit_kernels) {
        // oneDNN's profiling flags: 1 VTune (its default), 2 the perf map.
        launch.environment = {{"ONEDNN_JIT_PROFILE", "3"}, {"DNNL_JIT_PROFILE", "3"}};
    }
    launch.wait_for_exec = options.native;
    launch.name = "ember record";
    std::optional<collector::LaunchedProgram> program;
    try {
        program.emplace(launch);
    } catch (const collector::LaunchError& error) {
        fail_at_run_time("record", error.what());
    }
    const pid_t child = program->pid();
    // CMD's Python stacks, from outside, once it is a CPython process (it may never be).
    std::atomic<bool> stop_python{false};
    collector::python::OutsideRecordResult python_result;
    std::thread python_sampler;
    const std::string python_file = python_side_file(output);
    if (options.python_hz > 0) {
        collector::python::OutsideRecordOptions sampling;
        sampling.pid = child;
        sampling.output = python_file;
        sampling.hz = options.python_hz;
        sampling.subprocesses = options.subprocesses;
        sampling.native = options.native;
        sampling.wait_for_python = true;
        sampling.stop = &stop_python;
        python_sampler = std::thread([sampling, &python_result] {
            try {
                python_result = collector::python::record_python_process(sampling);
            } catch (const std::exception& error) {
                python_result.error = error.what();
            }
        });
    }
    int exit_code = 0;
    std::string wait_error;
    try {
        exit_code = program->wait(options.native && options.python_hz > 0);
    } catch (const collector::LaunchError& error) {
        wait_error = error.what();
    }
    if (!wait_error.empty()) {
        if (python_sampler.joinable()) {
            stop_python.store(true);
            python_sampler.join();
        }
        fail_at_run_time("record", wait_error);
    }
    if (python_sampler.joinable()) {
        stop_python.store(true);
        python_sampler.join();
        if (!python_result.error.empty())
            std::fprintf(stderr, "ember record: Python sampling stopped early: %s\n", python_result.error.c_str());
        if (python_result.native_failures > 0)
            std::fprintf(stderr, "ember record: --native: %lld snapshots have Python frames only: %s\n",
                         static_cast<long long>(python_result.native_failures), python_result.native_error.c_str());
        if (!options.settings.quiet && !python_result.processes.empty())
            std::fprintf(
                stderr,
                "ember record: %s of %zu process%s: %lld snapshots in %.2f s, %lld thread "
                "samples (%lld idle)\n",
                python_result.native_only.empty()                                    ? "Python stacks"
                : python_result.native_only.size() == python_result.processes.size() ? "native stacks"
                                                                                     : "stacks (Python and native)",
                python_result.processes.size(), python_result.processes.size() == 1 ? "" : "es",
                static_cast<long long>(python_result.snapshots), python_result.seconds,
                static_cast<long long>(python_result.samples), static_cast<long long>(python_result.idle_samples));
        std::error_code error;
        // A program that wrote no trace of its own (no CUDA, no NVTX): its Python samples are FILE.
        if (std::filesystem::exists(python_file, error) && !std::filesystem::exists(output, error)) {
            try {
                store::move_trace_into_place(python_file, output, "the Python samples");
            } catch (const store::TraceError& failure) {
                std::fprintf(stderr, "ember record: %s; the samples stay in %s\n", failure.what(), python_file.c_str());
            }
        }
    }

    std::vector<std::string> files = recorded_files(output);
    if (name_jit_kernels) remove_perf_maps(files, perf_maps_before);
    if (files.empty())
        std::fprintf(stderr,
                     "ember record: no trace written (the program never used CUDA or NVTX and was not a "
                     "CPython process, or every process was skipped)%s\n",
                     options.native ? "" : "; --native samples any program's native stacks");
    if (!options.settings.quiet)
        for (const std::string& file : files) print_summary(file);
    return exit_code;
}

}  // namespace

void add_record_command(CLI::App& app) {
    auto options = std::make_shared<RecordOptions>();
    CLI::App* record = app.add_subcommand(
        "record",
        "Record a program: CUDA kernels, copies and API calls, NVTX ranges, GPU counters, CPU samples "
        "(ember record -o run.db -- ./train --epochs 1)");
    record->add_option("-o,--output", options->output, "trace file to write (default ember-record.db)");
    record->add_flag("--paused", options->settings.paused,
                     "open the file but capture nothing until `ember attach PID start` "
                     "or cudaProfilerStart()");
    record->add_option("--children", options->children,
                       "child processes: suffix (own file FILE.pid<N>.db, the default) or skip");
    record->add_option("--sample-cpu", options->settings.cpu_sample_hz,
                       "CPU stack samples per second of CPU time (0 = off)");
    record->add_option("--nvml", options->settings.nvml_hz, "GPU counter samples per second (default 20, 0 = off)");
    record->add_flag("--no-cuda", options->no_cuda, "do not trace CUDA (NVTX and host data only)");
    // Passed to the recorded process through RecordSettings (collectors/record_environment.h).
    record->add_flag("--cuda-memory", options->settings.trace_cuda_memory,
                     "record every device memory allocation and free, and stream-ordered memory pools "
                     "(CUPTI MEMORY2 / MEMORY_POOL records; read by `ember stats --report gpu_memory`)");
    record->add_flag("--no-socket", options->no_socket, "no control socket for `ember attach`");
    record->add_flag("-q,--quiet", options->settings.quiet, "no collector messages and no summary");
    record->add_option("--pid", options->pid,
                       "sample the Python stacks (with --native, any program's native stacks) of this running process "
                       "from outside instead of running CMD");
    record->add_option("--duration", options->duration,
                       "with --pid: how long to sample (10s, 500ms, 2m; default until "
                       "Ctrl-C or the process exits)");
    record->add_option("--python-hz", options->python_hz,
                       "Python stack samples per second, read from outside (default 100; 0 = off for a CMD)");
    record->add_flag("--subprocesses", options->subprocesses,
                     "sample the Python stacks of the processes it starts too (DataLoader workers, multiprocessing, "
                     "torchrun's ranks), each as its own process");
    record->add_flag(
        "--native", options->native,
        "mixed stacks: the native frames (C extensions, torch's C++, oneDNN, BLAS) around the Python ones, "
        "and the native stacks alone of a program that is not Python; the threads are stopped (ptrace) "
        "for each unwind, then resumed");
    record->add_option("command", options->command, "the program and its arguments, after --");
    record->callback([options] {
        int code = run_record(*options);
        if (code != 0) throw CLI::RuntimeError(code);
    });
}

}  // namespace ember::cli
