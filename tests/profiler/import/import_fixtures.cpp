// import_fixtures.cpp: the hand-written inputs of the importer tests.
#include "tests/profiler/import/import_fixtures.h"

#include <fmt/format.h>
#include <sqlite3.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ember::import_test {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------

void write_file(const std::string& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path);
}

std::string gzip_bytes(std::string_view bytes) {
    z_stream stream{};
    if (deflateInit2(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        throw std::runtime_error("deflateInit2");
    std::string out(deflateBound(&stream, bytes.size()) + 64, '\0');
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    stream.avail_in = static_cast<uInt>(bytes.size());
    stream.next_out = reinterpret_cast<Bytef*>(out.data());
    stream.avail_out = static_cast<uInt>(out.size());
    int result = deflate(&stream, Z_FINISH);
    deflateEnd(&stream);
    if (result != Z_STREAM_END) throw std::runtime_error("deflate");
    out.resize(stream.total_out);
    return out;
}

void exec_sql(const std::string& path, const std::string& sql) {
    sqlite3* db = nullptr;
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
        std::string message = sqlite3_errmsg(db);
        sqlite3_close(db);
        throw std::runtime_error(path + ": " + message);
    }
    char* error = nullptr;
    int result = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
    std::string message = error != nullptr ? error : "";
    sqlite3_free(error);
    sqlite3_close(db);
    if (result != SQLITE_OK) throw std::runtime_error(path + ": " + message + " in: " + sql.substr(0, 200));
}

namespace {

std::string query_text(const std::string& path, const std::string& sql, std::int64_t* number) {
    sqlite3* db = nullptr;
    std::string text;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
        sqlite3_stmt* statement = nullptr;
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) == SQLITE_OK &&
            sqlite3_step(statement) == SQLITE_ROW) {
            const unsigned char* value = sqlite3_column_text(statement, 0);
            if (value != nullptr) text = reinterpret_cast<const char*>(value);
            if (number != nullptr) *number = sqlite3_column_int64(statement, 0);
        }
        sqlite3_finalize(statement);
    }
    sqlite3_close(db);
    return text;
}

}  // namespace

std::string run_metadata(const std::string& trace, const std::string& key) {
    return query_text(trace, fmt::format("SELECT CAST(value AS TEXT) FROM run_metadata WHERE key = '{}'", key),
                      nullptr);
}

std::int64_t count_rows(const std::string& trace, const std::string& sql) {
    std::int64_t number = -1;
    query_text(trace, sql, &number);
    return number;
}

std::string real_traces_dir() {
#ifdef EMBER_REAL_TRACES_DIR
    std::error_code ignored;
    if (fs::is_directory(EMBER_REAL_TRACES_DIR, ignored)) return EMBER_REAL_TRACES_DIR;
#endif
    return {};
}

// ---------------------------------------------------------------------------
// Kineto
// ---------------------------------------------------------------------------

std::string kineto_fixture() {
    return R"json({
  "schemaVersion": 1,
  "traceEvents": [
    {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "python3"}},
    {"ph": "M", "name": "process_labels", "pid": 100, "tid": 0, "args": {"labels": "CPU"}},
    {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "python3"}},
    {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
    {"ph": "M", "name": "thread_name", "pid": 100, "tid": 100, "args": {"name": "thread 100 (python3)"}},
    {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100, "tid": 100, "ts": 1200.000, "dur": 100.000,
     "args": {"External id": 3, "Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]}},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 100, "tid": 100, "ts": 1000, "dur": 1000,
     "args": {"External id": 1}},
    {"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
     "pid": 100, "tid": 100, "ts": 1000.5, "dur": 99.75, "args": {"External id": 2}},
    {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 100, "tid": 100, "ts": 1390, "dur": 5},
    {"ph": "X", "cat": "python_function", "name": "model.py(10): forward", "pid": 100, "tid": 100, "ts": 1150,
     "dur": 350, "args": {"Python id": 4, "Python parent id": null}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100, "ts": 1250.5,
     "dur": 10.25, "args": {"External id": 3, "cbid": 211, "correlation": 11}},
    {"ph": "s", "id": 11, "pid": 100, "tid": 100, "ts": 1250.5, "cat": "ac2g", "name": "ac2g"},
    {"ph": "X", "cat": "kernel", "name": "sgemm_128x64", "pid": 0, "tid": 7, "ts": 1300.125, "dur": 100.375,
     "args": {"External id": 3, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": 11,
              "registers per thread": 64, "shared memory": 4096, "blocks per SM": 0.5, "warps per SM": 2.0,
              "grid": [4, 2, 1], "block": [128, 1, 1], "est. achieved occupancy %": 12}},
    {"ph": "f", "id": 11, "pid": 0, "tid": 7, "ts": 1300.125, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 100, "tid": 100, "ts": 1270, "dur": 5,
     "args": {"cbid": 307, "correlation": 12}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
     "pid": 0, "tid": 21, "ts": 1400, "dur": 200,
     "args": {"device": 0, "context": 1, "stream": 21, "correlation": 12, "registers per thread": 96,
              "shared memory": 0, "grid": [2, 1, 1], "block": [640, 1, 1]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 100, "tid": 100, "ts": 1480, "dur": 4,
     "args": {"cbid": 41, "correlation": 13}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7, "ts": 1500,
     "dur": 10, "args": {"device": 0, "context": 1, "stream": 7, "correlation": 13, "bytes": 1048576,
                         "memory bandwidth (GB/s)": 104.8576}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemsetAsync", "pid": 100, "tid": 100, "ts": 1490, "dur": 2,
     "args": {"cbid": 51, "correlation": 14}},
    {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 1520, "dur": 1,
     "args": {"device": 0, "context": 1, "stream": 7, "correlation": 14, "bytes": 256}},
    {"ph": "X", "cat": "kernel", "name": "orphan_kernel", "pid": 0, "tid": 7, "ts": 1700, "dur": 1,
     "args": {"device": 0, "context": 1, "stream": 7, "correlation": 99, "grid": [1, 1, 1], "block": [32, 1, 1]}},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#7", "pid": 0, "tid": 7, "ts": 1300.125,
     "dur": 400.875, "args": {"External id": 1}},
    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 100, "tid": 100, "ts": 1260,
     "args": {"Total Reserved": 2097152, "Total Allocated": 1048576, "Bytes": 1048576, "Addr": 1, "Device Id": 0,
              "Device Type": 1, "Ev Idx": 9}},
    {"ph": "X", "cat": "Trace", "ts": 900, "dur": 1200, "pid": "Spans", "tid": "PyTorch Profiler",
     "name": "PyTorch Profiler (0)", "args": {"Op count": 0}},
    {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces", "tid": "Trace PyTorch Profiler",
     "ts": 900}
  ],
  "deviceProperties": [
    {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936, "computeMajor": 9, "computeMinor": 0,
     "maxThreadsPerBlock": 1024, "numSms": 132, "sharedMemPerBlockOptin": 232448}
  ],
  "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8, "nccl_version": "2.18.1"},
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": 1700000000000000000
}
)json";
}

std::string kineto_2021_fixture() {
    return R"json(
{
  "schemaVersion": 1,
  "deviceProperties": [
    {"id": 0, "name": "Tesla V100-DGXS-32GB", "totalGlobalMem": 34084028416, "computeMajor": 7, "computeMinor": 0,
     "numSms": 80}
  ],
  "traceEvents": [
    {"ph": "X", "cat": "Operator", "name": "aten::conv2d", "pid": 200, "tid": "200", "ts": 5200, "dur": 200,
     "args": {"Device": 200, "External id": 3, "Trace name": "PyTorch Profiler", "Trace iteration": 0}},
    {"ph": "X", "cat": "Operator", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "pid": 200,
     "tid": "200", "ts": 5001, "dur": 99, "args": {"Device": 200, "External id": 2}},
    {"ph": "X", "cat": "Operator", "name": "ProfilerStep#5", "pid": 200, "tid": "200", "ts": 5000, "dur": 1000,
     "args": {"Device": 200, "External id": 1}},
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 200, "tid": 200, "ts": 5210,
     "args": {"Device Type": 0, "Device Id": -1, "Bytes": 4}},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 200, "tid": "200", "ts": 5250, "dur": 10,
     "args": {"cbid": 211, "correlation": 21, "external id": 3, "external ts": 5200}},
    {"ph": "s", "id": 21, "pid": 200, "tid": 200, "ts": 5250, "cat": "async", "name": "launch"},
    {"ph": "X", "cat": "Kernel", "name": "implicit_convolve_sgemm", "pid": 0, "tid": "stream 7", "ts": 5300, "dur": 50,
     "args": {"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": 21, "external id": 3,
              "registers per thread": 128, "shared memory": 8192, "grid": [8, 8, 1], "block": [256, 1, 1]}},
    {"ph": "f", "id": 21, "pid": 0, "tid": "stream 7", "ts": 5300, "cat": "async", "name": "launch", "bp": "e"},
    {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 200, "tid": "200", "ts": 5490, "dur": 20,
     "args": {"cbid": 41, "correlation": 22, "external id": 4}},
    {"ph": "X", "cat": "Memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": "stream 7", "ts": 5500,
     "dur": 4, "args": {"device": 0, "context": 1, "stream": 7, "correlation": 22, "external id": 4, "bytes": 4096}},
    {"name": "process_name", "ph": "M", "ts": 4900, "pid": 200, "tid": 0, "args": {"name": "python"}},
    {"name": "thread_name", "ph": "M", "ts": 4900, "pid": 200, "tid": "200", "args": {"name": "thread 200 (python)"}},
    {"ph": "X", "cat": "Trace", "ts": 4900, "dur": 1200, "pid": "Traces", "tid": "PyTorch Profiler",
     "name": "PyTorch Profiler (0)", "args": {"Op count": 0}}
  ]
}
)json";
}

// ---------------------------------------------------------------------------
// Chrome
// ---------------------------------------------------------------------------

std::string chrome_generic_fixture() {
    return R"([
      {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "renderer"}},
      {"ph": "M", "name": "thread_name", "pid": 7, "tid": 70, "args": {"name": "worker"}},
      {"ph": "B", "name": "outer", "cat": "app", "pid": 7, "tid": 70, "ts": 10},
      {"ph": "B", "name": "inner", "cat": "app", "pid": 7, "tid": 70, "ts": 12.5, "args": {"payload": 3}},
      {"ph": "E", "pid": 7, "tid": 70, "ts": 14},
      {"ph": "X", "name": "sibling", "cat": "app", "pid": 7, "tid": 70, "ts": 15, "dur": 2},
      {"ph": "E", "pid": 7, "tid": 70, "ts": 20},
      {"ph": "b", "name": "request", "cat": "net", "id": "0x1f", "pid": 7, "tid": 70, "ts": 11},
      {"ph": "e", "name": "request", "cat": "net", "id": "0x1f", "pid": 7, "tid": 71, "ts": 30},
      {"ph": "i", "name": "click", "pid": 7, "tid": 70, "ts": 16, "s": "t"},
      {"ph": "C", "name": "heap", "pid": 7, "tid": 70, "ts": 18, "args": {"used": 10, "free": 2.5}},
      {"ph": "s", "name": "f", "cat": "x", "id": 1, "pid": 7, "tid": 70, "ts": 10},
      {"ph": "O", "name": "snapshot", "pid": 7, "tid": 70, "ts": 19, "id": 2},
      {"ph": "B", "name": "never ends", "pid": 7, "tid": 72, "ts": 40},
    )";
}

// ---------------------------------------------------------------------------
// Nsight Systems
// ---------------------------------------------------------------------------

std::int64_t nsys_global_tid(std::int64_t pid, std::int64_t tid) {
    // nsys packs a hardware/VM id in the top bits; the importer must ignore them.
    return (std::int64_t{0x12} << 48) | (pid << 24) | tid;
}

void write_nsys_fixture(const std::string& path, const NsysFixtureOptions& options) {
    std::remove(path.c_str());
    const bool v3 = options.schema_major >= 3;
    const std::int64_t main_thread = nsys_global_tid(4242, 4242);
    const std::int64_t global_pid = nsys_global_tid(4242, 0);
    // The 2.x numbers, or (3.x) other numbers named by the ENUM_* tables.
    const int htod = v3 ? 21 : 1;
    const int pageable = v3 ? 10 : 0, device = v3 ? 12 : 2;
    std::string version =
        options.schema_version_text.empty() ? fmt::format("{}.7.0", options.schema_major) : options.schema_version_text;
    std::string extra = v3 ? ", laneId INTEGER, newThing TEXT" : "";
    std::string sql = "BEGIN;";
    sql += "CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);";
    sql +=
        "INSERT INTO StringIds VALUES (0,'[Unknown]'),(1,'cudaMalloc_v3020'),(2,'cudaLaunchKernel_v7000'),"
        "(3,'cudaMemcpy_v3020'),(4,'cudaMemset_v3020'),(5,'saxpy(float*, float*)'),(6,'saxpy'),"
        "(7,'_Z5saxpyPfS_'),(8,'MPI_Send'),(9,'main'),(10,'cudaDeviceSynchronize_v3020'),"
        "(11,'compute'),(12,'/app/saxpy'),(13,'pthread_mutex_lock'),(14,'/usr/lib/libc.so.6'),(15,'poll');";
    if (options.with_metadata_table) {
        sql += fmt::format("CREATE TABLE {} (name TEXT NOT NULL, value TEXT);", options.metadata_table);
        sql += fmt::format(
            "INSERT INTO {} VALUES ('EXPORT_PRODUCT_NAME','NVIDIA Nsight Systems'),"
            "('EXPORT_SCHEMA_VERSION','{}'),('EXPORT_SCHEMA_VERSION_MAJOR','{}');",
            options.metadata_table, version, std::atoi(version.c_str()));
    }
    if (options.with_cpu_side) {
        sql +=
            "CREATE TABLE COMPOSITE_EVENTS (id INTEGER NOT NULL PRIMARY KEY, start INTEGER NOT NULL, cpu INTEGER, "
            "threadState INTEGER, globalTid INTEGER, cpuCycles INTEGER NOT NULL);";
        sql += fmt::format(
            "INSERT INTO COMPOSITE_EVENTS VALUES (1, 2100, 3, 1, {0}, 1), (2, 2200, 3, 1, {0}, 1), "
            "(3, 2300, 3, 1, {0}, 1), (4, 2400, 3, 1, {0}, 1);",
            main_thread);
        sql +=
            "CREATE TABLE SAMPLING_CALLCHAINS (id INTEGER NOT NULL, symbol INTEGER NOT NULL, module INTEGER NOT "
            "NULL, kernelMode INTEGER, thumbCode INTEGER, unresolved INTEGER, specialEntry INTEGER, originalIP "
            "INTEGER, unwindMethod INTEGER, stackDepth INTEGER NOT NULL, PRIMARY KEY (id, stackDepth));";
        sql +=
            "INSERT INTO SAMPLING_CALLCHAINS (id, symbol, module, originalIP, stackDepth) VALUES "
            "(1, 9, 12, 4096, 1), (1, 11, 12, 8192, 0), (2, 11, 12, 8200, 0), (2, 9, 12, 4100, 1), "
            "(3, 13, 14, 65536, 0), (3, 9, 12, 4104, 1), (9, 9, 12, 4096, 0);";
        sql +=
            "CREATE TABLE OSRT_API (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, "
            "globalTid INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, nestingLevel INTEGER, "
            "callchainId INTEGER NOT NULL);";
        sql += fmt::format(
            "INSERT INTO OSRT_API VALUES (2300, 2350, 27, {0}, 13, 0, 0, 0), "
            "(2600, 2900, 27, {0}, 15, 1, 0, 0);",
            main_thread);
        sql +=
            "CREATE TABLE SCHED_EVENTS (start INTEGER NOT NULL, cpu INTEGER NOT NULL, isSchedIn INTEGER NOT NULL, "
            "globalTid INTEGER);";
        sql += fmt::format(
            "INSERT INTO SCHED_EVENTS VALUES (5, 3, 1, {0}), (2050, 3, 0, {0}), (2060, 3, 1, {0}), "
            "(2950, 3, 0, {0}), (2960, 3, 1, {0});",
            main_thread);
        // CUDA memory: 4 MiB and 1 MiB of device memory allocated, the 4 MiB freed, and
        // 1 MiB of pageable host memory (operation names through the enum table, as
        // nsys writes them).
        sql += "CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER PRIMARY KEY, name TEXT, label TEXT);";
        sql +=
            "INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES (0, 'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION', "
            "'Allocation'), (1, 'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION', 'Deallocation');";
        sql +=
            "CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER NOT NULL, "
            "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, address INTEGER NOT NULL, pc INTEGER NOT NULL, "
            "bytes INTEGER NOT NULL, memKind INTEGER NOT NULL, memoryOperationType INTEGER NOT NULL, name TEXT, "
            "correlationId INTEGER);";
        sql += fmt::format(
            "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (1000, {0}, 0, 1, 4096, 0, 4194304, {1}, 0, "
            "NULL, 1), (1100, {0}, 0, 1, 8192, 0, 1048576, {1}, 0, NULL, 2), (2500, {0}, 0, 1, 4096, 0, "
            "4194304, {1}, 1, NULL, 3), (2600, {0}, 0, 1, 65536, 0, 1048576, {2}, 0, NULL, 4);",
            global_pid, device, pageable);
        sql +=
            "CREATE TABLE OSRT_CALLCHAINS (id INTEGER NOT NULL, symbol INTEGER NOT NULL, module INTEGER NOT NULL, "
            "kernelMode INTEGER, thumbCode INTEGER, unresolved INTEGER, specialEntry INTEGER, originalIP INTEGER, "
            "unwindMethod INTEGER, stackDepth INTEGER NOT NULL, PRIMARY KEY (id, stackDepth));";
        sql += "INSERT INTO OSRT_CALLCHAINS (id, symbol, module, stackDepth) VALUES (1, 13, 14, 0), (1, 9, 12, 1);";
    }
    sql += "CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);";
    sql += "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1600000000000000000, '2020-09-13T12:26:40', '');";
    sql +=
        "CREATE TABLE ANALYSIS_DETAILS (globalVid INTEGER NOT NULL, duration INTEGER NOT NULL, startTime INTEGER "
        "NOT NULL, stopTime INTEGER NOT NULL);";
    sql += "INSERT INTO ANALYSIS_DETAILS VALUES (1, 4990, 10, 5000);";
    sql += "CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);";
    sql += fmt::format("INSERT INTO PROCESSES VALUES ({}, 4242, './saxpy'), (1, 1, 'systemd');", global_pid);
    sql += "CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);";
    sql += fmt::format("INSERT INTO ThreadNames VALUES (9, 0, {});", main_thread);
    if (options.with_cuda) {
        sql +=
            "CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, uuid TEXT, "
            "totalMemory INTEGER, memoryBandwidth INTEGER, smCount INTEGER, computeMajor INTEGER, computeMinor "
            "INTEGER" +
            extra + ");";
        sql += std::string(
            "INSERT INTO TARGET_INFO_GPU (vmId, id, name, uuid, totalMemory, memoryBandwidth, smCount, "
            "computeMajor, computeMinor) VALUES (1, 0, 'NVIDIA A100-SXM4-40GB', "
            "'d9a9a4ed-e78c-4eb8-5db5-817c57801cb5', 42331013120, 1555200000000, 108, 8, 0);");
        sql +=
            "CREATE TABLE TARGET_INFO_CUDA_NULL_STREAM (streamId INTEGER NOT NULL, hwId INTEGER NOT NULL, vmId INTEGER "
            "NOT NULL, processId INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL);";
        sql += "INSERT INTO TARGET_INFO_CUDA_NULL_STREAM VALUES (7, 0, 1, 4242, 0, 1);";
        sql +=
            "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass "
            "INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER "
            "NOT NULL, callchainId INTEGER" +
            extra + ");";
        sql += fmt::format(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, "
            "returnValue) VALUES (100, 200, 0, {0}, 1, 1, 0), (300, 310, 0, {0}, 2, 2, 0), "
            "(1500, 1600, 0, {0}, 3, 3, 0), (1700, 1710, 0, {0}, 4, 4, 0), (1800, 1900, 0, {0}, 5, 10, 0);",
            main_thread);
        sql +=
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER "
            "NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
            "demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, registersPerThread "
            "INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER "
            "NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, "
            "dynamicSharedMemory INTEGER NOT NULL" +
            extra + ");";
        sql += fmt::format(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, "
            "globalPid, demangledName, shortName, mangledName, registersPerThread, gridX, gridY, gridZ, "
            "blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory) VALUES (400, 1400, 0, 1, 7, "
            "2, {}, 5, 6, 7, 26, 2, 1, 1, 512, 1, 1, 16, 32);",
            global_pid);
        sql +=
            "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER "
            "NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
            "bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, "
            "dstDeviceId INTEGER" +
            extra + ");";
        sql += fmt::format(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, "
            "globalPid, bytes, copyKind, srcKind, dstKind) VALUES (1510, 1590, 0, 1, 7, 3, {}, 4096, {}, {}, "
            "{});",
            global_pid, htod, pageable, device);
        sql +=
            "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER "
            "NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
            "value INTEGER NOT NULL, bytes INTEGER NOT NULL, memKind INTEGER" +
            extra + ");";
        sql += fmt::format(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, "
            "correlationId, globalPid, value, bytes, memKind) VALUES (1702, 1708, 0, 1, 7, 4, {}, 0, 256, "
            "{});",
            global_pid, device);
        sql +=
            "CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId "
            "INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid "
            "INTEGER, syncType INTEGER NOT NULL, eventId INTEGER NOT NULL" +
            extra + ");";
        sql += fmt::format(
            "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start, end, deviceId, contextId, streamId, "
            "correlationId, globalPid, syncType, eventId) VALUES (1800, 1900, 0, 1, 4294967295, 5, {}, 4, "
            "0);",
            global_pid);
    }
    sql +=
        "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId "
        "INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId "
        "INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, "
        "int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT" +
        extra + ");";
    sql += fmt::format(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, category, color, text, globalTid, textId, domainId, "
        "int64Value) VALUES "
        "(20, NULL, 75, NULL, NULL, 'MPI', {0}, NULL, 1, NULL),"
        "(21, NULL, 39, NULL, NULL, 'MPI Rank 0', {0}, NULL, 0, NULL),"
        "(22, NULL, 33, 3, NULL, 'communication', {0}, NULL, 1, NULL),"
        "(250, 900, 59, 3, NULL, NULL, {0}, 8, 1, 7),"
        "(260, 270, 59, NULL, 4278190335, 'inner', {0}, NULL, 0, NULL),"
        "(50, 2000, 60, NULL, NULL, 'phase', {0}, NULL, 0, NULL),"
        "(1950, NULL, 34, NULL, NULL, 'checkpoint', {0}, NULL, 0, NULL);",
        main_thread);
    if (v3) {
        sql += "CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER PRIMARY KEY, name TEXT, label TEXT);";
        sql +=
            "INSERT INTO ENUM_CUDA_MEM_KIND VALUES (10,'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE','Pageable'),"
            "(11,'CUDA_MEMOPR_MEMORY_KIND_PINNED','Pinned'),(12,'CUDA_MEMOPR_MEMORY_KIND_DEVICE','Device'),"
            "(13,'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN','Unknown');";
        sql += "CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER PRIMARY KEY, name TEXT, label TEXT);";
        sql +=
            "INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (20,'CUDA_MEMCPY_OPER_UNKNOWN','Unknown'),"
            "(21,'CUDA_MEMCPY_OPER_HTOD','Host-to-Device'),(22,'CUDA_MEMCPY_OPER_DTOH','Device-to-Host');";
        sql += "CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER PRIMARY KEY, name TEXT, label TEXT);";
        sql += "CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER, end INTEGER);";
        sql += "INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE VALUES (1, 2), (3, 4);";
    }
    sql += "COMMIT;";
    exec_sql(path, sql);
}

// --- nvprof ----------------------------------------------------------------------------

namespace {

// CUPTI callback ids (cupti_runtime_cbid.h / cupti_driver_cbid.h).
constexpr int kCudaLaunchKernel = 211;
constexpr int kCudaMemcpy = 31;
constexpr int kCudaDeviceSynchronize = 165;
constexpr int kCuLaunchKernel = 307;

constexpr std::int64_t kHost = kNvprofHostNs;
constexpr std::int64_t kGpu0Ahead = 5'000'000'000;   // GPU 0 stamps 5 s ahead
constexpr std::int64_t kGpu1Behind = 2'000'000'000;  // GPU 1 stamps 2 s behind

}  // namespace

void write_nvprof_fixture(const std::string& path) {
    const std::string thread_blob = "X'A086010078563412'";  // process 100000, thread 0x12345678
    std::string sql = R"sql(
CREATE TABLE StringTable (_id_ INTEGER PRIMARY KEY, value TEXT);
CREATE TABLE Version (version INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_CONTEXT (_id_ INTEGER PRIMARY KEY, contextId INT, deviceId INT, computeApiKind INT, nullStreamId INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_DEVICE (_id_ INTEGER PRIMARY KEY, globalMemoryBandwidth INT, globalMemorySize INT,
  numMultiprocessors INT, computeCapabilityMajor INT, computeCapabilityMinor INT, id INT, name INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_STREAM (_id_ INTEGER PRIMARY KEY, contextId INT, streamId INT, priority INT, flag INT, correlationId INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (_id_ INTEGER PRIMARY KEY, cbid INT, start INT, end INT, processId INT, threadId INT, correlationId INT, returnValue INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_DRIVER (_id_ INTEGER PRIMARY KEY, cbid INT, start INT, end INT, processId INT, threadId INT, correlationId INT, returnValue INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (_id_ INTEGER PRIMARY KEY, registersPerThread INT, start INT, end INT,
  deviceId INT, contextId INT, streamId INT, gridX INT, gridY INT, gridZ INT, blockX INT, blockY INT, blockZ INT,
  staticSharedMemory INT, dynamicSharedMemory INT, correlationId INT, name INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (_id_ INTEGER PRIMARY KEY, copyKind INT, srcKind INT, dstKind INT, flags INT,
  bytes INT, start INT, end INT, deviceId INT, contextId INT, streamId INT, correlationId INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (_id_ INTEGER PRIMARY KEY, value INT, bytes INT, start INT, end INT, deviceId INT,
  contextId INT, streamId INT, correlationId INT, memoryKind INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (_id_ INTEGER PRIMARY KEY, type INT, start INT, end INT, correlationId INT,
  contextId INT, streamId INT, cudaEventId INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_MARKER (_id_ INTEGER PRIMARY KEY, flags INT, timestamp INT, id INT, objectKind INT, objectId BLOB, name INT, domain INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_MARKER_DATA (_id_ INTEGER PRIMARY KEY, flags INT, id INT, payloadKind INT, payload BLOB, color INT, category INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_NAME (_id_ INTEGER PRIMARY KEY, objectKind INT, objectId BLOB, name INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_OVERHEAD (_id_ INTEGER PRIMARY KEY, overheadKind INT, objectKind INT, objectId BLOB, start INT, end INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_METRIC (_id_ INTEGER PRIMARY KEY, value INT);
INSERT INTO Version VALUES (22);
INSERT INTO StringTable VALUES (0, '-- null --'), (1, 'train.py'), (2, 'Tesla V100-SXM2-16GB'),
  (3, '_Z7stencilPfS_i'), (4, '_ZN4cuda6kernelIfEEvPT_'), (5, 'forward'), (6, 'layer1'), (7, 'checkpoint'),
  (8, 'mydomain'), (9, 'main thread');
INSERT INTO CUPTI_ACTIVITY_KIND_CONTEXT VALUES (1, 1, 0, 1, 7), (2, 2, 1, 1, 13);
INSERT INTO CUPTI_ACTIVITY_KIND_DEVICE VALUES (1, 898048000, 16945512448, 80, 7, 0, 0, 2), (2, 898048000, 16945512448, 80, 7, 0, 1, 2);
INSERT INTO CUPTI_ACTIVITY_KIND_STREAM VALUES (1, 1, 7, 0, 0, 0), (2, 1, 14, -2, 0, 0), (3, 2, 13, 0, 0, 0);
INSERT INTO CUPTI_ACTIVITY_KIND_METRIC VALUES (1, 5), (2, 6);
)sql";
    auto host = [](std::int64_t us) { return std::to_string(kHost + us * 1000); };
    auto gpu0 = [](std::int64_t us) { return std::to_string(kHost + us * 1000 + kGpu0Ahead); };
    auto gpu1 = [](std::int64_t us) { return std::to_string(kHost + us * 1000 - kGpu1Behind); };
    // Launches at 100, 200 µs (GPU 0) and 300 µs (GPU 1, driver); a copy at 400 µs; a
    // device sync at 500 µs; a bad call (ends before it starts) at 600 µs.
    sql += fmt::format("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (1, {}, {}, {}, 100000, 305419896, 1, 0);\n",
                       kCudaLaunchKernel, host(100), host(105));
    sql += fmt::format("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (2, {}, {}, {}, 100000, 305419896, 2, 0);\n",
                       kCudaLaunchKernel, host(200), host(204));
    sql += fmt::format("INSERT INTO CUPTI_ACTIVITY_KIND_DRIVER VALUES (1, {}, {}, {}, 100000, 305419896, 3, 0);\n",
                       kCuLaunchKernel, host(300), host(302));
    sql += fmt::format("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (3, {}, {}, {}, 100000, 305419896, 4, 0);\n",
                       kCudaMemcpy, host(400), host(450));
    sql += fmt::format("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (4, {}, {}, {}, 100000, 305419896, 5, 0);\n",
                       kCudaDeviceSynchronize, host(500), host(520));
    sql += fmt::format("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (5, 99999, {}, {}, 100000, 305419896, 6, 0);\n",
                       host(600), host(590));
    // Kernels: GPU 0 at 110 (10 µs after its launch) and 230; GPU 1 at 303.
    sql += fmt::format(
        "INSERT INTO CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL VALUES (1, 32, {}, {}, 0, 1, 7, 4, 1, 1, 256, 1, 1, 1024, 0, 1, 3);\n",
        gpu0(110), gpu0(150));
    sql += fmt::format(
        "INSERT INTO CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL VALUES (2, 32, {}, {}, 0, 1, 14, 4, 1, 1, 256, 1, 1, 0, 512, 2, 4);\n",
        gpu0(230), gpu0(260));
    sql += fmt::format(
        "INSERT INTO CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL VALUES (3, 16, {}, {}, 1, 2, 13, 1, 1, 1, 32, 1, 1, 0, 0, 3, 3);\n",
        gpu1(303), gpu1(340));
    // A pageable HtoD copy on GPU 0 at 405.
    sql += fmt::format("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (1, 1, 1, 3, 0, 4096, {}, {}, 0, 1, 7, 4);\n",
                       gpu0(405), gpu0(440));
    // A memset with no launching call on GPU 1 (its clock still moves with GPU 1's).
    sql += fmt::format("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (1, 0, 256, {}, {}, 1, 2, 13, 0, 3);\n",
                       gpu1(350), gpu1(351));
    // The device sync: context-wide (stream all ones), on the host's clock.
    sql += fmt::format(
        "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (1, 4, {}, {}, 5, 1, 4294967295, 4294967295);\n",
        host(501), host(519));
    // NVTX: push "forward" (domain "mydomain") at 50, push "layer1" at 60, pop at 90,
    // pop at 560; a mark "checkpoint" at 70 with an int64 payload 42 and a colour.
    auto marker = [&](int row, int flags, std::int64_t us, int id, int name, int domain) {
        sql += fmt::format("INSERT INTO CUPTI_ACTIVITY_KIND_MARKER VALUES ({}, {}, {}, {}, 2, {}, {}, {});\n", row,
                           flags, host(us), id, thread_blob, name, domain);
    };
    marker(1, 2, 50, 1, 5, 8);
    marker(2, 2, 60, 2, 6, 8);
    marker(3, 1, 70, 3, 7, 0);
    marker(4, 4, 90, 2, 0, 8);
    marker(5, 4, 560, 1, 0, 8);
    sql += "INSERT INTO CUPTI_ACTIVITY_KIND_MARKER_DATA VALUES (1, 1, 3, 4, X'2A00000000000000', 4278190335, 7);\n";
    sql += fmt::format("INSERT INTO CUPTI_ACTIVITY_KIND_NAME VALUES (1, 1, {}, 1), (2, 2, {}, 9);\n", thread_blob,
                       thread_blob);
    sql += fmt::format("INSERT INTO CUPTI_ACTIVITY_KIND_OVERHEAD VALUES (1, 65536, 2, {}, {}, {});\n", thread_blob,
                       host(700), host(710));
    exec_sql(path, sql);
}

}  // namespace ember::import_test
