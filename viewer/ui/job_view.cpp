// job_view.cpp: the Job tab of ViewerApp — every rank of a job as one compact row on the
// job's aligned clock (job_overview.h): compute blue, waiting in a collective for the
// last rank red, transferring pink, idle dark. Rows in rank order, or the latest / the
// most waiting first. Clicking a collective outlines it on every rank and lists each
// rank's arrival and wait; double-clicking a row opens that rank's lanes in the
// Timeline. Each row is cached as runs of one colour per view, so a frame of 1024 rows
// costs the runs on screen, not the events behind them.
#include "viewer/ui/colors.h"
#include "viewer/ui/viewer_app.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ember::viewer {

namespace {

constexpr float kJobLabelWidth = 86.0f;
constexpr float kJobRulerHeight = 22.0f;
constexpr float kJobMaxRowHeight = 18.0f;
constexpr float kCollectivePanelHeight = 190.0f;

std::uint32_t mix(std::uint32_t from, std::uint32_t to, double amount) {
    amount = std::clamp(amount, 0.0, 1.0);
    auto channel = [&](std::uint32_t a, std::uint32_t b) {
        return static_cast<std::uint32_t>(std::lround(a + (static_cast<double>(b) - a) * amount));
    };
    return colors::rgb(channel(colors::red(from), colors::red(to)), channel(colors::green(from), colors::green(to)),
                       channel(colors::blue(from), colors::blue(to)));
}

// A pixel's colour: the activity that fills most of it, as strong as the pixel is busy
// (in four steps, so neighbours of one kind merge into runs).
std::uint32_t activity_color(const std::array<double, kJobActivityCount>& shares) {
    const double busy = std::min(1.0, shares[0] + shares[1] + shares[2]);
    if (busy < 0.05) return colors::kJobIdle;
    int top = 0;
    for (int a = 1; a < kJobActivityCount; ++a)
        if (shares[a] > shares[top]) top = a;
    const std::uint32_t full = top == 0 ? colors::kJobCompute : top == 1 ? colors::kJobWait : colors::kJobTransfer;
    return mix(colors::kJobIdle, full, std::ceil(busy * 4.0) / 4.0);
}

}  // namespace

void ViewerApp::set_job(std::unique_ptr<JobOverview> job) {
    job_ = std::move(job);
    job_view_initialized_ = false;
    job_runs_.clear();
    selected_collective_.reset();
}

void ViewerApp::open_ranks_in_timeline(const std::vector<int>& rows) {
    if (!job_ || rows.empty()) return;
    std::vector<std::string> traces, shown;
    for (int row : rows) {
        traces.push_back(job_->ranks[static_cast<std::size_t>(row)].trace);
        shown.push_back(job_->ranks[static_cast<std::size_t>(row)].shown_as);
    }
    try {
        const std::vector<trace::TimeNs> shifts = job_->shifts_for(traces);
        auto model = std::make_unique<TraceModel>(traces, &shifts);
        for (std::size_t i = 0; i < shown.size(); ++i) model->set_shown_as(static_cast<int>(i), shown[i]);
        model->start_loading();
        replace_model(std::move(model));
        timeline_rows_ = rows;
        select_tab(ViewTab::timeline);
    } catch (const std::exception& error) {
        status_ = std::string("cannot open the rank: ") + error.what();
    }
}

bool ViewerApp::select_collective(std::size_t order) {
    if (!job_ || order >= job_->job.collectives.size()) return false;
    selected_collective_ = static_cast<std::uint32_t>(order);
    return true;
}

void ViewerApp::show_job_range(TimeRange range) {
    job_range_ = range;
    if (job_view_initialized_) job_view_.show(range);
}

void ViewerApp::set_job_order(JobOrder order) {
    job_order_ = order;
    job_runs_.clear();
}

void ViewerApp::draw_job(float width, float height) {
    job_rects_.clear();
    if (!job_) {
        ImGui::TextWrapped(
            "The Job view shows every rank of a job: open the rank files together, "
            "`ember view rank0.db rank1.db ...` (any trace format).");
        return;
    }
    const JobOverview& job = *job_;
    ImDrawList* draw = ImGui::GetWindowDrawList();

    // --- Header: the verdict, the order, the legend ------------------------------
    if (job.job.straggler)
        ImGui::TextWrapped("straggler: %s", job.job.straggler_evidence.c_str());
    else
        ImGui::TextWrapped(
            "%zu ranks, %lld collectives matched: no rank arrived last markedly more often than the others",
            job.ranks.size(), static_cast<long long>(job.job.matched));
    ImGui::SetNextItemWidth(130);
    int order = static_cast<int>(job_order_);
    if (ImGui::Combo("order##job", &order, "rank\0latest first\0most waiting first\0"))
        set_job_order(static_cast<JobOrder>(order));
    ImGui::SameLine(0, 20);
    legend_swatch(colors::kJobCompute, "compute");
    ImGui::SameLine(0, 14);
    legend_swatch(colors::kJobWait, "waiting for the last rank");
    ImGui::SameLine(0, 14);
    legend_swatch(colors::kJobTransfer, "transfer");
    ImGui::SameLine(0, 14);
    legend_swatch(colors::kJobIdle, "idle");
    ImGui::SameLine(0, 20);
    if (ImGui::Button("Open the straggler and typical ranks")) {
        std::vector<int> rows;
        for (std::size_t r = 0; r < job.ranks.size(); ++r) {
            const std::int32_t rank = job.ranks[r].rank;
            const bool wanted = (job.job.straggler && *job.job.straggler == rank) ||
                                std::find(job.job.reference_ranks.begin(), job.job.reference_ranks.end(), rank) !=
                                    job.job.reference_ranks.end();
            if (wanted) rows.push_back(static_cast<int>(r));
        }
        open_ranks_in_timeline(rows);
    }

    // --- The rows ----------------------------------------------------------------------
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const float panel = selected_collective_ ? kCollectivePanelHeight : 0.0f;
    (void)height;
    const float area_height = std::max(40.0f, ImGui::GetContentRegionAvail().y - panel - 4.0f);
    const float x0 = origin.x + kJobLabelWidth;
    const float time_width = std::max(10.0f, width - kJobLabelWidth);
    if (!job_view_initialized_) {
        job_view_.reset({job.begin_ns, job.end_ns}, time_width);
        job_view_initialized_ = true;
        if (job_range_) job_view_.show(*job_range_);
    }
    job_view_.set_width(time_width);
    const int rows = static_cast<int>(job.ranks.size());
    const float rows_height = area_height - kJobRulerHeight;
    const float row_height = std::clamp(std::floor(rows_height / std::max(1, rows)), 1.0f, kJobMaxRowHeight);
    const float content_height = row_height * static_cast<float>(rows);
    job_scroll_ = std::clamp(job_scroll_, 0.0f, std::max(0.0f, content_height - rows_height));

    ImGui::InvisibleButton("job_area", ImVec2(width, area_height), ImGuiButtonFlags_MouseButtonLeft);
    const bool hovered = ImGui::IsItemHovered();
    ImGuiIO& io = ImGui::GetIO();
    const float mouse_x = io.MousePos.x, mouse_y = io.MousePos.y;
    if (hovered && io.MouseWheel != 0.0f) {
        if (io.KeyShift)
            job_scroll_ -= io.MouseWheel * 3.0f * std::max(row_height, 6.0f);
        else
            job_view_.zoom(std::pow(0.8, io.MouseWheel), std::clamp(mouse_x - x0, 0.0f, time_width));
    }
    if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2.0f)) {
        job_view_.pan_pixels(-io.MouseDelta.x);
        job_scroll_ -= io.MouseDelta.y;
    }

    // Each row's runs of one colour, for this view and order.
    const TimeRange visible = job_view_.visible();
    const int columns = std::max(1, static_cast<int>(time_width));
    if (job_runs_.size() != job.ranks.size() || job_runs_for_ != visible || job_runs_columns_ != columns) {
        job_row_order_ = job.row_order(job_order_);
        job_runs_.assign(job.ranks.size(), {});
        for (int row = 0; row < rows; ++row) {
            std::vector<JobRun>& runs = job_runs_[static_cast<std::size_t>(row)];
            for (int x = 0; x < columns; ++x) {
                const trace::TimeNs start = job_view_.x_to_time(x),
                                    end = std::max(start + 1, job_view_.x_to_time(x + 1));
                const std::uint32_t color = activity_color(job.activity(row, start, end));
                if (!runs.empty() && runs.back().color == color && runs.back().x1 == x)
                    runs.back().x1 = x + 1;
                else
                    runs.push_back({x, x + 1, color});
            }
        }
        job_runs_for_ = visible;
        job_runs_columns_ = columns;
    }

    const float rows_top = origin.y + kJobRulerHeight;
    draw->PushClipRect(ImVec2(origin.x, origin.y), ImVec2(origin.x + width, origin.y + area_height), true);
    // Ruler.
    draw->AddRectFilled(ImVec2(x0, origin.y), ImVec2(x0 + time_width, rows_top), colors::kLaneBackground);
    for (const RulerTick& tick : ruler_ticks(job_view_, job.begin_ns)) {
        const float x = x0 + static_cast<float>(job_view_.time_to_x(tick.time_ns));
        draw->AddLine(ImVec2(x, origin.y + (tick.major ? 4.0f : 14.0f)), ImVec2(x, rows_top),
                      colors::rgb(150, 150, 160));
        if (tick.major) draw->AddText(ImVec2(x + 3, origin.y + 2), colors::rgb(210, 210, 220), tick.label.c_str());
    }
    draw->PopClipRect();
    draw->PushClipRect(ImVec2(origin.x, rows_top), ImVec2(origin.x + width, origin.y + area_height), true);
    const int first = std::max(0, static_cast<int>(job_scroll_ / row_height));
    const int last = std::min(rows, static_cast<int>((job_scroll_ + rows_height) / row_height) + 1);
    const double ns_per_pixel = job_view_.ns_per_pixel();
    // A time's x on screen, kept on the time axis (the labels' column stays clear).
    auto x_of = [&](trace::TimeNs time) {
        return std::clamp(x0 + static_cast<float>(job_view_.time_to_x(time)), x0, x0 + time_width);
    };
    // Rows too thin for a label each: every label_every-th row is labelled (a scale),
    // and the straggler always.
    const float text_height = ImGui::GetTextLineHeight();
    const int label_every =
        row_height >= text_height ? 1 : static_cast<int>(std::ceil((text_height + 2.0f) / row_height));
    std::optional<int> hovered_row;
    for (int position = first; position < last; ++position) {
        const int row = job_row_order_[static_cast<std::size_t>(position)];
        const JobRankRow& rank = job.ranks[static_cast<std::size_t>(row)];
        const float y0 = rows_top + static_cast<float>(position) * row_height - job_scroll_;
        const float y1 = y0 + std::max(1.0f, row_height - (row_height >= 4.0f ? 1.0f : 0.0f));
        const bool straggler = job.job.straggler && *job.job.straggler == rank.rank;
        for (const JobRun& run : job_runs_[static_cast<std::size_t>(row)])
            draw->AddRectFilled(ImVec2(x0 + static_cast<float>(run.x0), y0),
                                ImVec2(x0 + static_cast<float>(run.x1), y1), run.color);
        // Zoomed in, each collective exactly: its wait and its transfer.
        auto mark = std::lower_bound(rank.collectives.begin(), rank.collectives.end(),
                                     visible.begin_ns - static_cast<trace::TimeNs>(ns_per_pixel),
                                     [](const JobCollectiveMark& m, trace::TimeNs t) { return m.arrival_ns < t; });
        if (mark != rank.collectives.begin()) --mark;
        for (; mark != rank.collectives.end() && mark->arrival_ns < visible.end_ns; ++mark) {
            if (static_cast<double>(mark->end_ns - mark->arrival_ns) < 3.0 * ns_per_pixel) continue;
            const float a = x_of(mark->arrival_ns), w = x_of(mark->wait_end_ns), e = x_of(mark->end_ns);
            if (w > a) draw->AddRectFilled(ImVec2(a, y0), ImVec2(std::max(w, a + 1), y1), colors::kJobWait);
            if (e > w) draw->AddRectFilled(ImVec2(w, y0), ImVec2(std::max(e, w + 1), y1), colors::kJobTransfer);
        }
        // The selected collective, outlined on every rank.
        if (selected_collective_) {
            const std::int32_t index = rank.mark_of_collective[*selected_collective_];
            if (index >= 0) {
                const JobCollectiveMark& selected = rank.collectives[static_cast<std::size_t>(index)];
                const float a = x_of(selected.arrival_ns), e = x_of(selected.end_ns);
                draw->AddRect(ImVec2(a - 1, y0 - (row_height >= 3 ? 0.5f : 0.0f)), ImVec2(std::max(e, a + 2) + 1, y1),
                              colors::kSelection, 0.0f, 0, row_height >= 6.0f ? 2.0f : 1.0f);
            }
        }
        if (straggler || position % label_every == 0) {
            char label[32];
            std::snprintf(label, sizeof label, "rank %d", rank.rank);
            const float text_y = std::max(
                rows_top, row_height >= text_height ? y0 + (row_height - text_height) * 0.5f : y0 - text_height * 0.5f);
            if (straggler && row_height < text_height)  // its label stands out of the scale's
                draw->AddRectFilled(ImVec2(origin.x, text_y), ImVec2(x0 - 8, text_y + text_height),
                                    colors::kBackground);
            draw->AddText(ImVec2(origin.x + 4, text_y), straggler ? colors::kJobWait : colors::rgb(170, 170, 185),
                          label);
        }
        if (straggler) draw->AddRectFilled(ImVec2(x0 - 7, y0 - 2), ImVec2(x0 - 2, y1 + 2), colors::kJobWait);
        job_rects_.push_back({rank.rank, x0, y0, x0 + time_width, y1});
        if (hovered && mouse_y >= y0 && mouse_y < y0 + row_height) hovered_row = row;
    }
    // The last arrival of the selected collective: a line across every rank.
    if (selected_collective_) {
        const analysis::CollectiveRow& collective = job.job.collectives[*selected_collective_];
        const float x = x0 + static_cast<float>(job_view_.time_to_x(collective.last_arrival_ns));
        draw->AddLine(ImVec2(x, rows_top), ImVec2(x, origin.y + area_height), colors::kSelection, 1.0f);
    }
    draw->PopClipRect();

    // --- Hover, click, double-click ------------------------------------------------------
    if (hovered_row && mouse_x >= x0) {
        const JobRankRow& rank = job.ranks[static_cast<std::size_t>(*hovered_row)];
        const trace::TimeNs time = job_view_.x_to_time(mouse_x - x0);
        const auto slack = static_cast<trace::TimeNs>(3.0 * ns_per_pixel);
        const std::optional<std::uint32_t> collective = job.collective_at(*hovered_row, time, slack);
        ImGui::BeginTooltip();
        ImGui::Text("rank %d  (%s)", rank.rank, rank.shown_as.c_str());
        if (rank.numbers)
            ImGui::Text("waited %s in %lld collectives; arrived last %lld times; median lateness %s",
                        format_duration(static_cast<double>(rank.numbers->wait_ns)).c_str(),
                        static_cast<long long>(rank.numbers->collectives),
                        static_cast<long long>(rank.numbers->arrived_last),
                        format_duration(static_cast<double>(rank.numbers->median_lateness_ns)).c_str());
        if (collective) {
            const analysis::CollectiveRow& row = job.job.collectives[*collective];
            const JobCollectiveMark& mark =
                rank.collectives[static_cast<std::size_t>(rank.mark_of_collective[*collective])];
            ImGui::Text("%s #%lld %s: arrived %s after the first rank, waited %s", row.communicator.c_str(),
                        static_cast<long long>(row.index), analysis::collective_kind_name(row.kind),
                        format_duration(static_cast<double>(mark.arrival_ns - row.first_arrival_ns)).c_str(),
                        format_duration(static_cast<double>(mark.wait_end_ns - mark.arrival_ns)).c_str());
            ImGui::TextUnformatted("click: outline it on every rank");
        }
        ImGui::TextUnformatted("double-click: this rank's lanes in the Timeline");
        ImGui::EndTooltip();
        if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
            std::vector<int> open = timeline_rows_;
            if (std::find(open.begin(), open.end(), *hovered_row) == open.end()) open.push_back(*hovered_row);
            open_ranks_in_timeline(open);
        } else if (ImGui::IsMouseReleased(ImGuiMouseButton_Left) &&
                   !ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2.0f)) {
            selected_collective_ = collective;
        }
    }
    if (selected_collective_) draw_job_collective(width, panel);
}

// The selected collective: what it was, and every rank's arrival and wait, latest first.
void ViewerApp::draw_job_collective(float width, float height) {
    const JobOverview& job = *job_;
    const analysis::CollectiveRow& collective = job.job.collectives[*selected_collective_];
    ImGui::BeginChild("job_collective", ImVec2(width, height - 4.0f), true);
    ImGui::Text("%s #%lld, %s on %d ranks: the last arrived %s after the first%s; they waited %s in all",
                collective.communicator.c_str(), static_cast<long long>(collective.index),
                analysis::collective_kind_name(collective.kind), collective.ranks,
                format_duration(static_cast<double>(collective.last_arrival_ns - collective.first_arrival_ns)).c_str(),
                collective.last_rank >= 0 ? (" (rank " + std::to_string(collective.last_rank) + ")").c_str() : "",
                format_duration(static_cast<double>(collective.total_wait_ns)).c_str());
    struct Arrival {
        std::int32_t rank;
        trace::TimeNs arrival, wait;
    };
    std::vector<Arrival> arrivals;
    for (const JobRankRow& rank : job.ranks) {
        const std::int32_t index = rank.mark_of_collective[*selected_collective_];
        if (index < 0) continue;
        const JobCollectiveMark& mark = rank.collectives[static_cast<std::size_t>(index)];
        arrivals.push_back(
            {rank.rank, mark.arrival_ns - collective.first_arrival_ns, mark.wait_end_ns - mark.arrival_ns});
    }
    std::sort(arrivals.begin(), arrivals.end(),
              [](const Arrival& a, const Arrival& b) { return a.arrival > b.arrival; });
    if (ImGui::BeginTable("arrivals", 3,
                          ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV)) {
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("rank");
        ImGui::TableSetupColumn("arrived after the first");
        ImGui::TableSetupColumn("waited");
        ImGui::TableHeadersRow();
        ImGuiListClipper clipper;
        clipper.Begin(static_cast<int>(arrivals.size()));
        while (clipper.Step()) {
            for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
                const Arrival& a = arrivals[static_cast<std::size_t>(i)];
                ImGui::TableNextRow();
                ImGui::TableNextColumn();
                ImGui::Text("%d", a.rank);
                ImGui::TableNextColumn();
                ImGui::TextUnformatted(format_duration(static_cast<double>(a.arrival)).c_str());
                ImGui::TableNextColumn();
                ImGui::TextUnformatted(format_duration(static_cast<double>(a.wait)).c_str());
            }
        }
        ImGui::EndTable();
    }
    ImGui::EndChild();
}

}  // namespace ember::viewer
