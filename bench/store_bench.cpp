// store_bench.cpp: `ember bench store`, trace writer throughput against a
// plain loop, on the same synthetic rows in the same run.
//
// Contenders (each runs in its own forked process, so peak RSS is its own):
//   generator only       the synthetic generator feeding a sink that only counts:
//                        the cost every contender pays before storing anything
//   baseline (autocommit) one prepared single-row INSERT per event, each its own
//                        transaction (SQLite autocommit), same schema and pragmas
//                        (WAL, synchronous=NORMAL) — the plain one-row-per-statement loop
//   baseline (250 ms)    the same loop, committing every 250 ms (batched
//                        transactions but no multi-row INSERTs, no writer thread)
//   TraceWriter          ember's writer: rings + writer thread + 32-row INSERTs;
//                        "ingest" stops when every event is committed, "with close"
//                        adds building the indexes and track_stats
#include "bench/store_bench.h"
#include "common/os.h"
#include "profiler/store/reader.h"
#include "profiler/store/schema.h"
#include "profiler/store/sqlite_util.h"
#include "profiler/store/tables.h"
#include "profiler/store/writer.h"
#include "profiler/synth/synthetic_trace.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace ember::bench {

namespace {

using namespace ember::trace;
using Clock = os::SteadyClock;
using os::seconds_since;

// --- Sinks -------------------------------------------------------------------------

// Counts events and hands out ids: the generator's own cost.
class CountingSink : public synth::EventSink {
  public:
    StringId intern(std::string_view) override { return ++next_id_; }
    void register_process(const ProcessInfo&) override {}
    ThreadId register_thread(const ThreadInfo&) override { return ++next_id_; }
    void register_device(const DeviceInfo&) override {}
    StreamId register_stream(const StreamInfo&) override { return ++next_id_; }
    CounterId register_counter(const CounterInfo&) override { return ++next_id_; }
    FrameId intern_frame(std::string_view, std::string_view, std::uint64_t) override { return ++next_id_; }
    StackId intern_stack(std::span<const FrameId>) override { return ++next_id_; }
    RangeId next_range_id() override { return ++next_id_; }
    void record_kernel(const KernelEvent& e) override { sum_ += e.start_ns; }
    void record_memcpy(const MemcpyEvent& e) override { sum_ += e.start_ns; }
    void record_memset(const MemsetEvent& e) override { sum_ += e.start_ns; }
    void record_sync(const SyncEvent& e) override { sum_ += e.start_ns; }
    void record_api_call(const ApiEvent& e) override { sum_ += e.start_ns; }
    void record_range(const RangeEvent& e) override { sum_ += e.start_ns; }
    void record_mark(const MarkEvent& e) override { sum_ += e.time_ns; }
    void record_counter(const CounterSample& e) override { sum_ += e.time_ns; }
    void record_stack_sample(const StackSample& e) override { sum_ += e.time_ns; }
    void record_overhead(const OverheadEvent& e) override { sum_ += e.start_ns; }
    std::int64_t checksum() const { return sum_; }

  private:
    std::uint32_t next_id_ = 0;
    std::int64_t sum_ = 0;  // keeps the compiler from dropping the events
};

// The plain loop: one prepared single-row INSERT per event, executed as soon as
// the event arrives. Same tables and columns as TraceWriter writes.
class PlainLoopSink : public synth::EventSink {
  public:
    PlainLoopSink(const std::string& path, std::chrono::milliseconds commit_every)
        : db_((std::filesystem::remove(path), path), store::Connection::Mode::create), commit_every_(commit_every) {
        exec("PRAGMA page_size = 8192; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
        exec(store::create_tables_sql());
        insert<store::StringRow>({0, ""});
        if (commit_every_.count() > 0) exec("BEGIN");
        last_commit_ = Clock::now();
    }
    void finish() {
        if (commit_every_.count() > 0) exec("COMMIT");
    }

    StringId intern(std::string_view text) override {
        auto found = strings_.find(std::string(text));
        if (found != strings_.end()) return found->second;
        StringId id = static_cast<StringId>(strings_.size() + 1);
        strings_.emplace(std::string(text), id);
        insert(store::StringRow{id, std::string(text)});
        return id;
    }
    void register_process(const ProcessInfo& p) override { insert(store::ProcessRow{p.pid, intern(p.name)}); }
    ThreadId register_thread(const ThreadInfo& t) override {
        ThreadId id = ++threads_;
        insert(store::ThreadRow{id, t.pid, t.tid, intern(t.name)});
        return id;
    }
    void register_device(const DeviceInfo& d) override {
        insert(store::DeviceRow{d.device_id, intern(d.name), intern(d.uuid), d.compute_capability_major,
                                d.compute_capability_minor, d.multiprocessor_count, d.memory_bytes,
                                d.memory_bandwidth_bytes_per_second});
    }
    StreamId register_stream(const StreamInfo& s) override {
        StreamId id = ++streams_;
        insert(store::StreamRow{id, s.device_id, s.context_id, s.cuda_stream_id, s.priority, intern(s.name)});
        return id;
    }
    CounterId register_counter(const CounterInfo& c) override {
        CounterId id = ++counters_;
        insert(store::CounterRow{id, intern(c.name), intern(c.unit), c.device_id});
        return id;
    }
    FrameId intern_frame(std::string_view function, std::string_view module, std::uint64_t address) override {
        FrameId id = ++frames_;
        StringId function_id = intern(function), module_id = intern(module);
        insert(store::FrameRow{id, function_id, module_id, address, -1});  // line: native
        return id;
    }
    StackId intern_stack(std::span<const FrameId> frames) override {
        StackId parent = 0;
        for (FrameId frame : frames) {
            auto key = std::make_pair(parent, frame);
            auto found = stacks_.find(key);
            if (found == stacks_.end()) {
                StackId id = static_cast<StackId>(stacks_.size() + 1);
                insert(store::StackRow{id, parent, frame});
                found = stacks_.emplace(key, id).first;
            }
            parent = found->second;
        }
        return parent;
    }
    RangeId next_range_id() override { return ++ranges_; }

    void record_kernel(const KernelEvent& e) override {
        const LaunchConfig& c = e.launch;
        std::vector<std::int64_t> key = {c.grid_x,
                                         c.grid_y,
                                         c.grid_z,
                                         c.block_x,
                                         c.block_y,
                                         c.block_z,
                                         c.registers_per_thread,
                                         c.static_shared_bytes,
                                         c.dynamic_shared_bytes};
        auto found = launch_configs_.find(key);
        if (found == launch_configs_.end()) {
            store::LaunchConfigRow row;
            static_cast<LaunchConfig&>(row) = c;
            row.launch_config_id = static_cast<LaunchConfigId>(launch_configs_.size() + 1);
            insert(row);
            found = launch_configs_.emplace(key, row.launch_config_id).first;
        }
        store::KernelRow row;
        static_cast<KernelEvent&>(row) = e;
        row.launch_config_id = found->second;
        insert(row);
    }
    void record_memcpy(const MemcpyEvent& e) override { insert(e); }
    void record_memset(const MemsetEvent& e) override { insert(e); }
    void record_sync(const SyncEvent& e) override { insert(e); }
    void record_api_call(const ApiEvent& e) override { insert(e); }
    void record_range(const RangeEvent& e) override { insert(e); }
    void record_mark(const MarkEvent& e) override { insert(e); }
    void record_counter(const CounterSample& e) override { insert(e); }
    void record_stack_sample(const StackSample& e) override { insert(e); }
    void record_overhead(const OverheadEvent& e) override { insert(e); }

  private:
    void exec(const std::string& sql) { store::exec_sql(db_.get(), db_.path(), sql.c_str()); }
    // One prepared single-row INSERT per table (its declared columns), executed at once.
    template <typename Row>
    void insert(const Row& row) {
        static_assert(std::tuple_size_v<decltype(statements_)> == std::size(store::kTables));
        static const std::size_t position = table_position<Row>();
        store::Statement& statement = statements_[position];
        if (!statement) statement = store::Statement(db_.get(), db_.path(), store::insert_sql<Row>());
        store::bind_row(statement, 1, row);
        statement.step_done();
        if (commit_every_.count() > 0 && (++rows_ & 1023) == 0 && Clock::now() - last_commit_ >= commit_every_) {
            exec("COMMIT; BEGIN");
            last_commit_ = Clock::now();
        }
    }
    template <typename Row>
    static std::size_t table_position() {
        for (std::size_t i = 0; i < std::size(store::kTables); ++i)
            if (std::string_view(store::kTables[i].name) == store::TableOf<Row>::name) return i;
        return 0;
    }

    store::Connection db_;
    std::chrono::milliseconds commit_every_;
    std::array<store::Statement, std::size(store::kTables)> statements_;
    std::map<std::string, StringId> strings_;
    std::map<std::vector<std::int64_t>, LaunchConfigId> launch_configs_;
    std::map<std::pair<StackId, FrameId>, StackId> stacks_;
    ThreadId threads_ = 0;
    StreamId streams_ = 0;
    CounterId counters_ = 0;
    FrameId frames_ = 0;
    RangeId ranges_ = 0;
    std::uint64_t rows_ = 0;
    Clock::time_point last_commit_;
};

// --- Running a contender in its own process ---------------------------------------

struct PhaseResult {
    std::int64_t events = 0;
    double seconds = 0;                    // the measured part
    double close_seconds = 0;              // TraceWriter: close() (indexes, track_stats)
    double cpu_seconds = 0;                // user + system of the whole process
    double writer_thread_cpu_seconds = 0;  // TraceWriter: its writer thread alone
    double max_commit_gap_ms = 0;
    double measured_cpu_seconds = 0;  // process CPU at the end of the measured part
    long measured_peak_rss_kib = 0;   // VmHWM at the end of the measured part
    long start_rss_kib = 0;           // VmRSS when the forked process began (inherited from ember)
    long peak_rss_kib = 0;
    bool ok = false;
    char error[512] = {};
};

PhaseResult run_in_child(const std::function<PhaseResult()>& phase) {
    int fds[2];
    PhaseResult result;
    if (pipe(fds) != 0) {
        std::snprintf(result.error, sizeof(result.error), "pipe: %s", std::strerror(errno));
        return result;
    }
    pid_t child = fork();
    if (child < 0) {
        std::snprintf(result.error, sizeof(result.error), "fork: %s", std::strerror(errno));
        return result;
    }
    if (child == 0) {
        close(fds[0]);
        PhaseResult child_result;
        long start_rss = os::proc_status_kib("VmRSS");
        try {
            child_result = phase();
            child_result.start_rss_kib = start_rss;
            child_result.ok = true;
        } catch (const std::exception& error) {
            std::snprintf(child_result.error, sizeof(child_result.error), "%s", error.what());
        }
        ssize_t written = write(fds[1], &child_result, sizeof(child_result));
        _exit(written == static_cast<ssize_t>(sizeof(child_result)) ? 0 : 1);
    }
    close(fds[1]);
    ssize_t got = read(fds[0], &result, sizeof(result));
    close(fds[0]);
    int status = 0;
    rusage usage{};
    wait4(child, &status, 0, &usage);
    if (got != static_cast<ssize_t>(sizeof(result))) {
        result = PhaseResult{};
        std::snprintf(result.error, sizeof(result.error), "benchmark process died (status %d)", status);
        return result;
    }
    result.peak_rss_kib = usage.ru_maxrss;
    result.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
    return result;
}

// Marks the end of a phase's measured part.
void end_measurement(PhaseResult& result, Clock::time_point start) {
    result.seconds = seconds_since(start);
    result.measured_cpu_seconds = os::process_cpu_seconds();
    result.measured_peak_rss_kib = os::peak_rss_kib();
}

std::string with_commas(std::int64_t value) {
    std::string digits = std::to_string(value), out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

}  // namespace

int run_store_bench(const StoreBenchOptions& options) {
    namespace fs = std::filesystem;
    fs::path directory = options.directory.empty()
                             ? fs::temp_directory_path() / ("ember-bench-store-" + std::to_string(getpid()))
                             : fs::path(options.directory);
    std::error_code error;
    fs::create_directories(directory, error);
    if (error) {
        std::fprintf(stderr, "ember bench store: cannot create %s: %s\n", directory.c_str(), error.message().c_str());
        return store::kTraceErrorExitCode;
    }
    synth::SyntheticTraceOptions synth_options;
    synth_options.events = options.events;
    synth_options.seed = options.seed;
    synth::SyntheticTraceOptions baseline_options = synth_options;
    baseline_options.events = std::min(options.baseline_events, options.events);

    std::printf("ember bench store: synthetic training trace, seed %llu, %u hardware threads\n",
                static_cast<unsigned long long>(options.seed), std::thread::hardware_concurrency());
    std::fflush(stdout);

    PhaseResult generator = run_in_child([&] {
        PhaseResult r;
        CountingSink sink;
        auto start = Clock::now();
        r.events = synth::generate_synthetic_rank(sink, synth_options, 0).events;
        end_measurement(r, start);
        if (sink.checksum() == 42) std::puts("");  // uses the checksum
        return r;
    });
    // The baselines: the plain insert loop, committing every row or every 250 ms.
    auto plain_loop = [&](const std::string& path, std::chrono::milliseconds commit_every,
                          const synth::SyntheticTraceOptions& trace) {
        return run_in_child([&] {
            PhaseResult r;
            auto start = Clock::now();
            PlainLoopSink sink(path, commit_every);
            r.events = synth::generate_synthetic_rank(sink, trace, 0).events;
            sink.finish();
            end_measurement(r, start);
            return r;
        });
    };
    std::string autocommit_path = (directory / "baseline_autocommit.db").string();
    PhaseResult autocommit = plain_loop(autocommit_path, std::chrono::milliseconds(0), baseline_options);
    std::string batched_path = (directory / "baseline_250ms.db").string();
    PhaseResult batched = plain_loop(batched_path, std::chrono::milliseconds(250), synth_options);
    std::string writer_path = (directory / "trace_writer.db").string();
    PhaseResult writer = run_in_child([&] {
        PhaseResult r;
        store::WriterOptions options;
        options.overflow = store::OverflowPolicy::block;
        auto start = Clock::now();
        store::TraceWriter trace_writer(writer_path, synth::synthetic_run_info(synth_options, 0), options);
        synth::WriterSink sink(trace_writer);
        r.events = synth::generate_synthetic_rank(sink, synth_options, 0).events;
        trace_writer.flush();
        end_measurement(r, start);
        auto close_start = Clock::now();
        trace_writer.close();
        r.close_seconds = seconds_since(close_start);
        store::WriterStats stats = trace_writer.stats();
        if (stats.events_dropped != 0) throw std::runtime_error("TraceWriter dropped events");
        r.writer_thread_cpu_seconds = stats.writer_thread_cpu_seconds;
        r.max_commit_gap_ms = stats.max_commit_gap_ms;
        return r;
    });

    for (const PhaseResult* phase : {&generator, &autocommit, &batched, &writer}) {
        if (!phase->ok) {
            std::fprintf(stderr, "ember bench store: %s\n", phase->error);
            return store::kTraceErrorExitCode;
        }
    }
    // The writer's file must hold every event it was given.
    std::int64_t stored = 0;
    try {
        store::TraceReader reader(writer_path);
        for (const store::EventTableInfo& table : store::kEventTables) stored += reader.event_count(table.name);
    } catch (const store::TraceError& trace_error) {
        std::fprintf(stderr, "ember bench store: %s\n", trace_error.what());
        return store::kTraceErrorExitCode;
    }

    double baseline_rate = static_cast<double>(autocommit.events) / autocommit.seconds;
    struct Row {
        const char* name;
        std::int64_t events;
        double seconds;
        double cpu_seconds;
        long rss_kib;
        long start_rss_kib;
    };
    std::vector<Row> rows = {
        {"generator only (no storage)", generator.events, generator.seconds, generator.measured_cpu_seconds,
         generator.measured_peak_rss_kib, generator.start_rss_kib},
        {"baseline: 1 INSERT/row, autocommit", autocommit.events, autocommit.seconds, autocommit.measured_cpu_seconds,
         autocommit.measured_peak_rss_kib, autocommit.start_rss_kib},
        {"baseline: 1 INSERT/row, commit/250ms", batched.events, batched.seconds, batched.measured_cpu_seconds,
         batched.measured_peak_rss_kib, batched.start_rss_kib},
        {"TraceWriter, ingest (all committed)", writer.events, writer.seconds, writer.measured_cpu_seconds,
         writer.measured_peak_rss_kib, writer.start_rss_kib},
        {"TraceWriter, incl. close (indexes)", writer.events, writer.seconds + writer.close_seconds, writer.cpu_seconds,
         writer.peak_rss_kib, writer.start_rss_kib},
    };
    std::printf("\n%-37s %10s %8s %12s %9s %8s %14s %11s\n", "variant", "events", "wall s", "events/s", "vs autoc.",
                "CPU s", "events/CPU-s", "RSS growth");
    for (const Row& row : rows) {
        double rate = static_cast<double>(row.events) / row.seconds;
        double cpu_rate = static_cast<double>(row.events) / std::max(row.cpu_seconds, 1e-9);
        std::printf("%-37s %10s %8.2f %12s %8.1fx %8.2f %14s %7ld MiB\n", row.name, with_commas(row.events).c_str(),
                    row.seconds, with_commas(static_cast<std::int64_t>(rate)).c_str(), rate / baseline_rate,
                    row.cpu_seconds, with_commas(static_cast<std::int64_t>(cpu_rate)).c_str(),
                    std::max(0L, row.rss_kib - row.start_rss_kib) / 1024);
    }
    std::printf("\nTraceWriter: %s events stored (%s given), close() %.2f s, longest gap between commits %.0f ms\n",
                with_commas(stored).c_str(), with_commas(writer.events).c_str(), writer.close_seconds,
                writer.max_commit_gap_ms);
    std::printf(
        "TraceWriter CPU: writer thread %.2f s (%s events per writer-thread CPU second), whole process "
        "%.2f s incl. generator and close\n"
        "CPU s: the process (generator + storage); wall rates need an otherwise idle machine; RSS "
        "growth: peak resident set minus what the forked process inherited from ember\n",
        writer.writer_thread_cpu_seconds,
        with_commas(static_cast<std::int64_t>(static_cast<double>(writer.events) /
                                              std::max(writer.writer_thread_cpu_seconds, 1e-9)))
            .c_str(),
        writer.cpu_seconds);
    std::printf("load average at the end: %s\n", os::load_average().c_str());
    std::printf(
        "events/s counts every row of every event table; the autocommit baseline runs on the first %s "
        "events of the same stream\n",
        with_commas(autocommit.events).c_str());
    if (stored != writer.events) {
        std::fprintf(stderr, "ember bench store: %s holds %lld events, expected %lld\n", writer_path.c_str(),
                     static_cast<long long>(stored), static_cast<long long>(writer.events));
        return store::kTraceErrorExitCode;
    }
    if (!options.keep) {
        for (const std::string& path : {autocommit_path, batched_path, writer_path})
            for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix, error);
        if (options.directory.empty()) fs::remove(directory, error);
    } else {
        std::printf("trace files kept in %s\n", directory.c_str());
    }
    return 0;
}

}  // namespace ember::bench
