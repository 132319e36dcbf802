// import_fixtures.h: small inputs for the importer tests and the fuzz driver, each
// written here with every number known: a Kineto trace in the current and in the
// 2021 category names, an Nsight Systems export (schema 2.x, or 3.x with ENUM_*
// tables and extra columns), and helpers for files, gzip and SQL.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/gunzip.h"
#include "tests/support/read_file.h"
#include "tests/support/temp_dir.h"

namespace ember::import_test {

// A fresh folder removed (with everything in it) at destruction.
using test_support::TempDir;
// The text of a file that may be gzipped.
using test_support::gunzip_file;
// The bytes of a file.
using test_support::read_file;

void write_file(const std::string& path, std::string_view bytes);
std::string gzip_bytes(std::string_view bytes);
// Runs SQL on an SQLite file (creating it); throws std::runtime_error with the message.
void exec_sql(const std::string& path, const std::string& sql);
// One value of run_metadata as text ("" when absent).
std::string run_metadata(const std::string& trace, const std::string& key);
std::int64_t count_rows(const std::string& trace, const std::string& sql);

// ../shared/real-traces, or "" when that folder is absent.
std::string real_traces_dir();

// --- Kineto ----------------------------------------------------------------------------
// Current categories; distributedInfo (rank 3 of 8), deviceProperties and
// baseTimeNanoseconds (1700000000000000000) come after traceEvents. Holds, on host
// pid 100 / tid 100: ProfilerStep#7 [1000, 2000) µs containing
// enumerate(DataLoader)...__next__ [1000.5, 1100.25) and python_function
// "model.py(10): forward" [1150, 1500) which contains cpu_op aten::mm [1200, 1300)
// and user_annotation nccl:all_reduce [1390, 1395); cudaLaunchKernel (corr 11) ->
// kernel sgemm_128x64 on device 0 stream 7 [1300.125, 1400.5); cuLaunchKernel (12)
// -> an NCCL kernel on stream 21 [1400, 1600); cudaMemcpyAsync (13) -> Memcpy HtoD
// (Pinned -> Device) 1048576 bytes [1500, 1510); cudaMemsetAsync (14) -> Memset
// (Device) 256 bytes [1520, 1521); an unlinked kernel (corr 99) [1700, 1701); a
// [memory] sample; a gpu_user_annotation; ac2g flows; the profiler span [900, 2100).
std::string kineto_fixture();
// The 2021 names (Operator, Runtime, Kernel, Memcpy, Memset), string tids ("100",
// "stream 7"), deviceProperties first, no baseTimeNanoseconds: ProfilerStep#5
// [5000, 6000) µs containing enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__
// [5001, 5100) and aten::conv2d [5200, 5400); cudaLaunchKernel (21) -> kernel
// "implicit_convolve_sgemm" [5300, 5350) on stream 7; cudaMemcpyAsync (22) -> Memcpy
// DtoH (Device -> Pageable) 4096 bytes [5500, 5504); a [memory] event without totals.
std::string kineto_2021_fixture();

// --- Chrome -----------------------------------------------------------------------------
// A generic Trace Event file in the JSON Array Format (no closing bracket): process and
// thread names, "B"/"E" outer [10, 20) µs holding inner [12.5, 14) (payload 3) and an
// "X" sibling [15, 17), an async "b"/"e" request [11, 30) with a string id, an instant,
// a counter with two series (used, free), a flow start, an object snapshot ("O"), and
// a "B" that never ends.
std::string chrome_generic_fixture();

// --- Nsight Systems -----------------------------------------------------------------
struct NsysFixtureOptions {
    int schema_major = 2;             // 2: the 2.7 layout; 3: ENUM_* tables, extra columns, other enum numbers
    std::string schema_version_text;  // EXPORT_SCHEMA_VERSION ("" -> "<major>.7.0")
    bool with_metadata_table = true;
    std::string metadata_table = "EXPORT_META_DATA";  // META_DATA_EXPORT from nsys 2023.3 on
    bool with_cuda = true;                            // false: no CUPTI_ACTIVITY_KIND_* tables, no TARGET_INFO_GPU
    bool with_cpu_side = false;                       // CPU samples and OS runtime calls (below)
};
// pid 4242, main thread tid 4242 ("main"): cudaMalloc_v3020 [100, 200), cudaLaunchKernel_v7000
// [300, 310) corr 2 -> kernel "saxpy(float*, float*)" (short "saxpy") on device 0
// stream 7 [400, 1400) grid 2x1x1 block 512x1x1, 26 registers, 16 static + 32
// dynamic shared bytes; cudaMemcpy_v3020 [1500, 1600) corr 3 -> HtoD pageable ->
// device 4096 bytes [1510, 1590); cudaMemset_v3020 [1700, 1710) corr 4 -> memset 256
// bytes [1702, 1708); a context synchronize [1800, 1900) corr 5; NVTX: domain "MPI"
// (id 1) push/pop "MPI_Send" [250, 900) (payload int 7) containing default-domain
// "inner" [260, 270); start/end "phase" [50, 2000); mark "checkpoint" at 1950; the
// thread named "MPI Rank 0". Session start utcEpochNs 1600000000000000000, analysis
// window [10, 5000). GPU 0 "NVIDIA A100-SXM4-40GB", 108 SMs, cc 8.0.
// With the CPU side: COMPOSITE_EVENTS samples 1 and 2 at 2100 and 2200 in main ->
// compute (SAMPLING_CALLCHAINS, stackDepth 0 the innermost; /app/saxpy), sample 3 at
// 2300 in main -> pthread_mutex_lock (libc.so.6), sample 4 at 2400 with no call chain,
// a chain row of no sample (id 9); OSRT_API pthread_mutex_lock [2300, 2350) returning
// 0 and poll [2600, 2900) returning 1 on the main thread; 5 SCHED_EVENTS rows.
void write_nsys_fixture(const std::string& path, const NsysFixtureOptions& options = {});
std::int64_t nsys_global_tid(std::int64_t pid, std::int64_t tid);

// --- nvprof --------------------------------------------------------------------------------
// A two-GPU nvprof database (Version 22), the host clock Unix ns from kNvprofHostNs:
// process 100000 ("train.py"), thread 0x12345678 ("main thread"); GPU 0 stamps 5 s
// ahead of the host, GPU 1 2 s behind. Calls (µs after kNvprofHostNs): cudaLaunchKernel
// [100, 105) corr 1 -> "_Z7stencilPfS_i" on GPU 0 stream 7 (the default stream) at 110
// (GPU clock) for 40 µs, grid 4 block 256, 32 registers, 1024 static shared bytes;
// cudaLaunchKernel [200, 204) corr 2 -> "_ZN4cuda6kernelIfEEvPT_" on stream 14
// (priority -2) at 230 for 30 µs; cuLaunchKernel [300, 302) corr 3 -> the stencil on GPU 1
// stream 13 at 303 for 37 µs; cudaMemcpy [400, 450) corr 4 -> a pageable HtoD copy of
// 4096 bytes on GPU 0 at 405 for 35 µs; a 256-byte memset on GPU 1 at 350 with no call;
// cudaDeviceSynchronize [500, 520) corr 5 and its context-wide synchronization [501,
// 519); a call of an unknown callback id that ends before it starts (row 5); NVTX in
// domain "mydomain": "forward" [50, 560) holding "layer1" [60, 90), a default-domain mark
// "checkpoint" at 70 (int64 payload 42, colour 0xFF0000FF, category 7); a CUPTI buffer
// flush [700, 710); two CUPTI_ACTIVITY_KIND_METRIC rows.
inline constexpr std::int64_t kNvprofHostNs = 1'700'000'000'000'000'000;
void write_nvprof_fixture(const std::string& path);

}  // namespace ember::import_test
