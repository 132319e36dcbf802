// colors.h: the viewer's palette as plain ABGR constants (ImGui's IM_COL32 layout),
// shared by the UI and the screenshot tests that look for them. Kernels are blues
// (shade by name), copies green (HtoD) / orange (DtoH) / yellow (DtoD, peer),
// memsets purple, syncs red, API calls teal, NVTX ranges their own color or a warm
// shade by name, counters an orange line. Idle gaps of a stream: host_wait red,
// kernel_wait amber, other slate; the queue-length track an orange area.
#pragma once

#include "viewer/model/gpu_analysis.h"
#include "viewer/model/timeline_event.h"

#include <cstdint>
#include <string_view>

namespace ember::viewer::colors {

constexpr std::uint32_t rgb(std::uint32_t r, std::uint32_t g, std::uint32_t b) {
    return 0xff000000u | (b << 16) | (g << 8) | r;
}
constexpr std::uint32_t red(std::uint32_t color) {
    return color & 0xff;
}
constexpr std::uint32_t green(std::uint32_t color) {
    return (color >> 8) & 0xff;
}
constexpr std::uint32_t blue(std::uint32_t color) {
    return (color >> 16) & 0xff;
}

constexpr std::uint32_t kBackground = rgb(24, 24, 28);
constexpr std::uint32_t kLaneBackground = rgb(32, 32, 38);
constexpr std::uint32_t kMemcpyHostToDevice = rgb(60, 190, 75);
constexpr std::uint32_t kMemcpyDeviceToHost = rgb(235, 140, 40);
constexpr std::uint32_t kMemcpyOther = rgb(220, 210, 60);
constexpr std::uint32_t kMemset = rgb(160, 90, 210);
constexpr std::uint32_t kSync = rgb(200, 50, 50);
constexpr std::uint32_t kApiCall = rgb(70, 170, 170);
constexpr std::uint32_t kApiError = rgb(230, 30, 30);
constexpr std::uint32_t kMark = rgb(250, 250, 250);
constexpr std::uint32_t kOverhead = rgb(120, 120, 120);
constexpr std::uint32_t kCounterLine = rgb(255, 150, 30);
constexpr std::uint32_t kSelection = rgb(255, 255, 255);
constexpr std::uint32_t kFlow = rgb(255, 60, 200);
constexpr std::uint32_t kDiffSlower = rgb(220, 50, 40);
constexpr std::uint32_t kDiffFaster = rgb(40, 90, 220);
// The diff mode: the runs' tags on their lane groups, and the step starts drawn over
// each run's lanes (the step the runs are aligned on brighter).
constexpr std::uint32_t kRunA = rgb(150, 200, 255);
constexpr std::uint32_t kRunB = rgb(255, 190, 120);
constexpr std::uint32_t kStepMarker = (0x70u << 24) | (230u << 16) | (230u << 8) | 230u;
constexpr std::uint32_t kStepMarkerAligned = (0xE0u << 24) | (120u << 16) | (255u << 8) | 255u;

// Idle gaps by category (IdleCategory order). Red for the host being late (the one a
// user can act on in the input pipeline or the Python loop), amber for launch
// overhead between queued work, a muted slate for the rest, so the eye goes to red.
constexpr std::uint32_t kIdleHostWait = rgb(232, 72, 85);
constexpr std::uint32_t kIdleKernelWait = rgb(240, 190, 60);
constexpr std::uint32_t kIdleOther = rgb(120, 130, 160);
inline std::uint32_t idle_color(IdleCategory category) {
    switch (category) {
        case IdleCategory::host_wait:
            return kIdleHostWait;
        case IdleCategory::kernel_wait:
            return kIdleKernelWait;
        case IdleCategory::other:
            return kIdleOther;
    }
    return kIdleOther;
}
// Queue length: an area chart in a deeper shade of the counters' orange.
constexpr std::uint32_t kQueueFill = rgb(215, 125, 35);

// The breakdown panel: the temporal split, the kernel classes, the step categories.
constexpr std::uint32_t kCompute = rgb(60, 120, 225);
constexpr std::uint32_t kNonCompute = rgb(175, 105, 215);
constexpr std::uint32_t kIdle = rgb(95, 95, 110);
constexpr std::uint32_t kCommunication = rgb(230, 95, 170);
constexpr std::uint32_t kMemory = rgb(60, 190, 75);
// Kernel-type combinations ("COMPUTATION overlapping COMMUNICATION"): one hue each.
// (Mixing the classes' colors gives greys that read as idle.)
inline std::uint32_t kernel_type_color(std::string_view type) {
    const bool computation = type.find("COMPUTATION") != std::string_view::npos;
    const bool communication = type.find("COMMUNICATION") != std::string_view::npos;
    const bool memory = type.find("MEMORY") != std::string_view::npos;
    if (computation && communication && memory) return rgb(230, 230, 240);
    if (computation && communication) return rgb(140, 95, 235);
    if (computation && memory) return rgb(40, 185, 195);
    if (communication && memory) return rgb(215, 195, 60);
    if (computation) return kCompute;
    if (communication) return kCommunication;
    if (memory) return kMemory;
    return kIdle;
}
// Step categories, in step_breakdown's priority order (Kernel ... Other), in the
// colors of the timeline's events where there is one.
inline std::uint32_t step_category_color(int category) {
    constexpr std::uint32_t kColors[kStepCategoryCount] = {
        kCompute,             // Kernel
        kMemcpyHostToDevice,  // Memcpy
        kMemset,              // Memset
        kCommunication,       // Communication
        kApiCall,             // Runtime
        kMemcpyDeviceToHost,  // DataLoader
        rgb(205, 170, 120),   // CPU Exec
        kIdle,                // Other
    };
    return category >= 0 && category < kStepCategoryCount ? kColors[category] : kIdle;
}

// The Job tab: what each rank did at each instant.
constexpr std::uint32_t kJobCompute = kCompute;
constexpr std::uint32_t kJobWait = rgb(232, 60, 50);
constexpr std::uint32_t kJobTransfer = kCommunication;
constexpr std::uint32_t kJobIdle = rgb(44, 44, 52);

// Kernels: a blue whose shade depends on the name, so neighbours differ.
inline std::uint32_t kernel_color(std::uint32_t name_id) {
    const std::uint32_t h = name_id * 2654435761u;
    return rgb(30 + (h >> 27), 80 + ((h >> 20) & 0x3f), 190 + ((h >> 12) & 0x3f));
}

// NVTX ranges without a color of their own: a warm shade by name.
inline std::uint32_t range_color(std::uint32_t name_id) {
    const std::uint32_t h = name_id * 2246822519u;
    return rgb(170 + (h >> 27) * 2, 90 + ((h >> 20) & 0x3f), 50 + ((h >> 12) & 0x1f));
}

inline std::uint32_t event_color(const TimelineEvent& event) {
    switch (event.kind) {
        case EventKind::kernel:
            return kernel_color(event.name_id);
        case EventKind::memcpy:
            if (event.detail == static_cast<std::uint8_t>(trace::MemcpyDirection::host_to_device))
                return kMemcpyHostToDevice;
            if (event.detail == static_cast<std::uint8_t>(trace::MemcpyDirection::device_to_host))
                return kMemcpyDeviceToHost;
            return kMemcpyOther;
        case EventKind::memset:
            return kMemset;
        case EventKind::sync:
            return kSync;
        case EventKind::api_call:
            return event.extra ? kApiError : kApiCall;
        case EventKind::range:
            return range_color(event.name_id);
        case EventKind::mark:
            return kMark;
        case EventKind::overhead:
            return kOverhead;
    }
    return kOverhead;
}

// Sampled stack frames: a green shade by frame (green always above red and blue), apart
// from the warm NVTX ranges and the blue kernels; idle samples mixed most of the way
// into the background.
inline std::uint32_t stack_frame_color(std::uint32_t frame) {
    const std::uint32_t h = (frame + 1) * 2654435761u;
    return rgb(60 + ((h >> 26) & 0x3f), 150 + ((h >> 19) & 0x3f), 80 + ((h >> 11) & 0x3f));
}
inline std::uint32_t idle_stack_color(std::uint32_t color) {
    return rgb((red(color) * 2 + red(kBackground) * 3) / 5, (green(color) * 2 + green(kBackground) * 3) / 5,
               (blue(color) * 2 + blue(kBackground) * 3) / 5);
}

// A folded run: the first event's color, darkened so it reads as "many".
inline std::uint32_t folded_color(std::uint32_t color) {
    return rgb(red(color) * 3 / 5, green(color) * 3 / 5, blue(color) * 3 / 5);
}

}  // namespace ember::viewer::colors
