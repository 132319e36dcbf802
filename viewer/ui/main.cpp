// main.cpp: `ember-view`, the desktop viewer (`ember view` runs it). Opens one or more
// trace files (or the file a running process records, --attach PID), then either
// shows a window, renders one frame to a PNG (--screenshot) or measures itself
// (--bench). A file that cannot be opened shows an error dialog, or without a
// display a clear message and exit code 2.
#define GL_GLEXT_PROTOTYPES 1
#include <GLFW/glfw3.h>
#include <GL/glext.h>

#include "profiler/store/trace_error.h"
#include "common/os.h"
#include "viewer/model/open_inputs.h"
#include "viewer/ui/png_writer.h"
#include "viewer/ui/viewer_app.h"

#include <CLI/CLI.hpp>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using ember::viewer::TimeRange;
using ember::viewer::TraceModel;
using ember::viewer::ViewerApp;
using Clock = ember::os::SteadyClock;

constexpr int kExitBadFile = 2;
constexpr int kExitNoDisplay = 3;

// CPU seconds of the whole process (all threads: ours and llvmpipe's). On a loaded
// machine wall time measures the neighbours; CPU time measures the frame's work.
using ember::os::process_cpu_seconds;
using ember::os::seconds_since;

// "12.5ms", "300us", "2s", "1500" (ns) -> nanoseconds; nullopt when malformed.
std::optional<double> parse_time(const std::string& text) {
    if (text.empty()) return std::nullopt;
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (end == text.c_str()) return std::nullopt;
    const std::string unit(end);
    if (unit.empty() || unit == "ns") return value;
    if (unit == "us") return value * 1e3;
    if (unit == "ms") return value * 1e6;
    if (unit == "s") return value * 1e9;
    return std::nullopt;
}

// Resident and peak memory of this process from /proc/self/status, in bytes.
void memory_usage(std::int64_t* resident, std::int64_t* peak) {
    *resident = std::int64_t{ember::os::proc_status_kib("VmRSS")} * 1024;
    *peak = std::int64_t{ember::os::peak_rss_kib()} * 1024;
}

// The trace file a running process has open: an fd pointing at an SQLite file.
std::string trace_file_of_process(long long pid, std::string* error) {
    const std::filesystem::path fd_dir = "/proc/" + std::to_string(pid) + "/fd";
    std::error_code code;
    std::filesystem::directory_iterator entries(fd_dir, code);
    if (code) {
        *error = "cannot list " + fd_dir.string() + ": " + code.message() + " (is process " + std::to_string(pid) +
                 " running, and yours?)";
        return "";
    }
    for (const auto& entry : entries) {
        const std::filesystem::path target = std::filesystem::read_symlink(entry.path(), code);
        if (code || !std::filesystem::is_regular_file(target, code)) continue;
        const std::string name = target.filename().string();
        if (name.ends_with("-wal") || name.ends_with("-shm") || name.ends_with("-journal")) continue;
        std::ifstream file(target, std::ios::binary);
        char header[16] = {};
        file.read(header, sizeof header);
        if (file.gcount() == 16 && std::memcmp(header, "SQLite format 3", 16) == 0) return target.string();
    }
    *error = "process " + std::to_string(pid) + " has no SQLite trace file open (is it recording with ember?)";
    return "";
}

struct Window {
    GLFWwindow* handle = nullptr;
    GLuint framebuffer = 0, color_buffer = 0;
    int width = 0, height = 0;
    bool offscreen = false;
};

bool open_window(Window& window, int width, int height, bool visible, bool offscreen, std::string* error) {
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
    glfwWindowHint(GLFW_VISIBLE, visible ? GLFW_TRUE : GLFW_FALSE);
    window.handle = glfwCreateWindow(width, height, "ember view", nullptr, nullptr);
    if (window.handle == nullptr) {
        *error = "glfwCreateWindow failed: OpenGL 3.3 core is not available on this display";
        return false;
    }
    glfwMakeContextCurrent(window.handle);
    glfwSwapInterval(0);  // frame times measure our work, not the display's refresh
    window.width = width;
    window.height = height;
    window.offscreen = offscreen;
    if (offscreen) {
        // Render into our own framebuffer: pixels of a hidden or off-screen window
        // are undefined, those of a renderbuffer are not.
        glGenFramebuffers(1, &window.framebuffer);
        glBindFramebuffer(GL_FRAMEBUFFER, window.framebuffer);
        glGenRenderbuffers(1, &window.color_buffer);
        glBindRenderbuffer(GL_RENDERBUFFER, window.color_buffer);
        glRenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, width, height);
        glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, window.color_buffer);
        if (glCheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE) {
            *error = "glCheckFramebufferStatus: the offscreen framebuffer is incomplete";
            return false;
        }
    }
    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGui::GetIO().IniFilename = nullptr;  // no imgui.ini beside the user's files
    ImGui::StyleColorsDark();
    ImGui_ImplGlfw_InitForOpenGL(window.handle, true);
    ImGui_ImplOpenGL3_Init("#version 330 core");
    return true;
}

void close_window(Window& window) {
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    if (window.framebuffer) glDeleteFramebuffers(1, &window.framebuffer);
    if (window.color_buffer) glDeleteRenderbuffers(1, &window.color_buffer);
    glfwDestroyWindow(window.handle);
    glfwTerminate();
}

double g_widgets_ms = 0.0;  // CPU time of the last frame's widgets (ImGui, no GL)

// One frame: widgets, then GL. `finish` waits for the GPU so frame times are honest.
void render_frame(Window& window, ViewerApp& app, bool finish) {
    glfwPollEvents();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    int width = window.width, height = window.height;
    if (window.offscreen) {
        ImGuiIO& io = ImGui::GetIO();
        io.DisplaySize = ImVec2(static_cast<float>(width), static_cast<float>(height));
        io.DisplayFramebufferScale = ImVec2(1, 1);
    } else {
        glfwGetFramebufferSize(window.handle, &width, &height);
    }
    ImGui::NewFrame();
    const ImVec2 size = ImGui::GetIO().DisplaySize;
    const double widgets_start = ember::os::thread_cpu_seconds();
    app.draw_frame(size.x, size.y);
    ImGui::Render();
    g_widgets_ms = (ember::os::thread_cpu_seconds() - widgets_start) * 1e3;
    glViewport(0, 0, width, height);
    glClearColor(24 / 255.0f, 24 / 255.0f, 28 / 255.0f, 1.0f);  // colors::kBackground
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    if (finish) glFinish();
    if (!window.offscreen) glfwSwapBuffers(window.handle);
}

bool save_screenshot(Window& window, const std::string& path, std::string* error) {
    std::vector<std::uint8_t> pixels(static_cast<std::size_t>(window.width) * window.height * 4);
    glBindFramebuffer(GL_READ_FRAMEBUFFER, window.framebuffer);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadPixels(0, 0, window.width, window.height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
    if (glGetError() != GL_NO_ERROR) {
        *error = "glReadPixels failed";
        return false;
    }
    // OpenGL's rows go bottom-up, PNG's top-down.
    const std::size_t stride = static_cast<std::size_t>(window.width) * 4;
    std::vector<std::uint8_t> flipped(pixels.size());
    for (int row = 0; row < window.height; ++row)
        std::memcpy(flipped.data() + static_cast<std::size_t>(row) * stride,
                    pixels.data() + static_cast<std::size_t>(window.height - 1 - row) * stride, stride);
    for (std::size_t index = 3; index < flipped.size(); index += 4) flipped[index] = 255;
    return ember::viewer::write_png(path, window.width, window.height, flipped, error);
}

double percentile(std::vector<double> values, double fraction) {
    if (values.empty()) return 0.0;
    std::sort(values.begin(), values.end());
    const auto index = static_cast<std::size_t>(
        std::clamp(fraction * static_cast<double>(values.size() - 1), 0.0, static_cast<double>(values.size() - 1)));
    return values[index];
}

// --- Options -------------------------------------------------------------------
// What the command line asks for (add_view_options says what each one means).
struct ViewOptions {
    std::vector<std::string> files;
    std::string size_text = "1600x1000", range_text;
    std::string flame_name = "nvtx";
    bool difference = false;
    // Sampled stacks on the thread lanes.
    bool idle_samples = false, no_stacks = false;
    int stack_depth = 12;
    // --screenshot and what it shows.
    std::string screenshot, view_name = "timeline", layout_path, select_text, memory_at_text;
    std::optional<long long> step_number;
    // Several rank files: the Job tab.
    std::optional<long long> collective;
    std::string job_order = "rank";
    int timeline_ranks = 16;
    // --diff.
    bool diff = false;
    int align_step = 1;
    std::string diff_row;
    // The other modes.
    bool bench = false, watch = false;
    bool strict = false;  // refuse traces with events that break their format
    long long attach_pid = 0;
};

void add_view_options(CLI::App& cli, ViewOptions& options) {
    cli.add_option("files", options.files, "trace files (several ranks share one time base)");
    cli.add_option("--screenshot", options.screenshot, "render one frame to this PNG and exit");
    cli.add_option("--view", options.view_name,
                   "view for --screenshot: timeline, flamegraph, stats, breakdown, diff or job")
        ->check(CLI::IsMember({"timeline", "flamegraph", "stats", "breakdown", "diff", "job"}));
    cli.add_option("--collective", options.collective,
                   "with several rank files: select the N-th collective of the job (from 0, by first arrival), "
                   "outlined on every rank in the Job view");
    cli.add_option("--job-order", options.job_order, "rows of the Job view: rank, lateness (latest first) or wait")
        ->check(CLI::IsMember({"rank", "lateness", "wait"}));
    cli.add_option("--timeline-ranks", options.timeline_ranks,
                   "with more rank files than this, the Timeline opens with the straggler and typical ranks only "
                   "(double-click a rank in the Job view for its lanes); default 16");
    cli.add_option("--range", options.range_text,
                   "visible time range A:B from the trace's start (ns, or with us/ms/s)");
    cli.add_option(
        "--step", options.step_number,
        "with --screenshot: the timeline framed on this step, selected (as clicking it in the Breakdown view)");
    cli.add_option("--size", options.size_text, "window/screenshot size WxH");
    cli.add_option("--flame-source", options.flame_name,
                   "flamegraph source: nvtx, gpu (kernels by NVTX stack), gpu-range (GPU time by range), "
                   "kernels (GPU time by kernel) or cpu")
        ->check(CLI::IsMember({"nvtx", "gpu", "gpu-range", "kernels", "cpu"}));
    cli.add_flag("--diff", options.diff,
                 "compare the 2nd file (B) with the 1st (A): aligned timelines and the diff tables");
    cli.add_option(
        "--align-step", options.align_step,
        "with --diff: B shifted so its N-th step starts where A's N-th does (from 1; 0: the recorded clocks)");
    cli.add_option("--diff-row", options.diff_row,
                   "with --diff: the row of the diff tables clicked (its events outlined)");
    cli.add_flag("--difference", options.difference,
                 "flamegraph of the 2nd file against the 1st (red slower, blue faster)");
    cli.add_option("--select", options.select_text,
                   "with --screenshot: select the first event whose name contains this text (details panel, flow "
                   "arrow to its launch or its GPU work)");
    cli.add_option("--memory-at", options.memory_at_text,
                   "with --screenshot: click the first GPU memory lane at this time from the trace's start (ns, or "
                   "with us/ms/s): what was live then, the largest blocks with their op and stack");
    cli.add_flag("--idle-samples", options.idle_samples,
                 "thread lanes' sampled stacks include idle samples (dimmed), as `ember stats --idle`");
    cli.add_flag("--no-stacks", options.no_stacks, "no sampled stacks on the thread lanes");
    cli.add_option("--stack-depth", options.stack_depth,
                   "frames of sampled stacks shown, outermost first (1 to 256, default 12)");
    cli.add_option("--layout", options.layout_path,
                   "with --screenshot: write the lanes' pixel rectangles to this file");
    cli.add_flag("--bench", options.bench, "print load time, memory and frame times of a scripted zoom/pan, then exit");
    cli.add_option("--attach", options.attach_pid, "watch the trace a running process is recording");
    cli.add_flag("--watch", options.watch, "reload the files as they grow (a recording in progress)");
    cli.add_flag("--strict", options.strict,
                 "refuse a trace with events that break its format instead of skipping and counting them");
}

// --- Run -----------------------------------------------------------------------
// --screenshot: one frame of the chosen view, as the options set it up, to a PNG.
int run_screenshot(Window& window, ViewerApp& app, const ViewOptions& options,
                   const std::optional<std::pair<double, double>>& range) {
    // align_diff counts steps from 0, and -1 is the recorded clocks.
    const int align_index = options.align_step - 1;
    int exit_code = 0;
    app.model()->load_all();
    if (options.view_name == "job" && !app.job()) {
        std::fprintf(stderr, "ember view: --view job needs two or more rank files\n");
        return kExitBadFile;
    }
    if (options.collective && !app.select_collective(static_cast<std::size_t>(*options.collective))) {
        std::fprintf(stderr, "ember view: --collective %lld: the job has no such collective\n", *options.collective);
        return kExitBadFile;
    }
    app.select_tab(options.view_name == "flamegraph"  ? ember::viewer::ViewTab::flamegraph
                   : options.view_name == "job"       ? ember::viewer::ViewTab::job
                   : options.view_name == "stats"     ? ember::viewer::ViewTab::stats
                   : options.view_name == "breakdown" ? ember::viewer::ViewTab::breakdown
                   : options.view_name == "diff" || (options.diff && options.view_name == "timeline")
                       ? ember::viewer::ViewTab::diff
                       : ember::viewer::ViewTab::timeline);
    render_frame(window, app, false);  // lays out and sets the view's width
    if (options.diff) {
        std::string diff_error;
        if (!app.wait_for_diff(&diff_error)) {
            std::fprintf(stderr, "ember view: --diff: %s\n", diff_error.c_str());
            return kExitBadFile;
        }
        if (!app.align_diff(align_index)) {
            std::fprintf(stderr, "ember view: --align-step %d: a run has no such step\n", options.align_step);
            return kExitBadFile;
        }
        if (!options.diff_row.empty() && !app.select_diff_row(options.diff_row)) {
            std::fprintf(stderr, "ember view: --diff-row %s: no row of the diff tables has that name\n",
                         options.diff_row.c_str());
            return kExitBadFile;
        }
        render_frame(window, app, false);  // the timeline's width after the tables' layout
    }
    if (range) {
        const auto begin = app.model()->begin_ns();
        app.view().show(
            {begin + static_cast<std::int64_t>(range->first), begin + static_cast<std::int64_t>(range->second)});
        if (const ember::viewer::JobOverview* job = app.job())
            app.show_job_range({job->begin_ns + static_cast<std::int64_t>(range->first),
                                job->begin_ns + static_cast<std::int64_t>(range->second)});
    }
    if (options.step_number && !app.show_step_number(*options.step_number)) {
        std::fprintf(stderr, "ember view: --step %lld: the first rank has no such step (see --view breakdown)\n",
                     *options.step_number);
        return kExitBadFile;
    }
    if (!options.memory_at_text.empty()) {
        const std::optional<double> at = parse_time(options.memory_at_text);
        if (!at || !app.select_memory_at(static_cast<ember::trace::TimeNs>(*at))) {
            std::fprintf(stderr, "ember view: --memory-at %s: %s\n", options.memory_at_text.c_str(),
                         at ? "the trace has no GPU memory lane" : "expected a time, e.g. 1.5ms");
            return kExitBadFile;
        }
    }
    if (!options.select_text.empty()) {
        render_frame(window, app, false);  // lay the lanes out first
        if (!app.search_and_select(options.select_text)) {
            std::fprintf(stderr, "ember view: --select %s: no event of the visible range on has that name\n",
                         options.select_text.c_str());
            return kExitBadFile;
        }
    }
    render_frame(window, app, false);
    render_frame(window, app, true);
    std::string error;
    if (!save_screenshot(window, options.screenshot, &error)) {
        std::fprintf(stderr, "ember view: %s\n", error.c_str());
        exit_code = 1;
    }
    if (!options.layout_path.empty()) {
        std::ofstream layout(options.layout_path);
        for (const ember::viewer::JobRowRect& rect : app.job_rects())
            layout << "job " << rect.rank << " -1 " << rect.x0 << ' ' << rect.y0 << ' ' << rect.x1 << ' ' << rect.y1
                   << " rank " << rect.rank << '\n';
        for (const ember::viewer::LaneRect& rect : app.lane_rects()) {
            const ember::viewer::Lane& lane = app.model()->lane(rect.lane);
            layout << rect.track << ' ' << rect.lane << ' ' << static_cast<int>(lane.kind) << ' ' << rect.x0 << ' '
                   << rect.y0 << ' ' << rect.x1 << ' ' << rect.y1 << ' ' << lane.title << '\n';
        }
        if (!layout) {
            std::fprintf(stderr, "ember view: cannot write %s\n", options.layout_path.c_str());
            exit_code = 1;
        }
    }
    return exit_code;
}

// --bench: load time, memory and the frame times of a scripted zoom/pan on stdout.
int run_bench(Window& window, ViewerApp& app, const std::string& file, Clock::time_point process_start) {
    int exit_code = 0;
    TraceModel& bench_model = *app.model();
    bench_model.start_loading();
    render_frame(window, app, true);
    const double first_frame_s = seconds_since(process_start);
    std::vector<double> loading_frames;
    double lanes_ready_s = 0.0;  // every lane drawable; the GPU breakdowns follow
    while (!bench_model.loaded()) {
        const auto start = Clock::now();
        render_frame(window, app, true);
        loading_frames.push_back(seconds_since(start) * 1e3);
        const auto loading = bench_model.progress();
        if (lanes_ready_s == 0.0 && loading.lanes_ready == loading.lane_count)
            lanes_ready_s = seconds_since(process_start);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const double load_s = seconds_since(process_start);
    std::int64_t resident = 0, peak = 0;
    memory_usage(&resident, &peak);
    // Scripted: whole trace, zoom into the middle down to ~1 us, pan, zoom back out.
    std::vector<double> frames, frames_cpu, frames_widgets;
    int max_primitives = 0;
    auto timed = [&]() {
        const auto start = Clock::now();
        const double cpu_start = process_cpu_seconds();
        render_frame(window, app, true);
        frames.push_back(seconds_since(start) * 1e3);
        frames_cpu.push_back((process_cpu_seconds() - cpu_start) * 1e3);
        frames_widgets.push_back(g_widgets_ms);
        max_primitives = std::max(max_primitives, app.frame_counters().primitives);
    };
    app.view().show_all();
    for (int i = 0; i < 10; ++i) timed();
    const double middle = app.view().width_pixels() / 2;
    int zoom_steps = 0;
    while (app.view().visible().duration_ns() > 1000 && zoom_steps < 400) {
        app.view().zoom(0.85, middle);
        timed();
        ++zoom_steps;
    }
    for (int i = 0; i < 60; ++i) {
        app.view().pan_pixels(i < 30 ? 40.0 : -40.0);
        timed();
    }
    for (int i = 0; i < zoom_steps; ++i) {
        app.view().zoom(1.0 / 0.85, middle);
        if (i % 20 == 10) app.view().pan_pixels(200.0);
        timed();
    }
    const auto progress = bench_model.progress();
    std::printf("ember view --bench %s\n", file.c_str());
    std::printf("  events               %lld (%d lanes)\n", static_cast<long long>(progress.events_loaded),
                progress.lane_count);
    std::printf("  first frame          %.2f s after start\n", first_frame_s);
    if (lanes_ready_s > 0.0) std::printf("  lanes loaded         %.2f s after start\n", lanes_ready_s);
    std::printf("  load complete        %.2f s after start (GPU breakdowns included)\n", load_s);
    std::printf("  frames while loading p50 %.2f ms, max %.2f ms (%zu frames)\n", percentile(loading_frames, 0.5),
                percentile(loading_frames, 1.0), loading_frames.size());
    std::printf("  memory               rss %.1f MiB, peak %.1f MiB, model %.1f MiB\n", resident / 1048576.0,
                peak / 1048576.0, static_cast<double>(bench_model.memory_bytes()) / 1048576.0);
    if (progress.events_loaded > 0)
        std::printf("  bytes per event      model %.1f, rss %.1f\n",
                    static_cast<double>(bench_model.memory_bytes()) / static_cast<double>(progress.events_loaded),
                    static_cast<double>(resident) / static_cast<double>(progress.events_loaded));
    std::printf("  zoom/pan frames      %zu: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms\n", frames.size(),
                percentile(frames, 0.5), percentile(frames, 0.9), percentile(frames, 0.99), percentile(frames, 1.0));
    std::printf("  zoom/pan frames cpu  p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms (process CPU time)\n",
                percentile(frames_cpu, 0.5), percentile(frames_cpu, 0.9), percentile(frames_cpu, 0.99),
                percentile(frames_cpu, 1.0));
    std::printf("  of which widgets     p50 %.2f ms, p99 %.2f ms, max %.2f ms (model + ImGui, without OpenGL)\n",
                percentile(frames_widgets, 0.5), percentile(frames_widgets, 0.99), percentile(frames_widgets, 1.0));
    double load_avg[1] = {0.0};
    if (getloadavg(load_avg, 1) == 1) std::printf("  machine load average %.1f\n", load_avg[0]);
    std::printf("  primitives per frame max %d\n", max_primitives);
    if (!progress.error.empty()) {
        std::printf("  load error           %s\n", progress.error.c_str());
        exit_code = kExitBadFile;
    }
    return exit_code;
}

// The window, until it is closed; with --watch the files are read again as they grow.
void run_window(Window& window, ViewerApp& app, bool watch) {
    if (app.model()) app.model()->start_loading();
    // Live: once a second, read the rows committed since (in the background: the
    // model's lanes are not touched), then append them between two frames.
    std::future<std::unique_ptr<ember::viewer::TraceDelta>> pending;
    auto last_refresh = Clock::now();
    while (!glfwWindowShouldClose(window.handle) && !app.wants_quit()) {
        render_frame(window, app, false);
        if (!app.model() || app.model()->loaded()) glfwWaitEventsTimeout(watch ? 0.25 : 0.5);
        // Lanes complete, GPU breakdowns computing: redraw on input and a few times a
        // second, leaving the CPU to the analysis instead of spinning frames.
        else if (app.model()->progress().analyzing)
            glfwWaitEventsTimeout(0.2);
        if (!watch || !app.model()) continue;
        if (pending.valid() && pending.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
            last_refresh = Clock::now();
            try {
                std::unique_ptr<ember::viewer::TraceDelta> delta = pending.get();
                const ember::viewer::RefreshResult result = app.apply_live_events(*delta);
                app.set_status("live: " + std::to_string(app.model()->total_events()) + " events (+" +
                               std::to_string(result.events) + ")");
            } catch (const std::exception& error) {
                // A busy or half-written file: say so and try again next time.
                app.set_status(std::string("live: refresh failed: ") + error.what());
            }
        } else if (!pending.valid() && seconds_since(last_refresh) > 1.0 && app.model()->loaded()) {
            TraceModel* live_model = app.model();
            pending = std::async(std::launch::async, [live_model] { return live_model->read_new_events(); });
        }
    }
    if (pending.valid()) pending.wait();
}

// The files opened (a running process's with --attach), the window and the app made,
// then one of the three modes.
int run_view(ViewOptions options, Clock::time_point process_start) {
    if (options.attach_pid > 0) {
        std::string error;
        const std::string path = trace_file_of_process(options.attach_pid, &error);
        if (path.empty()) {
            std::fprintf(stderr, "ember view: %s\n", error.c_str());
            return kExitBadFile;
        }
        options.files.assign(1, path);
        options.watch = true;
    }
    if (options.files.empty()) {
        std::fprintf(stderr, "ember view: no trace file given (ember view FILE [FILE...] or --attach PID)\n");
        return kExitBadFile;
    }
    if (options.stack_depth < 1 || options.stack_depth > 256) {
        std::fprintf(stderr, "ember view: --stack-depth %d: give 1 to 256 frames\n", options.stack_depth);
        return kExitBadFile;
    }
    int width = 1600, height = 1000;
    if (std::sscanf(options.size_text.c_str(), "%dx%d", &width, &height) != 2 || width < 100 || height < 100 ||
        width > 16384 || height > 16384) {
        std::fprintf(stderr, "ember view: --size %s: expected WxH between 100x100 and 16384x16384\n",
                     options.size_text.c_str());
        return kExitBadFile;
    }
    std::optional<std::pair<double, double>> range;
    if (!options.range_text.empty()) {
        const auto colon = options.range_text.find(':');
        std::optional<double> begin, end;
        if (colon != std::string::npos) {
            begin = parse_time(options.range_text.substr(0, colon));
            end = parse_time(options.range_text.substr(colon + 1));
        }
        if (!begin || !end || *end <= *begin) {
            std::fprintf(stderr, "ember view: --range %s: expected A:B with A < B, e.g. 1.5ms:3ms\n",
                         options.range_text.c_str());
            return kExitBadFile;
        }
        range = std::make_pair(*begin, *end);
    }

    std::unique_ptr<TraceModel> model;
    std::unique_ptr<ember::viewer::JobOverview> job;
    std::vector<int> timeline_rows;
    std::string open_error;
    try {
        // Kineto JSON, nsys SQLite exports and Chrome traces are imported (once,
        // cached) and shown like our own recordings.
        ember::viewer::OpenInputsOptions open_options;
        open_options.strict = options.strict;
        open_options.on_import = [](const std::string& line) {
            std::fprintf(stderr, "ember view: %s\n", line.c_str());
        };
        const std::vector<std::string> inputs = options.files;
        options.files = ember::viewer::open_inputs(inputs, open_options);
        if (options.files.size() >= 2 && !options.diff) {
            // Several rank files are one job: its overview, and the Timeline on the
            // clocks its collectives aligned (many ranks: the straggler and typical ones).
            job =
                std::make_unique<ember::viewer::JobOverview>(ember::viewer::build_job_overview(options.files, inputs));
            for (std::size_t row = 0; row < job->ranks.size(); ++row) {
                const std::int32_t rank = job->ranks[row].rank;
                const auto& reference = job->job.reference_ranks;
                const bool chosen = options.files.size() <= static_cast<std::size_t>(options.timeline_ranks) ||
                                    (job->job.straggler && *job->job.straggler == rank) ||
                                    std::find(reference.begin(), reference.end(), rank) != reference.end() ||
                                    (!job->job.straggler && row < 4);
                if (chosen) timeline_rows.push_back(static_cast<int>(row));
            }
            std::vector<std::string> traces, shown;
            for (int row : timeline_rows) {
                traces.push_back(job->ranks[static_cast<std::size_t>(row)].trace);
                shown.push_back(job->ranks[static_cast<std::size_t>(row)].shown_as);
            }
            const std::vector<ember::trace::TimeNs> shifts = job->shifts_for(traces);
            model = std::make_unique<TraceModel>(traces, &shifts);
            for (std::size_t index = 0; index < shown.size(); ++index)
                model->set_shown_as(static_cast<int>(index), shown[index]);
        } else {
            model = std::make_unique<TraceModel>(options.files);
            for (std::size_t index = 0; index < inputs.size(); ++index)
                model->set_shown_as(static_cast<int>(index), inputs[index]);
        }
    } catch (const std::exception& error) {
        open_error = error.what();
    }
    const bool headless = !options.screenshot.empty() || options.bench;
    if (!open_error.empty() && headless) {
        std::fprintf(stderr, "ember view: %s\n", open_error.c_str());
        return kExitBadFile;
    }
    glfwSetErrorCallback([](int code, const char* description) {
        std::fprintf(stderr, "ember view: GLFW error %d: %s\n", code, description);
    });
    if (!glfwInit()) {
        if (!open_error.empty()) std::fprintf(stderr, "ember view: %s\n", open_error.c_str());
        std::fprintf(stderr,
                     "ember view: no display: glfwInit failed (set DISPLAY, or run headless under "
                     "xvfb-run -a -s \"-screen 0 1600x1000x24\" ember view ...)\n");
        return open_error.empty() ? kExitNoDisplay : kExitBadFile;
    }
    Window window;
    std::string window_error;
    if (!open_window(window, width, height, !headless, !options.screenshot.empty(), &window_error)) {
        std::fprintf(stderr, "ember view: %s\n", window_error.c_str());
        glfwTerminate();
        return kExitNoDisplay;
    }

    ViewerApp app(std::move(model), open_error);
    if (job) {
        app.set_job(std::move(job));
        app.set_timeline_rows(timeline_rows);
        if (options.job_order == "lateness") app.set_job_order(ember::viewer::JobOrder::lateness);
        if (options.job_order == "wait") app.set_job_order(ember::viewer::JobOrder::wait);
        if (options.screenshot.empty()) app.select_tab(ember::viewer::ViewTab::job);
    }
    if (options.flame_name == "gpu") app.set_flame_source(ember::viewer::FlameSource::gpu_kernels);
    if (options.flame_name == "cpu") app.set_flame_source(ember::viewer::FlameSource::cpu_samples);
    if (options.flame_name == "gpu-range") app.set_flame_source(ember::viewer::FlameSource::gpu_by_range);
    if (options.flame_name == "kernels") app.set_flame_source(ember::viewer::FlameSource::gpu_kernel_names);
    if (options.difference) app.set_flame_difference(true);
    app.sample_tracks().stacks = !options.no_stacks;
    app.sample_tracks().idle = options.idle_samples;
    app.sample_tracks().max_depth = options.stack_depth;
    if (options.diff && (!app.model() || app.model()->files().size() < 2) && open_error.empty()) {
        std::fprintf(stderr, "ember view: --diff needs two trace files: ember view A.db B.db --diff\n");
        close_window(window);
        return kExitBadFile;
    }
    // align_diff counts steps from 0, and -1 is the recorded clocks.
    if (options.diff) app.start_diff(options.align_step - 1);

    int exit_code = 0;
    if (!options.screenshot.empty())
        exit_code = run_screenshot(window, app, options, range);
    else if (options.bench)
        exit_code = run_bench(window, app, options.files[0], process_start);
    else
        run_window(window, app, options.watch);
    close_window(window);
    return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
    const Clock::time_point process_start = Clock::now();
    CLI::App cli{"ember-view: timelines, flamegraphs and tables of ember trace files.", "ember-view"};
    ViewOptions options;
    add_view_options(cli, options);
    CLI11_PARSE(cli, argc, argv);
    return run_view(std::move(options), process_start);
}
