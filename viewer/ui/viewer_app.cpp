// viewer_app.cpp: the frame layout (toolbar, view tabs, details panel), search,
// selection and keyboard handling of ViewerApp (viewer_app.h).
#include "viewer/ui/viewer_app.h"

#include "viewer/model/event_details.h"
#include "viewer/ui/colors.h"

#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <cstdio>

namespace ember::viewer {

namespace {
constexpr float kDetailsWidth = 340.0f;
// ImGui 1.86 indexes keys by the backend's (GLFW) key codes.
int key(ImGuiKey named) {
    return ImGui::GetKeyIndex(named);
}
}  // namespace

ViewerApp::ViewerApp(std::unique_ptr<TraceModel> model, std::string error)
    : model_(std::move(model)), error_(std::move(error)) {
    if (model_) lane_order_ = default_lane_order(*model_);
}

ViewerApp::~ViewerApp() = default;

void ViewerApp::replace_model(std::unique_ptr<TraceModel> model) {
    // A background analysis reads the old model's files: let it finish first.
    if (analysis_pending_.valid()) analysis_pending_.wait();
    analysis_pending_ = {};
    breakdown_rank_ = 0;
    if (diff_pending_.valid()) diff_pending_.wait();
    diff_pending_ = {};
    run_diff_.reset();  // computed again for the new model when the diff mode is on
    diff_row_table_.reset();
    // Keep the visible range and the lane order where lanes still exist.
    const bool same_shape = model_ && model && model->lane_count() == model_->lane_count();
    model_ = std::move(model);
    if (!same_shape) lane_order_ = default_lane_order(*model_);
    const TimeRange visible = view_.visible();
    view_.reset({model_->begin_ns(), model_->end_ns()}, view_.width_pixels());
    if (same_shape) view_.show(visible);
    lane_drag_ = {};
    clear_selection();
    hovered_stack_ = {};
    invalidate_derived();
}

RefreshResult ViewerApp::apply_live_events(TraceDelta& delta) {
    RefreshResult result = model_->apply_new_events(delta);
    if (result.events == 0) return result;
    extend_lane_order(lane_order_, *model_);
    view_.set_limits({model_->begin_ns(), model_->end_ns()});
    if (result.events_moved) {  // indexes into rows changed: a kept EventRef could name another event
        clear_selection();
        hovered_ = {};
        hovered_stack_ = {};
    }
    invalidate_derived();
    return result;
}

void ViewerApp::clear_selection() {
    selected_ = {};
    selected_stack_ = {};
    flow_partner_.reset();
    selected_details_.clear();
    live_blocks_.clear();
}

void ViewerApp::invalidate_derived() {
    stats_.reset();
    stats_lanes_ready_ = -1;
    flame_dirty_ = true;
    range_summary_.reset();
    search_count_ = -1;
}

void ViewerApp::set_selection_range(TimeRange range) {
    selection_range_ = range;
    range_summary_.reset();
}

void ViewerApp::select_event(const EventRef& ref, bool reveal) {
    clear_selection();
    selected_ = ref;
    if (!model_ || model_->event(ref) == nullptr) return;
    for (const DetailLine& line : describe_event(*model_, ref)) selected_details_.emplace_back(line.key, line.value);
    flow_partner_ = find_flow_partner(*model_, ref);
    if (reveal) reveal_event(ref);
}

void ViewerApp::select_memory_time(int lane, trace::TimeNs time) {
    clear_selection();
    if (!model_) return;
    for (const DetailLine& line : describe_memory_at(*model_, lane, time))
        selected_details_.emplace_back(line.key, line.value);
    live_blocks_ = live_blocks_at(*model_, lane, time);
}

bool ViewerApp::select_memory_at(trace::TimeNs from_start) {
    if (!model_) return false;
    for (int lane = 0; lane < model_->lane_count(); ++lane) {
        if (model_->lane(lane).kind != LaneKind::memory || model_->lane(lane).reserved_memory) continue;
        select_memory_time(lane, model_->begin_ns() + from_start);
        return true;
    }
    return false;
}

void ViewerApp::select_stack_box(const StackBoxRef& ref) {
    clear_selection();
    const SampleStackLane* stacks = model_ ? model_->sample_stacks(ref.lane) : nullptr;
    if (stacks == nullptr || ref.depth < 0 || ref.depth >= stacks->depth(ref.with_idle)) return;
    const std::vector<StackRow>& chart = stacks->rows(ref.with_idle);
    const std::vector<StackBox>& boxes = chart[static_cast<std::size_t>(ref.depth)].boxes;
    if (ref.index >= boxes.size()) return;
    selected_stack_ = ref;
    const StackBox& box = boxes[ref.index];
    const Lane& lane = model_->lane(ref.lane);
    const std::vector<std::string>& names = model_->files()[static_cast<std::size_t>(lane.file_index)].frame_names;
    auto name_of = [&names](std::uint32_t frame) { return frame < names.size() ? names[frame] : std::string("?"); };
    selected_details_.emplace_back("frame", name_of(box.frame));
    selected_details_.emplace_back("kind", box.idle ? "sampled stack frame (thread idle)" : "sampled stack frame");
    selected_details_.emplace_back("thread", lane.group + " / " + lane.title);
    selected_details_.emplace_back("samples", std::to_string(box.samples) + " (one every " +
                                                  format_duration(static_cast<double>(stacks->period_ns)) + ")");
    selected_details_.emplace_back("duration", format_duration(static_cast<double>(box.duration_ns())));
    selected_details_.emplace_back("start", format_duration(static_cast<double>(box.start_ns - model_->begin_ns())));
    selected_details_.emplace_back("depth", std::to_string(ref.depth));
    std::string stack_text;
    for (std::uint32_t frame : stack_of_box(chart, ref.depth, ref.index)) {
        if (!stack_text.empty()) stack_text += "\n";
        stack_text += name_of(frame);
    }
    selected_details_.emplace_back("stack", stack_text);
}

void ViewerApp::reveal_event(const EventRef& ref) {
    const TimelineEvent* event = model_->event(ref);
    if (event == nullptr) return;
    // Keep the current zoom when the event fits, centred; otherwise frame it.
    const trace::TimeNs span = view_.visible().duration_ns();
    if (event->duration_ns() < span / 2) {
        const trace::TimeNs middle = event->start_ns + event->duration_ns() / 2;
        view_.show({middle - span / 2, middle + span / 2});
    } else {
        const trace::TimeNs pad = event->duration_ns() / 10 + 1;
        view_.show({event->start_ns - pad, event->end_ns + pad});
    }
    for (const LanePlacement& placement : placements_)
        if (placement.lane == ref.lane) scroll_y_ = std::max(0.0f, placement.y - 40.0f);
    if (tab_ != ViewTab::diff) tab_ = ViewTab::timeline;  // the diff mode shows its own timelines
    tab_requested_ = true;
}

void ViewerApp::run_search(bool forward) {
    if (!model_) return;
    SearchQuery query;
    query.text = search_text_;
    query.regex = search_regex_;
    search_error_.clear();
    if (!search_.set_query(*model_, query, &search_error_)) return;
    search_count_ = search_.count(*model_);
    const trace::TimeNs from = view_.visible().begin_ns;
    auto found =
        forward ? search_.next(*model_, selected_, from) : search_.previous(*model_, selected_, view_.visible().end_ns);
    if (found) select_event(*found, true);
}

bool ViewerApp::search_and_select(const std::string& text) {
    const std::size_t length = std::min(text.size(), sizeof search_text_ - 1);
    text.copy(search_text_, length);
    search_text_[length] = '\0';
    search_regex_ = false;
    selected_ = {};
    run_search(true);
    return selected_.valid();
}

void ViewerApp::handle_keys() {
    ImGuiIO& io = ImGui::GetIO();
    if (io.WantTextInput) return;
    if (ImGui::IsKeyPressed(key(ImGuiKey_LeftArrow)) && io.KeyAlt)
        view_.back();
    else if (ImGui::IsKeyPressed(key(ImGuiKey_RightArrow)) && io.KeyAlt)
        view_.forward();
    else if (ImGui::IsKeyPressed(key(ImGuiKey_Backspace)))
        view_.back();
    else if (ImGui::IsKeyDown(key(ImGuiKey_LeftArrow)))
        view_.pan_pixels(-20.0);
    else if (ImGui::IsKeyDown(key(ImGuiKey_RightArrow)))
        view_.pan_pixels(20.0);
    if (ImGui::IsKeyReleased(key(ImGuiKey_LeftArrow)) || ImGui::IsKeyReleased(key(ImGuiKey_RightArrow)))
        view_.commit_history();
    if (ImGui::IsKeyPressed(GLFW_KEY_KP_ADD) || ImGui::IsKeyPressed(GLFW_KEY_EQUAL))
        view_.zoom(0.7, view_.width_pixels() / 2), view_.commit_history();
    if (ImGui::IsKeyPressed(GLFW_KEY_KP_SUBTRACT) || ImGui::IsKeyPressed(GLFW_KEY_MINUS))
        view_.zoom(1.0 / 0.7, view_.width_pixels() / 2), view_.commit_history();
    if (ImGui::IsKeyPressed(key(ImGuiKey_Home))) view_.show_all();
    if (ImGui::IsKeyPressed(key(ImGuiKey_Z)) && selection_range_) view_.show(*selection_range_);
    if (ImGui::IsKeyPressed(GLFW_KEY_F3)) run_search(!io.KeyShift);
    if (ImGui::IsKeyPressed(key(ImGuiKey_Escape))) {
        selection_range_.reset();
        range_summary_.reset();
        selected_ = {};
        flow_partner_.reset();
        selected_details_.clear();
        live_blocks_.clear();
    }
}

void ViewerApp::draw_error_dialog() {
    ImGui::OpenPopup("Cannot open trace");
    ImGui::SetNextWindowSize(ImVec2(640, 0));
    if (ImGui::BeginPopupModal("Cannot open trace", nullptr, ImGuiWindowFlags_NoResize)) {
        ImGui::TextWrapped("%s", error_.c_str());
        ImGui::Spacing();
        if (ImGui::Button("Quit", ImVec2(120, 0))) quit_ = true;
        ImGui::EndPopup();
    }
}

void ViewerApp::update_gpu_analysis() {
    using namespace std::chrono_literals;
    // A finished background analysis replaces the old one between frames.
    if (analysis_pending_.valid() && analysis_pending_.wait_for(0s) == std::future_status::ready) {
        model_->set_gpu_analysis(analysis_pending_.get());
        if (const GpuAnalysis* gpu = model_->gpu_analysis())
            breakdown_rank_ = std::clamp(breakdown_rank_, 0, std::max(0, static_cast<int>(gpu->ranks.size()) - 1));
    }
    const GpuAnalysis* current = model_->gpu_analysis();
    if (current == nullptr || analysis_pending_.valid() || !model_->loaded()) return;
    if (current->model_events == model_->total_events()) return;
    // A live file grew since: analyse it again in the background, at most every 5 s
    // (an analysis reads every GPU event of the file).
    const auto now = std::chrono::steady_clock::now();
    if (now - analysis_started_ < 5s) return;
    analysis_started_ = now;
    TraceModel* model = model_.get();
    analysis_pending_ = std::async(
        std::launch::async,
        [model, lanes = model_->analysis_lanes(), lane_count = model_->lane_count(), events = model_->total_events()] {
            return model->compute_gpu_analysis(lanes, lane_count, events);
        });
}

void ViewerApp::draw_stream_tracks_toggles() {
    const GpuAnalysis* gpu = model_->gpu_analysis();
    if (gpu == nullptr) {
        if (model_->progress().analyzing) {
            ImGui::SameLine(0, 24);
            ImGui::TextDisabled("computing GPU breakdowns...");
        }
        return;
    }
    bool any_overlay = false;
    for (int lane = 0; lane < model_->lane_count() && !any_overlay; ++lane) any_overlay = gpu->overlay(lane) != nullptr;
    if (!any_overlay) return;
    ImGui::SameLine(0, 24);
    ImGui::Checkbox("idle gaps", &stream_tracks_.idle_gaps);
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "Below each stream: the time between its GPU operations, coloured by why it was idle.\n"
            "Gaps narrower than 3 px are binned per 3 px; each colour then takes its share of the height.");
    if (stream_tracks_.idle_gaps) {
        for (int category = 0; category < kIdleCategoryCount; ++category) {
            const auto kind = static_cast<IdleCategory>(category);
            ImGui::SameLine(0, category == 0 ? 6 : 10);
            legend_swatch(colors::idle_color(kind), analysis::idle_category_name(kind));
            if (ImGui::IsItemHovered()) {
                if (kind == IdleCategory::kernel_wait)
                    ImGui::SetTooltip(
                        "%s (shorter than %s)", idle_category_meaning(kind),
                        format_duration(static_cast<double>(gpu->options.kernel_wait_threshold_ns)).c_str());
                else
                    ImGui::SetTooltip("%s", idle_category_meaning(kind));
            }
        }
    }
    ImGui::SameLine(0, 16);
    ImGui::Checkbox("queue", &stream_tracks_.queue_length);
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("Below each stream: how many operations were launched on it and not started yet.");
}

void ViewerApp::draw_sample_tracks_toggles() {
    bool any_stacks = false;
    for (int lane = 0; lane < model_->lane_count() && !any_stacks; ++lane)
        any_stacks = model_->sample_stacks(lane) != nullptr;
    if (!any_stacks) return;
    ImGui::SameLine(0, 24);
    ImGui::Checkbox("stacks", &sample_tracks_.stacks);
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "Below each thread: its sampled call stacks over time (Python and native frames),\n"
            "outermost frame on top; a box is one frame held over consecutive samples.");
    if (!sample_tracks_.stacks) return;
    ImGui::SameLine(0, 12);
    if (ImGui::Checkbox("idle samples", &sample_tracks_.idle))
        flame_dirty_ = true;  // the CPU flamegraph counts them too
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "Also the samples taken while the thread slept, blocked or waited for the GIL (dimmed);\n"
            "off, they are gaps, as `ember stats` counts active samples unless given --idle.");
    ImGui::SameLine(0, 12);
    ImGui::SetNextItemWidth(90.0f);
    ImGui::SliderInt("depth", &sample_tracks_.max_depth, 1, 64);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Frames shown per stack, outermost first (deeper ones are cut).");
}

void ViewerApp::draw_toolbar() {
    const char* tabs[] = {"Timeline", "Flamegraph", "Stats", "Breakdown", "Diff", "Job"};
    for (int index = 0; index < 6; ++index) {
        if (index == static_cast<int>(ViewTab::diff) && model_->files().size() < 2)
            continue;                                                    // compares the first two files
        if (index == static_cast<int>(ViewTab::job) && !job_) continue;  // several ranks
        if (index) ImGui::SameLine();
        const bool active = static_cast<int>(tab_) == index;
        if (active) ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetStyleColorVec4(ImGuiCol_ButtonActive));
        if (ImGui::Button(tabs[index])) tab_ = static_cast<ViewTab>(index);
        if (active) ImGui::PopStyleColor();
    }
    ImGui::SameLine(0, 24);
    ImGui::SetNextItemWidth(220);
    const bool submitted = ImGui::InputTextWithHint("##search", "search events (F3)", search_text_, sizeof search_text_,
                                                    ImGuiInputTextFlags_EnterReturnsTrue);
    if (submitted) run_search(true);
    ImGui::SameLine();
    ImGui::Checkbox("regex", &search_regex_);
    ImGui::SameLine();
    if (ImGui::ArrowButton("##previous", ImGuiDir_Left)) run_search(false);
    ImGui::SameLine();
    if (ImGui::ArrowButton("##next", ImGuiDir_Right)) run_search(true);
    if (!search_error_.empty()) {
        ImGui::SameLine();
        ImGui::TextColored(ImVec4(1, 0.3f, 0.3f, 1), "%s", search_error_.c_str());
    } else if (search_count_ >= 0) {
        ImGui::SameLine();
        ImGui::Text("%lld matches", static_cast<long long>(search_count_));
    }
    ImGui::SameLine(0, 24);
    if (ImGui::Button("<")) view_.back();
    ImGui::SameLine();
    if (ImGui::Button(">")) view_.forward();
    ImGui::SameLine();
    if (ImGui::Button("All")) view_.show_all();
    if (selection_range_) {
        ImGui::SameLine();
        if (ImGui::Button("Zoom to selection")) view_.show(*selection_range_);
    }
    if (tab_ == ViewTab::timeline) {
        draw_stream_tracks_toggles();
        draw_sample_tracks_toggles();
    }

    const LoadProgress progress = model_->progress();
    if (!progress.finished) {
        ImGui::SameLine(0, 24);
        const float fraction = progress.events_expected > 0 ? static_cast<float>(progress.events_loaded) /
                                                                  static_cast<float>(progress.events_expected)
                                                            : 0.0f;
        char label[96];
        std::snprintf(label, sizeof label, "loading %lld / %lld events", static_cast<long long>(progress.events_loaded),
                      static_cast<long long>(progress.events_expected));
        ImGui::ProgressBar(std::min(fraction, 1.0f), ImVec2(260, 0), label);
    }
    if (!progress.error.empty()) {
        ImGui::SameLine();
        ImGui::TextColored(ImVec4(1, 0.3f, 0.3f, 1), "load error: %s", progress.error.c_str());
    }
    std::uint64_t dropped = 0;
    for (const TraceFile& file : model_->files()) dropped += file.dropped_records;
    if (dropped) {
        ImGui::SameLine();
        ImGui::TextColored(ImVec4(1, 0.6f, 0.2f, 1), "%llu records dropped while recording",
                           static_cast<unsigned long long>(dropped));
    }
    if (!status_.empty()) {
        ImGui::SameLine();
        ImGui::TextUnformatted(status_.c_str());
    }
}

void ViewerApp::draw_details_panel(float width, float height) {
    ImGui::BeginChild("details", ImVec2(width, height), true);
    if (!selected_details_.empty()) {
        ImGui::TextUnformatted("Selected event");
        ImGui::Separator();
        if (ImGui::BeginTable("details_table", 2, ImGuiTableFlags_SizingFixedFit)) {
            // The keys as wide as the widest; the values wrap in the rest (a proportional
            // split would squeeze a 200-character kernel name into a column of letters).
            float key_width = 0.0f;
            for (const auto& detail : selected_details_)
                key_width = std::max(key_width, ImGui::CalcTextSize(detail.first.c_str()).x);
            // ...but at most half the panel: a long key ("allocated at" a Python line) wraps.
            key_width = std::min(key_width, ImGui::GetContentRegionAvail().x * 0.5f);
            ImGui::TableSetupColumn("key", ImGuiTableColumnFlags_WidthFixed, key_width);
            ImGui::TableSetupColumn("value", ImGuiTableColumnFlags_WidthStretch);
            for (const auto& [key, value] : selected_details_) {
                ImGui::TableNextRow();
                ImGui::TableNextColumn();
                ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
                ImGui::TextWrapped("%s", key.c_str());
                ImGui::PopStyleColor();
                ImGui::TableNextColumn();
                ImGui::TextWrapped("%s", value.c_str());
            }
            ImGui::EndTable();
        }
        // A memory lane clicked: each live block leads to its allocating op and its stack.
        std::optional<EventRef> go_to;
        if (!live_blocks_.empty()) {
            ImGui::Spacing();
            ImGui::TextUnformatted("Largest live blocks");
            for (std::size_t index = 0; index < live_blocks_.size(); ++index) {
                const LiveBlockLink& block = live_blocks_[index];
                ImGui::PushID(static_cast<int>(index));
                const std::string title = format_bytes(static_cast<double>(block.bytes)) + "  " + block.op;
                if (index == 0) ImGui::SetNextItemOpen(true, ImGuiCond_Appearing);  // the largest, opened
                if (ImGui::TreeNode("block", "%s", title.c_str())) {
                    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
                    ImGui::TextWrapped(
                        "allocated at %s, %s", block.line.c_str(),
                        format_duration(static_cast<double>(block.alloc_ns - model_->begin_ns())).c_str());
                    ImGui::PopStyleColor();
                    if (block.op_event && ImGui::Button("Go to allocating op")) go_to = block.op_event;
                    for (const std::string& frame : block.stack) ImGui::BulletText("%s", frame.c_str());
                    ImGui::TreePop();
                }
                ImGui::PopID();
            }
        }
        if (go_to) select_event(*go_to, true);
        if (flow_partner_) {
            const TimelineEvent* partner = model_->event(*flow_partner_);
            if (partner && ImGui::Button("Go to flow partner")) select_event(*flow_partner_, true);
            if (partner) {
                ImGui::SameLine();
                ImGui::TextDisabled("%s", std::string(model_->name(partner->name_id)).c_str());
            }
        }
        ImGui::Spacing();
    }
    if (selection_range_) {
        if (!range_summary_) range_summary_ = summarize_range(*model_, *selection_range_);
        ImGui::Text("Range %s (%lld events)",
                    format_duration(static_cast<double>(selection_range_->duration_ns())).c_str(),
                    static_cast<long long>(range_summary_->event_count));
        ImGui::Separator();
        auto section = [this](const char* title, const std::vector<NameTotal>& rows, bool bytes) {
            if (rows.empty()) return;
            ImGui::TextUnformatted(title);
            for (std::size_t index = 0; index < rows.size() && index < 6; ++index) {
                const NameTotal& row = rows[index];
                const std::string name(model_->name(row.name_id));
                if (bytes)
                    ImGui::BulletText("%s  %s  x%lld  %s", format_duration(static_cast<double>(row.total_ns)).c_str(),
                                      name.c_str(), static_cast<long long>(row.count),
                                      format_bytes(static_cast<double>(row.bytes)).c_str());
                else
                    ImGui::BulletText("%s  %s  x%lld", format_duration(static_cast<double>(row.total_ns)).c_str(),
                                      name.c_str(), static_cast<long long>(row.count));
            }
        };
        section("Top kernels", range_summary_->kernels, false);
        section("Copies", range_summary_->copies, true);
        section("Ranges", range_summary_->ranges, false);
        section("Stalls", range_summary_->stalls, false);
    }
    if (selected_details_.empty() && !selection_range_) {
        ImGui::TextDisabled("Click an event for its details;");
        ImGui::TextDisabled("right-drag to select a time range.");
        ImGui::Spacing();
        for (const TraceFile& file : model_->files()) {
            ImGui::TextWrapped("%s", file.shown_as.c_str());
            ImGui::TextDisabled("rank %d, pid %lld, %s", file.run.rank, static_cast<long long>(file.run.pid),
                                file.complete ? "complete" : "incomplete (recording or killed)");
            if (!file.run.command_line.empty()) ImGui::TextWrapped("%s", file.run.command_line.c_str());
        }
        ImGui::Text("%lld events", static_cast<long long>(model_->total_events()));
    }
    ImGui::EndChild();
}

void ViewerApp::draw_frame(float width, float height) {
    counters_ = {};
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImVec2(width, height));
    ImGui::Begin("ember view", nullptr,
                 ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoBringToFrontOnFocus |
                     ImGuiWindowFlags_NoScrollWithMouse | ImGuiWindowFlags_NoBackground);
    if (!model_) {
        draw_error_dialog();
        ImGui::End();
        return;
    }
    handle_keys();
    update_gpu_analysis();
    update_run_diff();
    draw_toolbar();
    const ImVec2 available = ImGui::GetContentRegionAvail();
    const bool details =
        tab_ != ViewTab::job && (!selected_details_.empty() || selection_range_ || tab_ == ViewTab::timeline);
    const float main_width = details ? std::max(200.0f, available.x - kDetailsWidth - 8.0f) : available.x;
    ImGui::BeginChild("main_view", ImVec2(main_width, available.y), false,
                      ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
    const ImVec2 inner = ImGui::GetContentRegionAvail();
    switch (tab_) {
        case ViewTab::timeline:
            draw_timeline(inner.x, inner.y);
            break;
        case ViewTab::flamegraph:
            draw_flamegraph(inner.x, inner.y);
            break;
        case ViewTab::stats:
            draw_stats(inner.x, inner.y);
            break;
        case ViewTab::breakdown:
            draw_breakdown(inner.x, inner.y);
            break;
        case ViewTab::diff:
            draw_diff(inner.x, inner.y);
            break;
        case ViewTab::job:
            draw_job(inner.x, inner.y);
            break;
    }
    ImGui::EndChild();
    if (details) {
        ImGui::SameLine();
        draw_details_panel(kDetailsWidth, available.y);
    }
    ImGui::End();
    tab_requested_ = false;
}

}  // namespace ember::viewer
