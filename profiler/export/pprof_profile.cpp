// pprof_profile.cpp: sampled stacks -> profile.proto, gzipped.
#include "profiler/export/pprof_profile.h"

#include "profiler/analysis/cpu_profile.h"
#include "profiler/analysis/python_gpu.h"
#include "profiler/store/trace_error.h"

#include "profiler/export/proto/pprof_profile.pb.h"

#include <zlib.h>

#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace ember::exporting {

namespace {

namespace pb = ember::pprof;

class ProfileBuilder {
  public:
    explicit ProfileBuilder(pb::Profile& profile) : profile_(profile) { profile_.add_string_table(""); }

    std::int64_t string(const std::string& text) {
        auto [found, inserted] = strings_.try_emplace(text, static_cast<std::int64_t>(strings_.size() + 1));
        if (inserted) profile_.add_string_table(text);
        return found->second;
    }

    // The location of one frame, made on first use.
    std::uint64_t location(const trace::FrameInfo& frame) {
        auto found = locations_.find(frame.frame_id);
        if (found != locations_.end()) return found->second;
        pb::Location& location = *profile_.add_location();
        location.set_id(static_cast<std::uint64_t>(profile_.location_size()));
        pb::Line& line = *location.add_line();
        if (frame.is_python()) {
            line.set_function_id(function(frame.function, frame.function, frame.module));
            line.set_line(frame.line);
        } else {
            line.set_function_id(function(analysis::cpu_frame_name(frame), frame.function, ""));
            location.set_address(frame.address);
            if (!frame.module.empty()) location.set_mapping_id(mapping(frame.module));
        }
        locations_.emplace(frame.frame_id, location.id());
        return location.id();
    }

    // A location with a function of this name only ("[waiting on GPU]").
    std::uint64_t synthetic_location(const std::string& name) {
        auto found = synthetic_.find(name);
        if (found != synthetic_.end()) return found->second;
        pb::Location& location = *profile_.add_location();
        location.set_id(static_cast<std::uint64_t>(profile_.location_size()));
        location.add_line()->set_function_id(function(name, name, ""));
        synthetic_.emplace(name, location.id());
        return location.id();
    }

  private:
    std::uint64_t function(const std::string& name, const std::string& system_name, const std::string& file) {
        auto key = std::make_tuple(name, system_name, file);
        auto found = functions_.find(key);
        if (found != functions_.end()) return found->second;
        pb::Function& function = *profile_.add_function();
        function.set_id(static_cast<std::uint64_t>(profile_.function_size()));
        function.set_name(string(name));
        function.set_system_name(string(system_name));
        if (!file.empty()) function.set_filename(string(file));
        functions_.emplace(std::move(key), function.id());
        return function.id();
    }
    std::uint64_t mapping(const std::string& module) {
        auto found = mappings_.find(module);
        if (found != mappings_.end()) return found->second;
        pb::Mapping& mapping = *profile_.add_mapping();
        mapping.set_id(static_cast<std::uint64_t>(profile_.mapping_size()));
        mapping.set_filename(string(module));
        mapping.set_has_functions(true);
        mappings_.emplace(module, mapping.id());
        return mapping.id();
    }

    pb::Profile& profile_;
    std::unordered_map<std::string, std::int64_t> strings_;
    std::unordered_map<trace::FrameId, std::uint64_t> locations_;
    std::map<std::string, std::uint64_t> synthetic_;
    std::map<std::tuple<std::string, std::string, std::string>, std::uint64_t> functions_;
    std::map<std::string, std::uint64_t> mappings_;
};

// pprof names a profile after its first mapping ("File: ..."): the recorded program's
// executable, when one of the mappings is it.
void put_main_mapping_first(pb::Profile& profile, const std::string& command_line) {
    std::string program = command_line.substr(0, command_line.find(' '));
    program = program.substr(program.rfind('/') == std::string::npos ? 0 : program.rfind('/') + 1);
    if (program.empty()) return;
    for (int index = 1; index < profile.mapping_size(); ++index) {
        const std::string& file = profile.string_table(static_cast<int>(profile.mapping(index).filename()));
        if (file.size() >= program.size() && file.compare(file.size() - program.size(), program.size(), program) == 0 &&
            (file.size() == program.size() || file[file.size() - program.size() - 1] == '/')) {
            profile.mutable_mapping()->SwapElements(0, index);
            return;
        }
    }
}

void write_gzip(const std::string& bytes, OutputFile& out) {
    z_stream stream{};
    if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        throw store::TraceError(store::TraceErrorKind::io, out.path(), "cannot start gzip compression");
    }
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    stream.avail_in = static_cast<uInt>(bytes.size());
    std::string chunk(1 << 16, '\0');
    int status = Z_OK;
    do {
        stream.next_out = reinterpret_cast<Bytef*>(chunk.data());
        stream.avail_out = static_cast<uInt>(chunk.size());
        status = deflate(&stream, Z_FINISH);
        out.write(std::string_view(chunk.data(), chunk.size() - stream.avail_out));
    } while (status == Z_OK);
    deflateEnd(&stream);
    if (status != Z_STREAM_END)
        throw store::TraceError(store::TraceErrorKind::io, out.path(), "gzip compression failed");
}

}  // namespace

PprofCounts export_pprof(const store::TraceReader& reader, OutputFile& out, bool include_idle) {
    pb::Profile profile;
    ProfileBuilder builder(profile);
    const trace::TimeNs period = analysis::cpu_sample_period_ns(reader);
    pb::ValueType& count_type = *profile.add_sample_type();
    count_type.set_type(builder.string("samples"));
    count_type.set_unit(builder.string("count"));
    if (period > 0) {
        pb::ValueType& cpu_type = *profile.add_sample_type();
        cpu_type.set_type(builder.string("cpu"));
        cpu_type.set_unit(builder.string("nanoseconds"));
        profile.mutable_period_type()->set_type(cpu_type.type());
        profile.mutable_period_type()->set_unit(cpu_type.unit());
        profile.set_period(period);
    }
    // The start on the wall clock, where the trace's clock maps to one (a time before 2000
    // is no wall-clock time).
    const trace::RunInfo& run = reader.run();
    const std::int64_t wall_start = run.start_ns + run.clock_offset_to_wall_ns;
    if (wall_start > 946'684'800'000'000'000) profile.set_time_nanos(wall_start);
    if (run.end_ns > run.start_ns) profile.set_duration_nanos(run.end_ns - run.start_ns);

    // Samples of one stack, thread and wait state are one pprof sample.
    const analysis::GpuWaits waits(reader);
    std::map<std::tuple<trace::StackId, trace::ThreadId, bool>, std::int64_t> counts;
    PprofCounts written;
    reader.for_each_stack_sample({}, [&](const trace::StackSample& sample) {
        if (!analysis::counts_as_cpu_time(sample, include_idle)) return true;
        bool waiting = !waits.empty() && waits.at(sample.thread_id, sample.time_ns) != nullptr;
        ++counts[{sample.stack_id, sample.thread_id, waiting}];
        ++written.samples;
        return true;
    });
    std::unordered_map<trace::StackId, std::vector<std::uint64_t>> stack_locations;  // innermost first
    for (const auto& [key, count] : counts) {
        const auto& [stack, thread_id, waiting] = key;
        auto [found, inserted] = stack_locations.try_emplace(stack);
        if (inserted) {
            std::vector<trace::FrameInfo> frames = reader.stack_frames(stack);
            for (auto frame = frames.rbegin(); frame != frames.rend(); ++frame)
                found->second.push_back(builder.location(*frame));
        }
        pb::Sample& sample = *profile.add_sample();
        if (waiting) sample.add_location_id(builder.synthetic_location(analysis::kWaitingOnGpuFrame));
        for (std::uint64_t location : found->second) sample.add_location_id(location);
        sample.add_value(count);
        if (period > 0) sample.add_value(count * period);
        if (const trace::ThreadInfo* thread = reader.thread(thread_id)) {
            pb::Label& name = *sample.add_label();
            name.set_key(builder.string("thread"));
            name.set_str(builder.string(thread->name.empty() ? "thread " + std::to_string(thread->tid) : thread->name));
            pb::Label& tid = *sample.add_label();
            tid.set_key(builder.string("tid"));
            tid.set_num(thread->tid);
        }
    }
    put_main_mapping_first(profile, run.command_line);
    written.stacks = profile.sample_size();
    written.locations = profile.location_size();
    written.functions = profile.function_size();
    write_gzip(profile.SerializeAsString(), out);
    out.flush();
    return written;
}

}  // namespace ember::exporting
