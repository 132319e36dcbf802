// csv_tables.cpp: one writer per event table.
#include "profiler/export/csv_tables.h"

#include "profiler/analysis/operation_names.h"
#include "profiler/analysis/report_table.h"

#include <fmt/format.h>

#include <filesystem>
#include <iterator>
#include <system_error>
#include <unordered_map>
#include <vector>

namespace ember::exporting {

bool is_csv_table(std::string_view name) {
    for (const char* table : kCsvTables) {
        if (name == table) return true;
    }
    return false;
}

namespace {

void field(std::string& b, std::string_view text) {
    b += analysis::csv_field(text);
}

std::string payload_text(const trace::Payload& payload) {
    if (payload.kind == trace::PayloadKind::integer) return std::to_string(payload.integer);
    if (payload.kind == trace::PayloadKind::real) return fmt::format("{}", payload.real);
    return "";
}

// A call stack as one field: frames innermost first, " <- " between them; a Python
// frame as "function (file:line)". Each stack is spelled once.
class StackText {
  public:
    explicit StackText(const store::TraceReader& reader) : reader_(reader) {}
    const std::string& of(trace::StackId stack) {
        auto [found, inserted] = texts_.try_emplace(stack);
        if (!inserted || stack == 0) return found->second;
        std::vector<trace::FrameInfo> frames = reader_.stack_frames(stack);
        for (auto frame = frames.rbegin(); frame != frames.rend(); ++frame) {
            if (!found->second.empty()) found->second += " <- ";
            found->second += frame->is_python() ? analysis::python_frame_name(*frame) : frame->function;
        }
        return found->second;
    }

  private:
    const store::TraceReader& reader_;
    std::unordered_map<trace::StackId, std::string> texts_;
};

}  // namespace

void export_csv_table(const store::TraceReader& reader, std::string_view name, OutputFile& out) {
    store::EventQuery all;
    std::string& b = out.buffer();
    auto row_end = [&] {
        b += "\r\n";
        out.maybe_flush();
        return true;
    };
    if (name == "kernels") {
        b += "start_ns,end_ns,duration_ns,device_id,stream_id,correlation_id,name,grid_x,grid_y,grid_z,block_x,block_y,"
             "block_z,registers_per_thread,static_shared_bytes,dynamic_shared_bytes\r\n";
        reader.for_each_kernel(all, [&](const trace::KernelEvent& e) {
            fmt::format_to(std::back_inserter(b), "{},{},{},{},{},{},", e.start_ns, e.end_ns, e.end_ns - e.start_ns,
                           e.device_id, e.stream_id, e.correlation_id);
            field(b, reader.string(e.name_id));
            const trace::LaunchConfig& l = e.launch;
            fmt::format_to(std::back_inserter(b), ",{},{},{},{},{},{},{},{},{}", l.grid_x, l.grid_y, l.grid_z,
                           l.block_x, l.block_y, l.block_z, l.registers_per_thread, l.static_shared_bytes,
                           l.dynamic_shared_bytes);
            return row_end();
        });
    } else if (name == "memcpys") {
        b += "start_ns,end_ns,duration_ns,device_id,stream_id,correlation_id,direction,bytes,source_kind,"
             "destination_kind,peer_device_id\r\n";
        reader.for_each_memcpy(all, [&](const trace::MemcpyEvent& e) {
            fmt::format_to(std::back_inserter(b), "{},{},{},{},{},{},{},{},{},{},{}", e.start_ns, e.end_ns,
                           e.end_ns - e.start_ns, e.device_id, e.stream_id, e.correlation_id,
                           trace::direction_name(e.direction), e.bytes, trace::memory_kind_name(e.source_kind),
                           trace::memory_kind_name(e.destination_kind), e.peer_device_id);
            return row_end();
        });
    } else if (name == "memsets") {
        b += "start_ns,end_ns,duration_ns,device_id,stream_id,correlation_id,bytes,value,memory_kind\r\n";
        reader.for_each_memset(all, [&](const trace::MemsetEvent& e) {
            fmt::format_to(std::back_inserter(b), "{},{},{},{},{},{},{},{},{}", e.start_ns, e.end_ns,
                           e.end_ns - e.start_ns, e.device_id, e.stream_id, e.correlation_id, e.bytes, e.value,
                           trace::memory_kind_name(e.memory_kind));
            return row_end();
        });
    } else if (name == "synchronizations") {
        b += "start_ns,end_ns,duration_ns,device_id,stream_id,correlation_id,kind,cuda_event_id\r\n";
        reader.for_each_sync(all, [&](const trace::SyncEvent& e) {
            fmt::format_to(std::back_inserter(b), "{},{},{},{},{},{},", e.start_ns, e.end_ns, e.end_ns - e.start_ns,
                           e.device_id, e.stream_id, e.correlation_id);
            field(b, trace::sync_kind_name(e.kind));
            fmt::format_to(std::back_inserter(b), ",{}", e.cuda_event_id);
            return row_end();
        });
    } else if (name == "api_calls") {
        b += "start_ns,end_ns,duration_ns,thread_id,correlation_id,name,result\r\n";
        reader.for_each_api_call(all, [&](const trace::ApiEvent& e) {
            fmt::format_to(std::back_inserter(b), "{},{},{},{},{},", e.start_ns, e.end_ns, e.end_ns - e.start_ns,
                           e.thread_id, e.correlation_id);
            field(b, reader.string(e.name_id));
            fmt::format_to(std::back_inserter(b), ",{}", e.result);
            return row_end();
        });
    } else if (name == "ranges") {
        b +=
            "range_id,start_ns,end_ns,duration_ns,thread_id,domain,name,category,color,depth,parent_range_id,payload\r\n";
        reader.for_each_range(all, [&](const trace::RangeEvent& e) {
            fmt::format_to(std::back_inserter(b), "{},{},{},{},{},", e.range_id, e.start_ns, e.end_ns,
                           e.end_ns - e.start_ns, e.thread_id);
            field(b, reader.string(e.domain_id));
            b += ',';
            field(b, reader.string(e.name_id));
            fmt::format_to(std::back_inserter(b), ",{},{},{},{},{}", e.category, e.color, e.depth, e.parent_range_id,
                           payload_text(e.payload));
            return row_end();
        });
    } else if (name == "marks") {
        b += "time_ns,thread_id,domain,name,category,color,payload\r\n";
        reader.for_each_mark(all, [&](const trace::MarkEvent& e) {
            fmt::format_to(std::back_inserter(b), "{},{},", e.time_ns, e.thread_id);
            field(b, reader.string(e.domain_id));
            b += ',';
            field(b, reader.string(e.name_id));
            fmt::format_to(std::back_inserter(b), ",{},{},{}", e.category, e.color, payload_text(e.payload));
            return row_end();
        });
    } else if (name == "counter_samples") {
        b += "time_ns,counter_id,counter,unit,value\r\n";
        reader.for_each_counter_sample(all, [&](const trace::CounterSample& e) {
            const trace::CounterInfo* info = reader.counter(e.counter_id);
            fmt::format_to(std::back_inserter(b), "{},{},", e.time_ns, e.counter_id);
            field(b, info != nullptr ? info->name : "");
            b += ',';
            field(b, info != nullptr ? info->unit : "");
            fmt::format_to(std::back_inserter(b), ",{}", e.value);
            return row_end();
        });
    } else if (name == "dropped_records") {
        b += "time_ns,source,thread_id,count\r\n";
        for (const trace::DroppedRecords& e : reader.dropped_records()) {
            fmt::format_to(std::back_inserter(b), "{},", e.time_ns);
            field(b, reader.string(e.source_id));
            fmt::format_to(std::back_inserter(b), ",{},{}", e.thread_id, e.count);
            row_end();
        }
    } else if (name == "collective_calls") {
        b += "start_ns,track,track_id,collective,group_name,group_description,group_ranks,group_size,sequence,"
             "in_elements,out_elements,dtype\r\n";
        for (const trace::CollectiveCall& e : reader.collective_calls()) {
            fmt::format_to(std::back_inserter(b), "{},{},{},", e.start_ns, e.on_stream ? "stream" : "thread",
                           e.track_id);
            for (trace::StringId id : {e.name_id, e.group_name_id, e.group_desc_id, e.group_ranks_id}) {
                field(b, reader.string(id));
                b += ',';
            }
            fmt::format_to(std::back_inserter(b), "{},{},{},{},", e.group_size, e.sequence, e.in_elements,
                           e.out_elements);
            field(b, reader.string(e.dtype_id));
            row_end();
        }
    } else if (name == "memory_events") {
        b += "time_ns,device_id,action,address,bytes,cuda_stream,device_free_bytes,thread_id,stack\r\n";
        StackText stacks(reader);
        reader.for_each_memory_event([&](const trace::MemoryEvent& e) {
            fmt::format_to(std::back_inserter(b), "{},{},{},{},{},{},{},{},", e.time_ns, e.device_id,
                           trace::memory_action_name(e.action), e.address, e.bytes, e.cuda_stream, e.device_free_bytes,
                           e.thread_id);
            field(b, stacks.of(e.stack_id));
            return row_end();
        });
    } else if (name == "memory_blocks") {
        b += "time_ns,device_id,state,expandable_segment,small_pool,segment_address,segment_bytes,address,bytes,"
             "requested_bytes,cuda_stream,stack\r\n";
        StackText stacks(reader);
        for (const trace::MemoryBlock& e : reader.memory_blocks()) {
            fmt::format_to(std::back_inserter(b), "{},{},{},{},{},{},{},{},{},{},{},", e.time_ns, e.device_id,
                           trace::memory_block_state_name(e.state), e.expandable_segment ? 1 : 0, e.small_pool ? 1 : 0,
                           e.segment_address, e.segment_bytes, e.address, e.bytes, e.requested_bytes, e.cuda_stream);
            field(b, stacks.of(e.stack_id));
            row_end();
        }
    } else {
        throw store::TraceError(store::TraceErrorKind::bad_value, reader.path(),
                                "no CSV table named '" + std::string(name) + "'");
    }
    out.flush();
}

void export_csv_directory(const store::TraceReader& reader, const std::string& directory) {
    std::error_code error;
    std::filesystem::create_directories(directory, error);
    if (error) {
        throw store::TraceError(store::TraceErrorKind::io, directory,
                                "cannot create the directory: " + error.message());
    }
    for (const char* table : kCsvTables) {
        OutputFile out((std::filesystem::path(directory) / (std::string(table) + ".csv")).string());
        export_csv_table(reader, table, out);
        out.close();
    }
}

}  // namespace ember::exporting
