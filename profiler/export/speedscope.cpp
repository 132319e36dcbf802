// speedscope.cpp: streaming speedscope writer. Profiles are written first and
// the shared frame table last (JSON members are unordered), so frames can be
// numbered as they are met.
#include "profiler/export/speedscope.h"

#include "profiler/analysis/cpu_profile.h"
#include "profiler/analysis/gpu_time_by_range.h"
#include "profiler/analysis/operation_names.h"
#include "profiler/store/table_sql.h"
#include "profiler/export/json_text.h"
#include "profiler/export/nested_events.h"

#include "ember/version.h"

#include <fmt/format.h>

#include <filesystem>
#include <iterator>
#include <unordered_map>
#include <vector>

namespace ember::exporting {

namespace {

class FrameTable {
  public:
    std::size_t index(const std::string& name) {
        auto [position, inserted] = indices_.try_emplace(name, names_.size());
        if (inserted) names_.push_back(name);
        return position->second;
    }
    const std::vector<std::string>& names() const { return names_; }

  private:
    std::unordered_map<std::string, std::size_t> indices_;
    std::vector<std::string> names_;
};

class ProfileWriter {
  public:
    ProfileWriter(OutputFile& out, FrameTable& frames, bool& first_profile, std::int64_t origin)
        : out_(out), frames_(frames), first_profile_(first_profile), origin_(origin) {}

    // Writes one evented profile named `name` from `query` (start, end, ...); an
    // empty lane writes nothing.
    void evented(const std::string& name, store::Statement& query,
                 const std::function<std::string(store::Statement&)>& name_of) {
        bool started = false;
        std::int64_t first_at = 0, last_at = 0;
        auto event = [&](const char* type, const std::string& frame, std::int64_t at_ns) {
            std::int64_t at = at_ns - origin_;
            std::string& b = out_.buffer();
            if (!started) {
                b += first_profile_ ? "\n{" : ",\n{";
                first_profile_ = false;
                b += "\"type\":\"evented\",\"name\":";
                append_json_string(b, name);
                b += ",\"unit\":\"nanoseconds\",\"events\":[";
                started = true;
                first_at = at;
            } else {
                b += ',';
            }
            last_at = at;
            fmt::format_to(std::back_inserter(b), "\n{{\"type\":\"{}\",\"frame\":{},\"at\":{}}}", type,
                           frames_.index(frame), at);
            out_.maybe_flush();
        };
        for_each_nested_event(
            query, name_of, [&](const std::string& frame, std::int64_t at) { event("O", frame, at); },
            [&](const std::string& frame, std::int64_t at) { event("C", frame, at); });
        if (started)
            fmt::format_to(std::back_inserter(out_.buffer()), "],\"startValue\":{},\"endValue\":{}}}", first_at,
                           last_at);
    }

  private:
    OutputFile& out_;
    FrameTable& frames_;
    bool& first_profile_;
    std::int64_t origin_;
};

std::string memcpy_name(std::int64_t direction) {
    return analysis::memcpy_display_name(static_cast<trace::MemcpyDirection>(direction));
}

}  // namespace

void export_speedscope(const store::TraceReader& reader, OutputFile& out, bool include_idle) {
    FrameTable frames;
    bool first_profile = true;
    std::int64_t origin = reader.run().start_ns;
    ProfileWriter profiles(out, frames, first_profile, origin);
    auto string_column = [&reader](store::Statement& row) {
        return std::string(reader.string(static_cast<trace::StringId>(row.column_int64(2))));
    };

    out.buffer() += "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"profiles\":[";
    for (const trace::ThreadInfo& thread : reader.threads()) {
        store::Statement query = thread_lane_query(reader, thread.thread_id);
        profiles.evented(fmt::format("thread {} (tid {})", thread.name.empty() ? "?" : thread.name, thread.tid), query,
                         string_column);
    }
    for (const trace::StreamInfo& stream : reader.streams()) {
        store::Statement query =
            store::query(reader,
                         "SELECT start_ns, end_ns, name_id, 0 FROM kernels WHERE stream_id = ?1 "
                         "UNION ALL SELECT start_ns, end_ns, direction, 1 FROM memcpys WHERE stream_id = ?1 "
                         "UNION ALL SELECT start_ns, end_ns, 0, 2 FROM memsets WHERE stream_id = ?1 "
                         "ORDER BY 1, 2 DESC, 4");
        query.bind(1, stream.stream_id);
        profiles.evented(
            fmt::format("GPU {} stream {}{}{}", stream.device_id, stream.cuda_stream_id, stream.name.empty() ? "" : " ",
                        stream.name),
            query, [&reader](store::Statement& row) {
                switch (row.column_int64(3)) {
                    case 0:
                        return std::string(reader.string(static_cast<trace::StringId>(row.column_int64(2))));
                    case 1:
                        return memcpy_name(row.column_int64(2));
                    default:
                        return std::string("Memset");
                }
            });
    }

    // A "sampled" profile: one weighted sample per leaf-or-inner node with self weight.
    std::string& b = out.buffer();
    auto sampled = [&](const char* name, const analysis::StackTree& tree, std::int64_t total) {
        if (total <= 0) return;
        b += first_profile ? "\n{" : ",\n{";
        first_profile = false;
        b += "\"type\":\"sampled\",\"name\":";
        append_json_string(b, name);
        fmt::format_to(std::back_inserter(b),
                       ",\"unit\":\"nanoseconds\",\"startValue\":0,\"endValue\":{},\"samples\":[", total);
        std::vector<std::int64_t> weights;
        bool first_sample = true;
        for (std::uint32_t node = 1; node < tree.size(); ++node) {
            if (tree.node(node).self_weight <= 0) continue;
            b += first_sample ? "\n[" : ",\n[";
            first_sample = false;
            bool first_frame = true;
            for (const std::string& frame : tree.path(node)) {
                if (!first_frame) b += ',';
                first_frame = false;
                fmt::format_to(std::back_inserter(b), "{}", frames.index(frame));
            }
            b += ']';
            weights.push_back(tree.node(node).self_weight);
            out.maybe_flush();
        }
        b += "],\"weights\":[";
        for (std::size_t i = 0; i < weights.size(); ++i)
            fmt::format_to(std::back_inserter(b), "{}{}", i ? "," : "", weights[i]);
        b += "]}";
    };
    // GPU time by NVTX range: stacks are range paths ending in kernel names.
    const analysis::GpuTimeByRange by_range = analysis::gpu_time_by_range(reader);
    sampled(kGpuTimeByRangeProfileName, by_range.stacks, by_range.total_gpu_ns);
    // CPU samples (native and Python frames, running threads only): thread, then the stack.
    const analysis::StackTree cpu = analysis::cpu_stack_tree(reader, include_idle);
    std::int64_t cpu_total = 0;
    for (std::uint32_t node = 1; node < cpu.size(); ++node) cpu_total += cpu.node(node).self_weight;
    sampled(kCpuSamplesProfileName, cpu, cpu_total);

    b += "\n],\"shared\":{\"frames\":[";
    for (std::size_t i = 0; i < frames.names().size(); ++i) {
        b += i == 0 ? "\n{\"name\":" : ",\n{\"name\":";
        append_json_string(b, frames.names()[i]);
        b += '}';
        out.maybe_flush();
    }
    b += "]},\"name\":";
    append_json_string(b, std::filesystem::path(reader.path()).filename().string());
    b += ",\"activeProfileIndex\":0,\"exporter\":";
    append_json_string(b, std::string("ember ") + EMBER_VERSION_STRING);
    b += "}\n";
    out.flush();
}

}  // namespace ember::exporting
