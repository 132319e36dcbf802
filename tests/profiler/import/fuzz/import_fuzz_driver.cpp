// import_fuzz_driver.cpp: a deterministic fuzzer for the importers that needs no
// clang: from seed inputs (the test fixtures, ember's own Chrome export, and slices
// of the real traces when ../shared/real-traces is there) it makes N cases per
// format — bit flips, byte inserts and deletes, splices of other inputs' bytes,
// duplicated ranges, numbers and tokens swapped for edge values, truncation at
// structural boundaries, gzip damaged before or after compression, and (Nsight
// Systems) SQL that nulls, retypes, deletes or drops what the importer reads — and
// runs each through the fuzz entry points (import_fuzz_targets.h). Case i of seed S is
// always the same bytes (--only-case i replays it). A finding aborts the process; the
// input that caused it stays at /dev/shm/ember-import-fuzz-<pid>/input (or under the
// temporary folder where there is no /dev/shm).
//
//   ember_import_fuzz [--format kineto|chrome|nsys|nvprof|memory_snapshot|all] [--cases N] [--seed S]
//                     [--real-traces DIR] [--only-case I] [--quiet] [--show-other]
#include "profiler/export/chrome_trace.h"
#include "profiler/store/reader.h"
#include "profiler/synth/synthetic_trace.h"
#include "tests/profiler/import/fuzz/import_fuzz_targets.h"
#include "tests/profiler/import/import_fixtures.h"
#include "tests/support/gunzip.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace ember;
namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// Randomness that is the same everywhere (no std distributions)
// ---------------------------------------------------------------------------

struct Rng {
    std::uint64_t state;
    std::uint64_t next() {
        std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }
    bool chance(int percent) { return below(100) < static_cast<std::size_t>(percent); }
};

// ---------------------------------------------------------------------------
// Seeds
// ---------------------------------------------------------------------------

bool is_gzip(const std::string& bytes) {
    return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
           static_cast<unsigned char>(bytes[1]) == 0x8b;
}

// A valid small Kineto file from a real one: its top-level keys (but the huge ones)
// and its first `count` events.
std::string real_kineto_slice(const std::string& path, std::size_t count) {
    nlohmann::json document = nlohmann::json::parse(import_test::gunzip_file(path));
    nlohmann::json slice = nlohmann::json::object();
    for (auto& [key, value] : document.items()) {
        if (key == "traceEvents" || key == "metadata" || key == "INFO") continue;
        slice[key] = value;
    }
    slice["traceEvents"] = nlohmann::json::array();
    auto& events = document["traceEvents"];
    for (std::size_t i = 0; i < events.size() && i < count; ++i) slice["traceEvents"].push_back(events[i]);
    return slice.dump();
}

std::string ember_chrome_export(const fs::path& folder, std::int64_t events) {
    std::string db = (folder / "seed.db").string(), json = (folder / "seed.json").string();
    synth::SyntheticTraceOptions options;
    options.events = events;
    options.seed = 5;
    synth::write_synthetic_traces(db, options);
    {
        store::TraceReader reader(db);
        exporting::OutputFile out(json);
        exporting::export_chrome_trace(reader, out);
        out.close();
    }
    std::string bytes = import_test::read_file(json);
    fs::remove(db);
    fs::remove(json);
    return bytes;
}

struct Corpus {
    std::vector<std::string> kineto, chrome, nsys, nvprof, pickle;
    std::vector<std::string> all_text;  // splice sources across formats
};

Corpus build_corpus(const fs::path& folder, const std::string& real_traces) {
    Corpus corpus;
    corpus.kineto = {import_test::kineto_fixture(), import_test::kineto_2021_fixture(),
                     import_test::gzip_bytes(import_test::kineto_fixture())};
    corpus.chrome = {import_test::chrome_generic_fixture(), ember_chrome_export(folder, 400)};
    for (int major : {2, 3}) {
        std::string path = (folder / fmt::format("nsys{}.sqlite", major)).string();
        import_test::NsysFixtureOptions options;
        options.schema_major = major;
        import_test::write_nsys_fixture(path, options);
        corpus.nsys.push_back(import_test::read_file(path));
        fs::remove(path);
    }
    {  // nsys 2023.3 on: META_DATA_EXPORT, and the CPU side (samples with call chains, OS runtime calls)
        std::string path = (folder / "nsys-cpu.sqlite").string();
        import_test::NsysFixtureOptions options;
        options.schema_major = 3;
        options.metadata_table = "META_DATA_EXPORT";
        options.schema_version_text = "3.20.2";
        options.with_cpu_side = true;
        import_test::write_nsys_fixture(path, options);
        corpus.nsys.push_back(import_test::read_file(path));
        fs::remove(path);
    }
    {  // nvprof: the two-GPU fixture
        std::string path = (folder / "nvprof.nvvp").string();
        import_test::write_nvprof_fixture(path);
        corpus.nvprof.push_back(import_test::read_file(path));
        fs::remove(path);
    }
    // A small memory snapshot of PyTorch 2.5's shape (written by Python's pickle, protocol 4:
    // memo, shared frames): one segment of two blocks, two devices' traces (alloc, free,
    // an OOM, a segment_map), one annotation.
    corpus.pickle.push_back(std::string(
        "\x80\x04\x95\xb2\x02\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x08\x73\x65\x67\x6d\x65\x6e\x74\x73\x94\x5d\x94\x7d\x94\x28\x8c\x06\x64\x65\x76\x69\x63\x65\x94\x4b"
        "\x00\x8c\x07\x61\x64\x64\x72\x65\x73\x73\x94\x8a\x06\x00\x00\x00\x00\x00\x7f\x8c\x0a\x74\x6f\x74\x61\x6c\x5f\x73\x69\x7a\x65\x94\x4a\x00\x00\x20\x00\x8c\x06\x73"
        "\x74\x72\x65\x61\x6d\x94\x4b\x00\x8c\x0c\x73\x65\x67\x6d\x65\x6e\x74\x5f\x74\x79\x70\x65\x94\x8c\x05\x6c\x61\x72\x67\x65\x94\x8c\x0d\x69\x73\x5f\x65\x78\x70\x61"
        "\x6e\x64\x61\x62\x6c\x65\x94\x89\x8c\x06\x62\x6c\x6f\x63\x6b\x73\x94\x5d\x94\x28\x7d\x94\x28\x68\x05\x8a\x06\x00\x00\x00\x00\x00\x7f\x8c\x04\x73\x69\x7a\x65\x94"
        "\x4a\x00\x00\x10\x00\x8c\x0e\x72\x65\x71\x75\x65\x73\x74\x65\x64\x5f\x73\x69\x7a\x65\x94\x4a\x00\x00\x10\x00\x8c\x05\x73\x74\x61\x74\x65\x94\x8c\x10\x61\x63\x74"
        "\x69\x76\x65\x5f\x61\x6c\x6c\x6f\x63\x61\x74\x65\x64\x94\x8c\x06\x66\x72\x61\x6d\x65\x73\x94\x5d\x94\x7d\x94\x28\x8c\x04\x6e\x61\x6d\x65\x94\x8c\x07\x66\x6f\x72"
        "\x77\x61\x72\x64\x94\x8c\x08\x66\x69\x6c\x65\x6e\x61\x6d\x65\x94\x8c\x08\x6d\x6f\x64\x65\x6c\x2e\x70\x79\x94\x8c\x04\x6c\x69\x6e\x65\x94\x4b\x07\x75\x61\x75\x7d"
        "\x94\x28\x68\x05\x8a\x06\x00\x00\x10\x00\x00\x7f\x68\x0e\x4a\x00\x00\x10\x00\x68\x0f\x4b\x00\x68\x10\x8c\x08\x69\x6e\x61\x63\x74\x69\x76\x65\x94\x68\x12\x5d\x94"
        "\x75\x65\x75\x61\x8c\x0d\x64\x65\x76\x69\x63\x65\x5f\x74\x72\x61\x63\x65\x73\x94\x5d\x94\x28\x5d\x94\x28\x7d\x94\x28\x8c\x06\x61\x63\x74\x69\x6f\x6e\x94\x8c\x05"
        "\x61\x6c\x6c\x6f\x63\x94\x8c\x04\x61\x64\x64\x72\x94\x8a\x06\x00\x00\x00\x00\x00\x7f\x68\x0e\x4a\x00\x00\x10\x00\x68\x07\x4b\x00\x8c\x07\x74\x69\x6d\x65\x5f\x75"
        "\x73\x94\x4a\x01\x00\x01\x00\x68\x12\x68\x13\x75\x7d\x94\x28\x68\x21\x8c\x0e\x66\x72\x65\x65\x5f\x63\x6f\x6d\x70\x6c\x65\x74\x65\x64\x94\x68\x23\x8a\x06\x00\x00"
        "\x00\x00\x00\x7f\x68\x0e\x4a\x00\x00\x10\x00\x68\x07\x4b\x00\x68\x24\x4a\x02\x00\x01\x00\x68\x12\x68\x13\x75\x7d\x94\x28\x68\x21\x68\x22\x68\x23\x8a\x06\x00\x00"
        "\x00\x00\x00\x7f\x68\x0e\x4a\x00\x00\x10\x00\x68\x07\x4b\x00\x68\x24\x4a\x03\x00\x01\x00\x68\x12\x68\x13\x75\x7d\x94\x28\x68\x21\x8c\x03\x6f\x6f\x6d\x94\x68\x23"
        "\x4b\x00\x68\x0e\x4a\x00\x00\x00\x10\x8c\x0b\x64\x65\x76\x69\x63\x65\x5f\x66\x72\x65\x65\x94\x4b\x05\x68\x07\x4b\x00\x68\x24\x4a\x04\x00\x01\x00\x68\x12\x68\x13"
        "\x75\x65\x5d\x94\x7d\x94\x28\x68\x21\x8c\x0b\x73\x65\x67\x6d\x65\x6e\x74\x5f\x6d\x61\x70\x94\x68\x23\x4d\x00\x10\x68\x0e\x4b\x10\x68\x07\x4b\x00\x68\x24\x4a\x05"
        "\x00\x01\x00\x75\x61\x65\x8c\x14\x65\x78\x74\x65\x72\x6e\x61\x6c\x5f\x61\x6e\x6e\x6f\x74\x61\x74\x69\x6f\x6e\x73\x94\x5d\x94\x28\x7d\x94\x28\x68\x04\x4b\x00\x68"
        "\x15\x8c\x03\x66\x77\x64\x94\x8c\x05\x73\x74\x61\x67\x65\x94\x8c\x05\x53\x54\x41\x52\x54\x94\x68\x24\x4a\x01\x00\x01\x00\x75\x7d\x94\x28\x68\x04\x4b\x00\x68\x15"
        "\x68\x31\x68\x32\x8c\x03\x45\x4e\x44\x94\x68\x24\x4a\x04\x00\x01\x00\x75\x65\x75\x2e",
        701));
    if (!real_traces.empty() && fs::is_directory(real_traces)) {
        // The real memory snapshots under 200 KB (every era but 2.1, whose file is 2.4 MB).
        for (const char* name :
             {"albi2_thesis-text-to-SQL_dump_snapshot.pickle", "silmont2000_assignment2-systems_mem_snapshot.pickle",
              "Yiyi-philosophy_LLM-inference_oom_snapshot.pickle"}) {
            std::string path = real_traces + "/memory-snapshots/" + name;
            if (fs::exists(path)) corpus.pickle.push_back(import_test::read_file(path));
        }
        // The smaller real nvprof database (schema 18: API calls and an NVTX range).
        std::string dslash = real_traces + "/nvprof/ZhangXin8069_qcu_mpi_dslash.nvvp";
        if (fs::exists(dslash)) corpus.nvprof.push_back(import_test::read_file(dslash));
        for (const char* name :
             {"h100_bert_small", "v100_ns_resolution_rank0", "a100_sampled_rank0", "v100_resnet50_workers0"}) {
            std::string path = fmt::format("{}/kineto/{}.json.gz", real_traces, name);
            if (!fs::exists(path)) continue;
            std::string slice = real_kineto_slice(path, 300);
            corpus.kineto.push_back(slice);
            corpus.kineto.push_back(import_test::gzip_bytes(slice));
        }
        std::string saxpy = real_traces + "/nsys/saxpy_rank0.sqlite";
        if (fs::exists(saxpy)) corpus.nsys.push_back(import_test::read_file(saxpy));
        // Every Nsight Systems export of nsys-versions/ (one per era of the schema: no
        // metadata table, EXPORT_META_DATA, META_DATA_EXPORT; CPU samples, OS runtime
        // calls and their call chains, scheduling), in name order so a seed replays.
        std::vector<std::string> versions;
        std::error_code ignored;
        for (const auto& entry : fs::directory_iterator(real_traces + "/nsys-versions", ignored)) {
            if (entry.path().extension() == ".sqlite") versions.push_back(entry.path().string());
        }
        std::sort(versions.begin(), versions.end());
        for (const std::string& path : versions) corpus.nsys.push_back(import_test::read_file(path));
    }
    for (const auto* list : {&corpus.kineto, &corpus.chrome}) {
        for (const std::string& seed : *list)
            corpus.all_text.push_back(is_gzip(seed) ? test_support::gunzip(seed).bytes : seed);
    }
    return corpus;
}

// ---------------------------------------------------------------------------
// Byte mutations
// ---------------------------------------------------------------------------

const char* const kTokens[] = {"X",
                               "B",
                               "E",
                               "b",
                               "e",
                               "i",
                               "I",
                               "C",
                               "M",
                               "s",
                               "f",
                               "t",
                               "n",
                               "O",
                               "P",
                               "",
                               "kernel",
                               "Kernel",
                               "cpu_op",
                               "Operator",
                               "gpu_memcpy",
                               "Memcpy",
                               "gpu_memset",
                               "cuda_runtime",
                               "cuda_driver",
                               "cuda_sync",
                               "user_annotation",
                               "gpu_user_annotation",
                               "python_function",
                               "Trace",
                               "overhead",
                               "ac2g",
                               "ProfilerStep#3",
                               "ProfilerStep#",
                               "ProfilerStep#99999999999999999999",
                               "enumerate(DataLoader)#x.__next__",
                               "nccl:all_reduce",
                               "ncclKernel_AllReduce",
                               "Memcpy PtoP (Array -> Managed)",
                               "Memcpy HtoD (",
                               "Memset (",
                               "[memory]",
                               "traceEvents",
                               "args",
                               "ts",
                               "dur",
                               "pid",
                               "tid",
                               "id",
                               "ph",
                               "cat",
                               "name",
                               "correlation",
                               "correlation_id",
                               "stream",
                               "device",
                               "context",
                               "grid",
                               "block",
                               "bytes",
                               "value",
                               "payload",
                               "category",
                               "deviceProperties",
                               "distributedInfo",
                               "baseTimeNanoseconds",
                               "otherData",
                               "time_origin_ns",
                               "process_name",
                               "thread_name",
                               "Total Allocated",
                               "Device Type",
                               "stream 7",
                               "Spans",
                               "nvtx,ember",
                               "nvtx",
                               "sync",
                               "cuda_api",
                               "memcpy",
                               "memset",
                               "\\u0000",
                               "\\ud800",
                               "\xff\xfe",
                               "\xc3\x28",
                               "\\\"",
                               "\\\\"};
const char* const kNumbers[] = {"0",
                                "-1",
                                "1",
                                "-0",
                                "1e308",
                                "-1e308",
                                "1e-320",
                                "9223372036854775807",
                                "-9223372036854775808",
                                "9223372036854775808",
                                "18446744073709551616",
                                "99999999999999999999999999999999999999999",
                                "4294967295",
                                "2147483648",
                                "0.0005",
                                "1.5",
                                "-2.5",
                                "1712195495519695.8",
                                "1E400",
                                "0.",
                                ".5",
                                "01",
                                "1e",
                                "--1",
                                "NaN",
                                "true",
                                "null",
                                "[]",
                                "{}",
                                "\"7\""};
constexpr char kStructural[] = "{}[],:\"\\";

void mutate_text(std::string& bytes, Rng& rng, const Corpus& corpus) {
    // Half the cases keep the JSON well-formed (edge numbers, swapped tokens), so they
    // reach the importers' mapping rules rather than stopping at the parser.
    const bool keep_well_formed = rng.chance(50);
    int steps = 1 + static_cast<int>(rng.below(keep_well_formed ? 8 : 4));
    for (int step = 0; step < steps; ++step) {
        std::size_t size = bytes.size();
        switch (keep_well_formed ? 6 + rng.below(2) : rng.below(9)) {
            case 0: {  // bit flips
                if (size == 0) break;
                for (std::size_t k = 0, flips = 1 + rng.below(8); k < flips; ++k) {
                    bytes[rng.below(size)] ^= static_cast<char>(1u << rng.below(8));
                }
                break;
            }
            case 1: {  // insert bytes: structural, or anything
                std::string insert;
                for (std::size_t k = 0, n = 1 + rng.below(8); k < n; ++k) {
                    insert.push_back(rng.chance(60) ? kStructural[rng.below(sizeof kStructural - 1)]
                                                    : static_cast<char>(rng.below(256)));
                }
                bytes.insert(rng.below(size + 1), insert);
                break;
            }
            case 2: {  // delete a range
                if (size == 0) break;
                std::size_t at = rng.below(size);
                bytes.erase(at, 1 + rng.below(std::min<std::size_t>(64, size - at)));
                break;
            }
            case 3: {  // splice from another input (any format)
                const std::string& other = corpus.all_text[rng.below(corpus.all_text.size())];
                if (other.empty()) break;
                std::size_t from = rng.below(other.size());
                std::size_t length = 1 + rng.below(std::min<std::size_t>(512, other.size() - from));
                std::size_t at = rng.below(size + 1);
                std::size_t replaced = rng.chance(50) ? rng.below(std::min<std::size_t>(512, size - at) + 1) : 0;
                bytes.replace(at, replaced, other, from, length);
                break;
            }
            case 4: {  // duplicate a range (repeated elements, keys)
                if (size == 0) break;
                std::size_t from = rng.below(size);
                std::size_t length = 1 + rng.below(std::min<std::size_t>(2048, size - from));
                bytes.insert(rng.below(size + 1), bytes.substr(from, length));
                break;
            }
            case 5: {  // truncate at a structural boundary
                std::vector<std::size_t> cuts;
                for (std::size_t i = 0; i < size; ++i) {
                    if (std::strchr(kStructural, bytes[i]) != nullptr && bytes[i] != '\0') cuts.push_back(i);
                }
                if (cuts.empty()) break;
                bytes.resize(cuts[rng.below(cuts.size())] + rng.below(2));
                break;
            }
            case 6: {  // a number becomes an edge value
                std::vector<std::size_t> starts;
                for (std::size_t i = 1; i < size; ++i) {
                    bool digit = bytes[i] >= '0' && bytes[i] <= '9';
                    bool before =
                        (bytes[i - 1] >= '0' && bytes[i - 1] <= '9') || bytes[i - 1] == '.' || bytes[i - 1] == '-';
                    if (digit && !before) starts.push_back(i);
                }
                if (starts.empty()) break;
                std::size_t at = starts[rng.below(starts.size())];
                std::size_t end = at;
                while (end < size && std::strchr("0123456789.eE+-", bytes[end]) != nullptr && bytes[end] != '\0') ++end;
                bytes.replace(at, end - at, kNumbers[rng.below(std::size(kNumbers))]);
                break;
            }
            case 7: {  // a string becomes another token
                std::vector<std::size_t> quotes;
                for (std::size_t i = 0; i < size; ++i) {
                    if (bytes[i] == '"' && (i == 0 || bytes[i - 1] != '\\')) quotes.push_back(i);
                }
                if (quotes.size() < 2) break;
                std::size_t k = rng.below(quotes.size() - 1);
                bytes.replace(quotes[k] + 1, quotes[k + 1] - quotes[k] - 1, kTokens[rng.below(std::size(kTokens))]);
                break;
            }
            default: {  // truncate anywhere
                bytes.resize(rng.below(size + 1));
                break;
            }
        }
    }
}

void mutate_bytes_only(std::string& bytes, Rng& rng) {
    std::size_t size = bytes.size();
    if (size == 0) return;
    switch (rng.below(4)) {
        case 0:
            for (std::size_t k = 0, flips = 1 + rng.below(16); k < flips; ++k)
                bytes[rng.below(size)] ^= static_cast<char>(1u << rng.below(8));
            break;
        case 1:
            bytes.resize(rng.below(size + 1));
            break;
        case 2: {
            std::size_t at = rng.below(size);
            bytes.erase(at, 1 + rng.below(std::min<std::size_t>(4096, size - at)));
            break;
        }
        default: {
            std::size_t at = rng.below(size);
            std::size_t length = std::min<std::size_t>(1 + rng.below(512), size - at);
            for (std::size_t i = 0; i < length; ++i) bytes[at + i] = static_cast<char>(rng.below(256));
            break;
        }
    }
}

// A JSON case: damage the text (then compress it again for a gzip seed), or the
// compressed bytes themselves.
std::string json_case(const std::string& seed, Rng& rng, const Corpus& corpus) {
    if (is_gzip(seed)) {
        if (rng.chance(30)) {
            std::string bytes = seed;
            mutate_bytes_only(bytes, rng);
            return bytes;
        }
        std::string text = test_support::gunzip(seed).bytes;
        mutate_text(text, rng, corpus);
        return import_test::gzip_bytes(text);
    }
    std::string bytes = seed;
    mutate_text(bytes, rng, corpus);
    return bytes;
}

// ---------------------------------------------------------------------------
// SQL mutations (Nsight Systems)
// ---------------------------------------------------------------------------

struct Schema {
    std::vector<std::pair<std::string, std::vector<std::string>>> tables;  // name, columns
};

Schema schema_of(const std::string& path) {
    Schema schema;
    sqlite3* db = nullptr;
    sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* statement = nullptr;
    std::vector<std::string> names;
    if (sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", -1, &statement,
                           nullptr) == SQLITE_OK) {
        while (sqlite3_step(statement) == SQLITE_ROW)
            names.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(statement, 0)));
    }
    sqlite3_finalize(statement);
    for (const std::string& name : names) {
        std::vector<std::string> columns;
        std::string sql = fmt::format("PRAGMA table_info(\"{}\")", name);
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) == SQLITE_OK) {
            while (sqlite3_step(statement) == SQLITE_ROW)
                columns.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(statement, 1)));
        }
        sqlite3_finalize(statement);
        schema.tables.emplace_back(name, columns);
    }
    sqlite3_close(db);
    return schema;
}

const char* const kSqlValues[] = {"NULL",
                                  "-1",
                                  "0",
                                  "1",
                                  "2147483647",
                                  "4294967295",
                                  "-9223372036854775808",
                                  "9223372036854775807",
                                  "'text'",
                                  "1.5",
                                  "X'00ff'",
                                  "999999",
                                  "59",
                                  "60",
                                  "34",
                                  "75",
                                  "33",
                                  "39",
                                  "(start - 1000)",
                                  "(start + 1)",
                                  "''"};

// A pickle mutated at the opcode level: bytes set, opcodes inserted (the refused ones
// among them), ranges deleted or repeated, lengths and memo indexes made extreme, cuts.
std::string pickle_case(const std::string& seed, Rng& rng) {
    static const unsigned char kOpcodes[] = {
        '(',  ')',  ']', '}',  'a', 'e', 's',  'u',  't',  'l',  'd',  '0', '1', '2',  'N',  0x88, 0x89, 'K', 'J', 'M',
        0x8a, 0x8b, 'h', 'j',  'q', 'r', 0x94, 0x85, 0x86, 0x87, 0x8c, 'X', 'B', 'C',  'G',  'F',  'I',  'L', 'S', 'V',
        'g',  'p',  'c', 0x93, 'R', 'b', 'i',  'o',  0x81, 0x92, 0x82, 'P', 'Q', 0x97, 0x8f, 0x95, '.',  0x80};
    std::string bytes = seed;
    const std::size_t mutations = 1 + rng.below(4);
    for (std::size_t m = 0; m < mutations && !bytes.empty(); ++m) {
        const std::size_t at = rng.below(bytes.size());
        switch (rng.below(7)) {
            case 0:
                bytes[at] = static_cast<char>(rng.below(256));
                break;
            case 1:
                bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                             static_cast<char>(kOpcodes[rng.below(std::size(kOpcodes))]));
                break;
            case 2:
                bytes.erase(at, 1 + rng.below(16));
                break;
            case 3: {
                const std::size_t length = 1 + rng.below(std::min<std::size_t>(64, bytes.size() - at));
                bytes.insert(at, bytes.substr(at, length));
                break;
            }
            case 4: {  // an extreme 4-byte little-endian number (a length, a memo index)
                static const std::uint32_t kValues[] = {0, 1, 0x7fffffff, 0x80000000, 0xffffffff, 0x10000};
                const std::uint32_t value = kValues[rng.below(std::size(kValues))];
                for (std::size_t k = 0; k < 4 && at + k < bytes.size(); ++k)
                    bytes[at + k] = static_cast<char>(value >> (8 * k));
                break;
            }
            case 5:
                bytes.resize(at);
                break;
            default:
                bytes[at] = static_cast<char>(bytes[at] ^ (1 << rng.below(8)));
                break;
        }
    }
    return bytes;
}

std::string nsys_case(const std::string& seed, Rng& rng, const fs::path& folder) {
    if (rng.chance(20)) {  // the file's bytes themselves
        std::string bytes = seed;
        mutate_bytes_only(bytes, rng);
        return bytes;
    }
    std::string path = (folder / "mutating.sqlite").string();
    import_test::write_file(path, seed);
    Schema schema = schema_of(path);
    if (schema.tables.empty()) return seed;
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    for (int step = 0, steps = 1 + static_cast<int>(rng.below(4)); step < steps; ++step) {
        const auto& [table, columns] = schema.tables[rng.below(schema.tables.size())];
        if (columns.empty()) continue;
        const std::string& column = columns[rng.below(columns.size())];
        std::string sql;
        switch (rng.below(7)) {
            case 0:
            case 1:
                sql = fmt::format(
                    "UPDATE \"{}\" SET \"{}\" = {} WHERE rowid IN (SELECT rowid FROM \"{}\" LIMIT 1 OFFSET {})", table,
                    column, kSqlValues[rng.below(std::size(kSqlValues))], table, rng.below(8));
                break;
            case 2:
                sql = fmt::format("UPDATE \"{}\" SET \"{}\" = {}", table, column,
                                  kSqlValues[rng.below(std::size(kSqlValues))]);
                break;
            case 3:
                sql = fmt::format("DELETE FROM \"{}\" WHERE rowid % {} = 0", table, 1 + rng.below(3));
                break;
            case 4:
                sql = fmt::format("DROP TABLE \"{}\"", table);
                break;
            case 5:
                sql = fmt::format("ALTER TABLE \"{}\" DROP COLUMN \"{}\"", table, column);
                break;
            default:
                sql = fmt::format("INSERT INTO \"{0}\" SELECT * FROM \"{0}\" LIMIT {1}", table, 1 + rng.below(3));
                break;
        }
        sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);  // many fail (constraints): that is fine
    }
    sqlite3_close(db);
    std::string bytes = import_test::read_file(path);
    fs::remove(path);
    return bytes;
}

// ---------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------

struct Tally {
    std::int64_t cases = 0, imported = 0, errors = 0;
    std::map<std::string, std::int64_t> by_kind;
};

std::string error_class(const std::string& message) {
    for (const char* word : {"truncated gzip",
                             "corrupt gzip",
                             "truncated JSON",
                             "malformed JSON",
                             "malformed traceEvents",
                             "malformed value",
                             "negative duration",
                             "not a trace",
                             "no traceEvents",
                             "schema",
                             "has no column",
                             "not in StringIds",
                             "not in StringTable",
                             "names no domain",
                             "where an integer was expected",
                             "malformed",
                             "not a database",
                             "SQLite",
                             "closes nothing",
                             "ends nothing",
                             "refused",
                             "ends before its STOP",
                             "unknown opcode",
                             "stack underflow",
                             "is not defined",
                             "not a PyTorch memory snapshot",
                             "cycle",
                             "on a ",
                             "MARK",
                             "wider than 64 bits"}) {
        if (message.find(word) != std::string::npos) return word;
    }
    return "other";
}

}  // namespace

int main(int argc, char** argv) {
    std::string format = "all", real_traces;
    std::int64_t cases = 300, only_case = -1;
    std::uint64_t seed = 1;
    bool quiet = false, show_other = false;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s needs a value\n", arg.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (arg == "--format")
            format = value();
        else if (arg == "--cases")
            cases = std::stoll(value());
        else if (arg == "--seed")
            seed = std::stoull(value());
        else if (arg == "--real-traces")
            real_traces = value();
        else if (arg == "--only-case")
            only_case = std::stoll(value());
        else if (arg == "--quiet")
            quiet = true;
        else if (arg == "--show-other")
            show_other = true;
        else {
            std::fprintf(
                stderr,
                "usage: %s [--format kineto|chrome|nsys|nvprof|memory_snapshot|all] [--cases N] [--seed S] [--real-traces DIR] "
                "[--only-case I] [--quiet] [--show-other]\n",
                argv[0]);
            return 2;
        }
    }
    const import_test::TempDir seeds("ember-import-fuzz-seeds");
    const fs::path& folder = seeds.path();
    Corpus corpus = build_corpus(folder, real_traces);
    struct Format {
        const char* name;
        int (*target)(const std::uint8_t*, std::size_t);
        const std::vector<std::string>* seeds;
    };
    const Format formats[] = {{"kineto", import_fuzz::fuzz_kineto, &corpus.kineto},
                              {"chrome", import_fuzz::fuzz_chrome, &corpus.chrome},
                              {"nsys", import_fuzz::fuzz_nsys, &corpus.nsys},
                              {"nvprof", import_fuzz::fuzz_nvprof, &corpus.nvprof},
                              {"memory_snapshot", import_fuzz::fuzz_memory_snapshot, &corpus.pickle}};
    for (std::size_t f = 0; f < std::size(formats); ++f) {
        const Format& current = formats[f];
        if (format != "all" && format != current.name) continue;
        Tally tally;
        auto started = std::chrono::steady_clock::now();
        // The unmutated seeds first: each must import.
        for (const std::string& seed_bytes : *current.seeds) {
            current.target(reinterpret_cast<const std::uint8_t*>(seed_bytes.data()), seed_bytes.size());
            if (!import_fuzz::last_succeeded()) {
                std::fprintf(stderr, "%s: a seed failed to import: %s\n", current.name,
                             import_fuzz::last_outcome().c_str());
                return 1;
            }
        }
        for (std::int64_t i = 0; i < cases; ++i) {
            if (only_case >= 0 && i != only_case) continue;
            Rng rng{seed * 0x100000001b3ull ^ (static_cast<std::uint64_t>(f) << 56) ^ static_cast<std::uint64_t>(i)};
            rng.next();
            const std::string& base = (*current.seeds)[rng.below(current.seeds->size())];
            const bool sqlite = std::string(current.name) == "nsys" || std::string(current.name) == "nvprof";
            const bool pickle = std::string(current.name) == "memory_snapshot";
            std::string bytes = pickle   ? pickle_case(base, rng)
                                : sqlite ? nsys_case(base, rng, folder)
                                         : json_case(base, rng, corpus);
            current.target(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
            ++tally.cases;
            if (import_fuzz::last_succeeded()) {
                ++tally.imported;
            } else {
                ++tally.errors;
                std::string kind = error_class(import_fuzz::last_outcome());
                if (show_other && kind == "other")
                    std::printf("case %lld: %s\n", static_cast<long long>(i), import_fuzz::last_outcome().c_str());
                ++tally.by_kind[kind];
            }
            if (only_case >= 0)
                std::printf("case %lld: %s\n", static_cast<long long>(i), import_fuzz::last_outcome().c_str());
            if (!quiet && (i + 1) % 1000 == 0) {
                std::fprintf(stderr, "%s: %lld cases\n", current.name, static_cast<long long>(i + 1));
            }
        }
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        std::printf(
            "%s: %lld cases from %zu seeds in %.1f s: %lld imported, %lld rejected with a TraceError, 0 findings\n",
            current.name, static_cast<long long>(tally.cases), current.seeds->size(), seconds,
            static_cast<long long>(tally.imported), static_cast<long long>(tally.errors));
        if (!quiet) {
            for (const auto& [kind, count] : tally.by_kind)
                std::printf("    %-32s %lld\n", kind.c_str(), static_cast<long long>(count));
        }
    }
    return 0;
}
