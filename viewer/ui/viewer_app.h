// viewer_app.h: ViewerApp, the state of one viewer window (model, view, selection,
// search, caches) and the ImGui drawing of its views. Split by feature like Tracy:
//   viewer_app.cpp      frame layout, toolbar, search, details panel, keyboard
//   timeline_view.cpp   lanes, ruler, LOD boxes, counters, flows, range selection
//   flamegraph_view.cpp flamegraphs (single and difference)
//   stats_view.cpp      sortable kernel / copy / range / step tables
//   breakdown_view.cpp  the GPU breakdowns per rank and per step (gpu_analysis.h)
//   diff_view.cpp       two runs compared: aligned timelines and the diff tables (run_diff.h)
//   job_view.cpp        every rank of a job as one row (job_overview.h)
// The app only draws what viewer/model computes.
#pragma once

#include "viewer/model/event_details.h"
#include "viewer/model/flamegraph.h"
#include "viewer/model/gpu_analysis.h"
#include "viewer/model/job_overview.h"
#include "viewer/model/lane_layout.h"
#include "viewer/model/lod.h"
#include "viewer/model/run_diff.h"
#include "viewer/model/search.h"
#include "viewer/model/statistics.h"
#include "viewer/model/trace_model.h"
#include "viewer/model/view_state.h"

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

struct ImDrawList;

namespace ember::viewer {

enum class ViewTab { timeline = 0, flamegraph = 1, stats = 2, breakdown = 3, diff = 4, job = 5 };

// Where the Job tab drew a rank's row on the last frame (screen pixels); written out by
// `--layout` for the screenshot tests.
struct JobRowRect {
    std::int32_t rank = 0;
    float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

// Where the timeline put a lane on the last frame (screen pixels); written out by
// `--layout` for the screenshot tests. A stream lane has up to three: its events
// ("lane"), its idle gaps ("idle") and its queue length ("queue").
struct LaneRect {
    int lane = 0;
    float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    const char* track = "lane";
};

// Where a timeline track is drawn on this frame (screen pixels: the time axis's left
// edge, the track's top, the axis's width) and where the pointer is.
struct TrackArea {
    float x0 = 0, y0 = 0, width = 0;
    float mouse_x = 0, mouse_y = 0;
};

// A box of a thread's stack chart (sample_stacks.h): its lane, depth and index in the
// row of the chart shown (with or without idle samples).
struct StackBoxRef {
    int lane = -1;
    int depth = 0;
    std::uint32_t index = 0;
    bool with_idle = false;
    bool valid() const { return lane >= 0; }
    bool operator==(const StackBoxRef&) const = default;
};

// Counters of the last frame, for --bench.
struct FrameCounters {
    int primitives = 0;  // rectangles, lines and polylines the timeline/flamegraph added
    int lanes_drawn = 0;
};

// A small colour square and its label on one line (legends of the toolbar and panels).
void legend_swatch(std::uint32_t color, const char* label);

class ViewerApp {
  public:
    // Takes ownership of an opened model (may be null: then `error` is shown).
    ViewerApp(std::unique_ptr<TraceModel> model, std::string error);
    ~ViewerApp();

    // One frame of widgets filling the whole display.
    void draw_frame(float width, float height);

    // --- Control from the command line / bench ----------------------------------
    void select_tab(ViewTab tab) {
        tab_ = tab;
        tab_requested_ = true;
    }
    ViewState& view() { return view_; }
    SampleTracks& sample_tracks() { return sample_tracks_; }
    TraceModel* model() { return model_.get(); }
    void replace_model(std::unique_ptr<TraceModel> model);
    // --attach/--watch: appends what a background TraceModel::read_new_events() found
    // (between frames) and drops what the new events make stale.
    RefreshResult apply_live_events(TraceDelta& delta);
    // Difference flamegraph: files[0] is the baseline, files[1] the current one.
    void set_flame_difference(bool on) {
        flame_difference_ = on;
        flame_dirty_ = true;
    }
    void set_flame_source(FlameSource source) {
        flame_source_ = source;
        flame_dirty_ = true;
    }
    void set_selection_range(TimeRange range);
    // What clicking a step in the Breakdown panel does: the timeline framed on step
    // `step` (its number there) of the panel's rank, the step selected. False when the
    // rank has no such step or the breakdowns are not computed yet.
    bool show_step_number(std::int64_t step);
    // The diff mode (two files: files[0] is A, files[1] is B). start_diff() computes the
    // diff in the background once the model is loaded; the Diff tab draws it. For
    // --screenshot, wait_for_diff() blocks until it is there and applies the alignment
    // (false, with the reason in `error`, when the files cannot be compared).
    void start_diff(int align_step = 0);  // the step B is aligned on (align_diff)
    bool wait_for_diff(std::string* error);
    const RunDiff* run_diff() const { return run_diff_.get(); }
    // B shifted so its step at `step_index` (position, from 0) starts where A's does;
    // -1 puts B back on the recorded clocks. False when a run has no such step. The view
    // shows the whole trace, or with `frame_step` that step and a little around it.
    bool align_diff(int step_index, bool frame_step = false);
    // What clicking a row of the diff tables does: the first table (kernels, ranges,
    // api, CPU functions) with a row `name` selects it and highlights its events.
    bool select_diff_row(const std::string& name);
    const FrameCounters& frame_counters() const { return counters_; }
    const std::vector<LaneRect>& lane_rects() const { return lane_rects_; }
    bool wants_quit() const { return quit_; }
    void set_status(std::string status) { status_ = std::move(status); }
    // The search box's query (plain text) run forward from the visible range's start:
    // the first match is selected and revealed (details, flow arrow). False when
    // nothing matches.
    bool search_and_select(const std::string& text);
    // The first GPU memory lane (allocated bytes) clicked at `from_start` after the
    // trace's start; false when there is none.
    bool select_memory_at(trace::TimeNs from_start);

    // --- The job of several ranks (job_view.cpp) ---------------------------------------
    // The overview of every rank; the Job tab appears with it.
    void set_job(std::unique_ptr<JobOverview> job);
    const JobOverview* job() const { return job_.get(); }
    // The Timeline shows the lanes of these rows of the overview (by index), shifted onto
    // the job's clock; what double-clicking a row does (with the rows already shown).
    void open_ranks_in_timeline(const std::vector<int>& rows);
    void set_timeline_rows(std::vector<int> rows) { timeline_rows_ = std::move(rows); }
    // What clicking a collective does: the `order`-th of the job's collectives (by first
    // arrival) outlined on every rank, its arrivals listed. False when there is no such one.
    bool select_collective(std::size_t order);
    void set_job_order(JobOrder order);
    // The Job view shows `range` (of the job's clock).
    void show_job_range(TimeRange range);
    const std::vector<JobRowRect>& job_rects() const { return job_rects_; }

  private:
    void draw_toolbar();
    void draw_error_dialog();
    void draw_details_panel(float width, float height);
    void draw_timeline(float width, float height);
    void draw_flamegraph(float width, float height);
    void draw_stats(float width, float height);
    void draw_breakdown(float width, float height);
    // The Breakdown tab's sections (breakdown_view.cpp).
    void draw_breakdown_ranks(const GpuAnalysis& gpu, float width);
    void draw_breakdown_rank(const GpuAnalysis& gpu, const RankBreakdown& rank, float width);
    void draw_breakdown_steps(const GpuAnalysis& gpu, const RankBreakdown& rank, float width);
    void draw_diff(float width, float height);
    void draw_job(float width, float height);
    void draw_job_collective(float width, float height);
    void draw_diff_summary(float width, float height);
    void draw_diff_names(float width, float height);
    void update_run_diff();
    void select_diff_row(DiffTable table, const std::string& name);
    bool diff_mode() const { return tab_ == ViewTab::diff && model_ && model_->files().size() >= 2; }
    void draw_step_markers(ImDrawList* draw, float x0, float width, float y_origin);
    void draw_stream_tracks_toggles();
    void draw_sample_tracks_toggles();
    void update_gpu_analysis();
    void show_on_timeline(TimeRange range);
    void show_step(const StepSplit& step);
    void handle_keys();
    // Timeline helpers (timeline_view.cpp). draw_timeline's sections share the area
    // and the pointer of the frame.
    struct TimelineFrame {
        float left = 0, top = 0, width = 0, height = 0;  // the whole area, lane titles included
        float x0 = 0, timeline_width = 0;                // the time axis
        float lanes_top = 0;                             // below the ruler
        float mouse_x = 0, mouse_y = 0;
        bool hovered = false;
    };
    void handle_timeline_input(const TimelineFrame& frame);
    int draw_timeline_lanes(const TimelineFrame& frame);
    void handle_timeline_clicks(const TimelineFrame& frame, int clicked_title);
    void draw_ruler(ImDrawList* draw, float x0, float y0, float width);
    void draw_lane_rows(ImDrawList* draw, const Lane& lane, int lane_index, const LanePlacement& placement,
                        const TrackArea& area);
    void draw_counter(ImDrawList* draw, const Lane& lane, float x0, float y0, float width, float height);
    void draw_idle_gaps(ImDrawList* draw, const StreamOverlay& overlay, const TrackArea& area);
    void draw_queue(ImDrawList* draw, const StreamOverlay& overlay, const TrackArea& area, float height);
    void draw_sample_stacks(ImDrawList* draw, int lane_index, const SampleStackLane& stacks, int rows,
                            const TrackArea& area);
    void draw_stack_tooltip();
    void select_stack_box(const StackBoxRef& ref);
    void draw_flow(ImDrawList* draw, float x0, float y_origin);
    bool event_position(const EventRef& ref, float x0, float y_origin, float* x, float* y) const;

    // Nothing selected: no event, stack box or memory time, no details, no flow arrow.
    void clear_selection();
    // The model changed: the statistics, flamegraph, range summary and search count are
    // computed again.
    void invalidate_derived();
    void select_event(const EventRef& ref, bool reveal);
    // A GPU memory lane clicked at `time`: what was live then, in the details panel.
    void select_memory_time(int lane, trace::TimeNs time);
    void reveal_event(const EventRef& ref);
    void run_search(bool forward);

    std::unique_ptr<TraceModel> model_;
    std::string error_;
    std::string status_;
    bool quit_ = false;
    ViewTab tab_ = ViewTab::timeline;
    bool tab_requested_ = true;

    // Timeline.
    ViewState view_;
    bool view_initialized_ = false;
    std::vector<LaneDisplay> lane_order_;
    LaneDrag lane_drag_;  // a lane title being dragged (reorder)
    std::vector<LanePlacement> placements_;
    std::vector<LaneRect> lane_rects_;
    std::vector<DrawItem> items_;  // reused every frame: no allocation when idle
    std::vector<CounterColumn> counter_columns_;
    LayoutMetrics metrics_;
    float scroll_y_ = 0.0f;
    float lanes_top_ = 0.0f;  // screen y of the lane area's top, last frame
    float timeline_x0_ = 0.0f;
    bool dragging_pan_ = false;
    bool dragging_select_ = false;
    trace::TimeNs select_anchor_ns_ = 0;
    std::optional<TimeRange> selection_range_;
    std::optional<Statistics> range_summary_;
    EventRef selected_;
    std::optional<EventRef> flow_partner_;
    std::vector<std::pair<std::string, std::string>> selected_details_;
    std::vector<LiveBlockLink> live_blocks_;  // a memory lane clicked: its largest live blocks
    EventRef hovered_;
    int hovered_fold_count_ = 0;
    // The idle gap (or bin of gaps) and the queue track under the pointer, last frame.
    std::optional<GapItem> hovered_gap_;
    std::optional<IdleCategory> hovered_gap_category_;  // a single gap's category
    struct QueueHover {
        trace::TimeNs time_ns = 0;
        double min_value = 0.0, max_value = 0.0;  // over the pixel column
        double max = 0.0;                         // the stream's maximum
    };
    std::optional<QueueHover> hovered_queue_;
    StreamTracks stream_tracks_;  // toolbar toggles: idle gaps, queue
    SampleTracks sample_tracks_;  // toolbar: stacks on thread lanes, idle samples, depth
    // The stack box (or fold of boxes: count > 1) under the pointer, and the clicked one.
    StackBoxRef hovered_stack_;
    DrawItem hovered_stack_item_;
    StackBoxRef selected_stack_;
    std::vector<GapItem> gap_items_;  // reused every frame
    FrameCounters counters_;

    // Search.
    char search_text_[256] = {};
    bool search_regex_ = false;
    EventSearch search_;
    std::string search_error_;
    std::int64_t search_count_ = -1;

    // Flamegraph.
    FlameSource flame_source_ = FlameSource::nvtx_ranges;
    FlameOrder flame_order_ = FlameOrder::left_heavy;
    bool flame_difference_ = false;
    bool flame_dirty_ = true;
    FlameGraph flame_;
    std::uint32_t flame_focus_ = 0;
    std::vector<FlameBox> flame_boxes_;

    // Stats.
    std::optional<Statistics> stats_;
    int stats_lanes_ready_ = -1;

    // GPU breakdowns. A live file that grew is analysed again in the background
    // (model's own readers), at most every few seconds; the result replaces the old
    // one between frames. Declared after model_ so it is waited for before the model goes.
    int breakdown_rank_ = 0;               // index into GpuAnalysis::ranks
    std::vector<std::size_t> step_order_;  // the steps table's rows (sorted indexes)
    const GpuAnalysis* step_order_for_ = nullptr;
    int step_order_rank_ = -1;
    std::future<std::unique_ptr<GpuAnalysis>> analysis_pending_;
    std::chrono::steady_clock::time_point analysis_started_{};

    // Job. The rows' colours are cached as runs per view (job_runs_for_, columns).
    struct JobRun {
        int x0 = 0, x1 = 0;
        std::uint32_t color = 0;
    };
    std::unique_ptr<JobOverview> job_;
    ViewState job_view_;
    bool job_view_initialized_ = false;
    float job_scroll_ = 0.0f;
    JobOrder job_order_ = JobOrder::rank;
    std::vector<std::vector<JobRun>> job_runs_;  // by row
    std::vector<int> job_row_order_;
    TimeRange job_runs_for_;
    int job_runs_columns_ = 0;
    std::optional<std::uint32_t> selected_collective_;
    std::optional<TimeRange> job_range_;
    std::vector<int> timeline_rows_;  // the overview rows whose lanes the Timeline shows
    std::vector<JobRowRect> job_rects_;

    // Diff mode. The diff reads the files with its own readers in the background; B's
    // lanes are shifted (TraceModel::shift_file) between frames once it is there.
    bool diff_wanted_ = false;
    std::future<std::unique_ptr<RunDiff>> diff_pending_;
    std::unique_ptr<RunDiff> run_diff_;
    trace::TimeNs diff_clock_shift_ = 0;       // file 1's shift on the recorded clocks
    int diff_align_step_ = 0;                  // the step B is aligned on; -1: recorded clocks
    int diff_table_ = 0;                       // DiffTable shown
    std::optional<DiffTable> diff_row_table_;  // the clicked row
    std::string diff_row_name_;
    std::vector<std::int64_t> diff_row_matches_;  // its events per file
};

}  // namespace ember::viewer
