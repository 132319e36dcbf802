// collective_args.cpp: the collective_calls table, by event, under Kineto's keys.
#include "profiler/export/collective_args.h"

namespace ember::exporting {

CollectiveArgs::CollectiveArgs(const store::TraceReader& reader) : reader_(reader), calls_(reader.collective_calls()) {
    for (const trace::CollectiveCall& call : calls_) by_event_[{call.on_stream, call.track_id, call.start_ns}] = &call;
}

const trace::CollectiveCall* CollectiveArgs::find(bool on_stream, std::uint32_t track, trace::TimeNs start) const {
    if (by_event_.empty()) return nullptr;
    auto found = by_event_.find({on_stream, track, start});
    return found != by_event_.end() ? found->second : nullptr;
}

void CollectiveArgs::for_each_arg(const trace::CollectiveCall& call, const Text& text, const Number& number) const {
    auto string = [&](std::string_view key, trace::StringId id) {
        if (id != trace::kNoString) text(key, reader_.string(id));
    };
    auto count = [&](std::string_view key, std::int64_t value) {
        if (value >= 0) number(key, value);
    };
    string("Collective name", call.name_id);
    string("Process Group Name", call.group_name_id);
    string("Process Group Description", call.group_desc_id);
    string("Process Group Ranks", call.group_ranks_id);
    count("Group size", call.group_size);
    count("Seq", call.sequence);
    count("In msg nelems", call.in_elements);
    count("Out msg nelems", call.out_elements);
    string("dtype", call.dtype_id);
}

}  // namespace ember::exporting
