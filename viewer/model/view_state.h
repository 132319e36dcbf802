// view_state.h: the one small struct that says what the timeline shows (visible time
// range and width in pixels), with zoom, pan, zoom history and the time ruler.
#pragma once

#include "profiler/trace/events.h"

#include <cstddef>
#include <string>
#include <vector>

namespace ember::viewer {

struct TimeRange {
    trace::TimeNs begin_ns = 0;
    trace::TimeNs end_ns = 1;
    trace::TimeNs duration_ns() const { return end_ns - begin_ns; }
    bool operator==(const TimeRange&) const = default;
};

class ViewState {
  public:
    // `limits` is the whole trace; the view never leaves it by more than its width.
    void reset(TimeRange limits, double width_pixels);
    void set_width(double width_pixels);
    // The trace grew (live refresh): new limits, same visible range and history; a view
    // that showed the whole trace keeps showing all of it.
    void set_limits(TimeRange limits);

    const TimeRange& visible() const { return visible_; }
    const TimeRange& limits() const { return limits_; }
    double width_pixels() const { return width_pixels_; }
    double ns_per_pixel() const;
    double time_to_x(trace::TimeNs time_ns) const;  // pixels from the left edge
    trace::TimeNs x_to_time(double x) const;

    // Zoom by `factor` (< 1 zooms in) keeping the time under `anchor_x` in place.
    void zoom(double factor, double anchor_x);
    void pan_pixels(double dx);  // positive moves the view to later times
    // Show `range` (clamped; at least 100 ns) and record it in the history.
    void show(TimeRange range);
    void show_all() { show(limits_); }

    // Back/forward through the ranges passed to show() (and zoom/pan settled by
    // commit_history(), which the UI calls when a gesture ends).
    void commit_history();
    bool back();
    bool forward();
    std::size_t history_size() const { return history_.size(); }
    std::size_t history_position() const { return history_position_; }

  private:
    void clamp();
    TimeRange limits_;
    TimeRange visible_;
    double width_pixels_ = 1000.0;
    std::vector<TimeRange> history_;
    std::size_t history_position_ = 0;
};

// A tick of the time ruler.
struct RulerTick {
    trace::TimeNs time_ns = 0;
    bool major = false;
    std::string label;  // major ticks only
};

// Ticks at a 1-2-5 step no closer than `min_spacing_pixels`, labelled relative to
// `origin_ns` in the unit that suits the step ("1.5 ms", "250 us").
std::vector<RulerTick> ruler_ticks(const ViewState& view, trace::TimeNs origin_ns, double min_spacing_pixels = 90.0);

// "12.3 ms", "850 ns", "2.05 s".
std::string format_duration(double nanoseconds);
// "1.5 GiB", "640 KiB", "12 B".
std::string format_bytes(double bytes);

}  // namespace ember::viewer
