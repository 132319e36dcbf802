// view_state.cpp: zoom, pan, history and ruler ticks (view_state.h).
#include "viewer/model/view_state.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ember::viewer {

using trace::TimeNs;

namespace {
constexpr TimeNs kMinimumSpan = 100;  // ns: below this nothing in a trace differs
}

void ViewState::reset(TimeRange limits, double width_pixels) {
    if (limits.end_ns <= limits.begin_ns) limits.end_ns = limits.begin_ns + kMinimumSpan;
    limits_ = limits;
    visible_ = limits;
    width_pixels_ = std::max(1.0, width_pixels);
    history_.assign(1, visible_);
    history_position_ = 0;
}

void ViewState::set_limits(TimeRange limits) {
    if (limits.end_ns <= limits.begin_ns) limits.end_ns = limits.begin_ns + kMinimumSpan;
    const bool showing_all = visible_ == limits_;
    limits_ = limits;
    if (showing_all) visible_ = limits;
    clamp();
}

void ViewState::set_width(double width_pixels) {
    width_pixels_ = std::max(1.0, width_pixels);
}

double ViewState::ns_per_pixel() const {
    return static_cast<double>(visible_.duration_ns()) / width_pixels_;
}

double ViewState::time_to_x(TimeNs time_ns) const {
    return static_cast<double>(time_ns - visible_.begin_ns) / ns_per_pixel();
}

TimeNs ViewState::x_to_time(double x) const {
    return visible_.begin_ns + static_cast<TimeNs>(std::llround(x * ns_per_pixel()));
}

void ViewState::clamp() {
    const TimeNs limit_span = limits_.duration_ns();
    TimeNs span = std::clamp<TimeNs>(visible_.duration_ns(), kMinimumSpan, 4 * std::max(limit_span, kMinimumSpan));
    visible_.end_ns = visible_.begin_ns + span;
    // Keep at least part of the trace on screen.
    const TimeNs lowest = limits_.begin_ns - span / 2;
    const TimeNs highest = limits_.end_ns - span / 2;
    if (visible_.begin_ns < lowest) visible_.begin_ns = lowest;
    if (visible_.begin_ns > highest) visible_.begin_ns = highest;
    visible_.end_ns = visible_.begin_ns + span;
}

void ViewState::zoom(double factor, double anchor_x) {
    factor = std::clamp(factor, 0.01, 100.0);
    const TimeNs anchor = x_to_time(anchor_x);
    const double new_span = std::max<double>(kMinimumSpan, visible_.duration_ns() * factor);
    const double left_fraction = std::clamp(anchor_x / width_pixels_, 0.0, 1.0);
    visible_.begin_ns = anchor - static_cast<TimeNs>(new_span * left_fraction);
    visible_.end_ns = visible_.begin_ns + static_cast<TimeNs>(new_span);
    clamp();
}

void ViewState::pan_pixels(double dx) {
    const auto shift = static_cast<TimeNs>(std::llround(dx * ns_per_pixel()));
    visible_.begin_ns += shift;
    visible_.end_ns += shift;
    clamp();
}

void ViewState::show(TimeRange range) {
    if (range.end_ns < range.begin_ns) std::swap(range.begin_ns, range.end_ns);
    if (range.duration_ns() < kMinimumSpan) {
        const TimeNs middle = range.begin_ns + range.duration_ns() / 2;
        range = {middle - kMinimumSpan / 2, middle + kMinimumSpan / 2};
    }
    visible_ = range;
    clamp();
    commit_history();
}

void ViewState::commit_history() {
    if (!history_.empty() && history_[history_position_] == visible_) return;
    history_.resize(history_.empty() ? 0 : history_position_ + 1);
    history_.push_back(visible_);
    history_position_ = history_.size() - 1;
    if (history_.size() > 256) {  // bounded: drop the oldest
        history_.erase(history_.begin());
        --history_position_;
    }
}

bool ViewState::back() {
    if (history_.empty()) return false;
    if (history_[history_position_] != visible_) commit_history();  // an uncommitted pan/zoom
    if (history_position_ == 0) return false;
    visible_ = history_[--history_position_];
    return true;
}

bool ViewState::forward() {
    if (history_position_ + 1 >= history_.size()) return false;
    visible_ = history_[++history_position_];
    return true;
}

std::string format_duration(double ns) {
    char text[64];
    const double magnitude = std::fabs(ns);
    if (magnitude < 1e3)
        std::snprintf(text, sizeof text, "%.0f ns", ns);
    else if (magnitude < 1e6)
        std::snprintf(text, sizeof text, "%.3g us", ns / 1e3);
    else if (magnitude < 1e9)
        std::snprintf(text, sizeof text, "%.3g ms", ns / 1e6);
    else
        std::snprintf(text, sizeof text, "%.4g s", ns / 1e9);
    return text;
}

std::string format_bytes(double bytes) {
    char text[64];
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int unit = 0;
    while (std::fabs(bytes) >= 1024.0 && unit < 4) {
        bytes /= 1024.0;
        ++unit;
    }
    std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.3g %s", bytes, units[unit]);
    return text;
}

std::vector<RulerTick> ruler_ticks(const ViewState& view, TimeNs origin_ns, double min_spacing_pixels) {
    std::vector<RulerTick> ticks;
    const double wanted = view.ns_per_pixel() * min_spacing_pixels;  // ns between major ticks
    double step = 1.0;
    while (step * 10.0 <= wanted) step *= 10.0;
    if (step < wanted) step *= 2.0;
    if (step < wanted) step *= 2.5;
    if (step < wanted) step *= 2.0;
    const auto major_step = std::max<TimeNs>(1, static_cast<TimeNs>(step));
    const TimeNs minor_step = std::max<TimeNs>(1, major_step / 5);
    const TimeNs visible_begin = view.visible().begin_ns - origin_ns;
    const TimeNs visible_end = view.visible().end_ns - origin_ns;
    TimeNs tick = visible_begin - (visible_begin % minor_step + minor_step) % minor_step;
    for (; tick <= visible_end && ticks.size() < 1000; tick += minor_step) {
        RulerTick ruler_tick;
        ruler_tick.time_ns = tick + origin_ns;
        ruler_tick.major = tick % major_step == 0;
        if (ruler_tick.major) {
            // The unit follows the step, with just enough decimals to tell ticks apart.
            const double unit = major_step < 1000         ? 1.0
                                : major_step < 1000000    ? 1e3
                                : major_step < 1000000000 ? 1e6
                                                          : 1e9;
            const char* unit_name = unit == 1.0 ? "ns" : unit == 1e3 ? "us" : unit == 1e6 ? "ms" : "s";
            const int decimals = std::clamp(
                static_cast<int>(std::ceil(std::log10(unit / static_cast<double>(major_step)) - 1e-9)), 0, 6);
            char text[64];
            std::snprintf(text, sizeof text, "%.*f %s", decimals, static_cast<double>(tick) / unit, unit_name);
            ruler_tick.label = text;
        }
        ticks.push_back(std::move(ruler_tick));
    }
    return ticks;
}

}  // namespace ember::viewer
