// sample_stacks.cpp: per-thread stack charts from CPU samples (sample_stacks.h).
#include "viewer/model/sample_stacks.h"

#include "profiler/store/reader.h"
#include "profiler/store/schema.h"
#include "viewer/model/trace_model.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>

namespace ember::viewer {

using trace::TimeNs;

std::size_t SampleStackLane::memory_bytes() const {
    std::size_t bytes = sizeof(SampleStackLane);
    for (const std::vector<StackRow>* chart : {&active, &with_idle})
        for (const StackRow& row : *chart) bytes += sizeof(StackRow) + row.boxes.capacity() * sizeof(StackBox);
    return bytes;
}

TimeNs recorded_sample_period_ns(const store::TraceReader& reader) {
    const std::optional<std::string> text = reader.metadata(store::metadata_key::cpu_sample_period_ns);
    if (!text) return 0;
    TimeNs period = 0;
    const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), period);
    return error == std::errc() && end == text->data() + text->size() && period > 0 ? period : 0;
}

namespace {

// The median interval between consecutive samples, or `fallback` with fewer than two.
TimeNs sample_period(const std::vector<StackSampleRef>& samples, TimeNs fallback) {
    std::vector<TimeNs> intervals;
    intervals.reserve(samples.size());
    for (std::size_t index = 1; index < samples.size(); ++index)
        if (samples[index].time_ns > samples[index - 1].time_ns)
            intervals.push_back(samples[index].time_ns - samples[index - 1].time_ns);
    if (intervals.empty()) return fallback;
    auto middle = intervals.begin() + static_cast<std::ptrdiff_t>(intervals.size() / 2);
    std::nth_element(intervals.begin(), middle, intervals.end());
    return std::max<TimeNs>(1, *middle);
}

// Adds the samples to `rows`: a sample extends the open box of every depth whose frames
// from the root down match the previous sample's, when it starts where the previous one
// ended and is in the same state; deeper frames open new boxes.
void add_samples(const std::vector<StackSampleRef>& samples, const std::vector<TimeNs>& ends,
                 const std::unordered_map<trace::StackId, std::vector<std::uint32_t>>& stack_frames, bool include_idle,
                 std::vector<StackRow>& rows) {
    static const std::vector<std::uint32_t> kNoFrames;
    const std::vector<std::uint32_t>* previous = &kNoFrames;
    TimeNs previous_end = 0;
    bool previous_idle = false, have_previous = false;
    for (std::size_t index = 0; index < samples.size(); ++index) {
        const StackSampleRef& sample = samples[index];
        if (sample.idle && !include_idle) {
            have_previous = false;  // a gap: the boxes around it do not join
            continue;
        }
        auto found = stack_frames.find(sample.stack_id);
        const std::vector<std::uint32_t>& frames = found == stack_frames.end() ? kNoFrames : found->second;
        const TimeNs start = sample.time_ns, end = ends[index];
        std::size_t common = 0;
        if (have_previous && previous_end == start && previous_idle == sample.idle) {
            const std::size_t limit = std::min(previous->size(), frames.size());
            while (common < limit && (*previous)[common] == frames[common]) ++common;
        }
        if (rows.size() < frames.size()) rows.resize(frames.size());
        for (std::size_t depth = 0; depth < common; ++depth) {
            StackBox& box = rows[depth].boxes.back();
            box.end_ns = end;
            box.samples = box.samples + 1;
        }
        for (std::size_t depth = common; depth < frames.size(); ++depth) {
            StackBox box;
            box.start_ns = start;
            box.end_ns = end;
            box.frame = frames[depth];
            box.samples = 1;
            box.idle = sample.idle ? 1 : 0;
            rows[depth].boxes.push_back(box);
        }
        previous = &frames;
        previous_end = end;
        previous_idle = sample.idle;
        have_previous = true;
    }
    for (StackRow& row : rows) row.boxes.shrink_to_fit();
}

}  // namespace

SampleStackLane build_sample_stack_lane(
    const std::vector<StackSampleRef>& samples,
    const std::unordered_map<trace::StackId, std::vector<std::uint32_t>>& stack_frames, TimeNs fallback_period_ns,
    bool with_idle, TimeNs recorded_period_ns) {
    SampleStackLane lane;
    lane.samples = static_cast<std::int64_t>(samples.size());
    for (const StackSampleRef& sample : samples) lane.idle_samples += sample.idle ? 1 : 0;
    lane.period_ns = recorded_period_ns > 0 ? recorded_period_ns : sample_period(samples, fallback_period_ns);
    // Where each sample's time ends: at the next sample, unless the thread went
    // unsampled for more than two periods.
    std::vector<TimeNs> ends(samples.size());
    for (std::size_t index = 0; index < samples.size(); ++index) {
        const TimeNs start = samples[index].time_ns;
        const bool next_close = index + 1 < samples.size() && samples[index + 1].time_ns - start <= 2 * lane.period_ns;
        ends[index] = next_close ? samples[index + 1].time_ns : start + lane.period_ns;
    }
    add_samples(samples, ends, stack_frames, false, lane.active);
    if (with_idle) add_samples(samples, ends, stack_frames, true, lane.with_idle);
    return lane;
}

std::vector<std::uint32_t> stack_of_box(const std::vector<StackRow>& rows, int depth, std::size_t index) {
    std::vector<std::uint32_t> stack;
    if (depth < 0 || depth >= static_cast<int>(rows.size())) return stack;
    const std::vector<StackBox>& own = rows[static_cast<std::size_t>(depth)].boxes;
    if (index >= own.size()) return stack;
    const TimeNs start = own[index].start_ns;
    stack.resize(static_cast<std::size_t>(depth) + 1);
    stack.back() = own[index].frame;
    // A box's parents hold its first sample: the box of each row above that started last
    // at or before it.
    for (int above = depth - 1; above >= 0; --above) {
        const std::vector<StackBox>& boxes = rows[static_cast<std::size_t>(above)].boxes;
        auto parent = std::partition_point(boxes.begin(), boxes.end(),
                                           [start](const StackBox& box) { return box.start_ns <= start; });
        stack[static_cast<std::size_t>(above)] = parent == boxes.begin() ? 0 : std::prev(parent)->frame;
    }
    return stack;
}

}  // namespace ember::viewer
