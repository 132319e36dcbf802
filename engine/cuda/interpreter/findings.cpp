// findings.cpp: what the interpreter's checks found, and which kernels it ran. A
// finding is printed to stderr as it is found (the first few per launch), kept for
// take_findings(), and makes its launch fail (scheduler.cpp's execute_launch).
#include "engine/cuda/interpreter/simt.h"

#include <cstdio>
#include <map>
#include <utility>

namespace ember::cuda_interpreter::detail {

namespace {

constexpr int kPrintedPerLaunch = 8;
constexpr std::size_t kKeptFindings = 10000;

// Never destroyed (like the rest of the interpreter's state): a launch from a static
// destructor during exit still finds them.
std::mutex& findings_mutex() {
    static auto* mutex = new std::mutex;
    return *mutex;
}
std::vector<Finding>& findings() {
    static auto* list = new std::vector<Finding>;
    return *list;
}
std::map<std::pair<std::string, std::string>, uint64_t>& launch_counts() {
    static auto* counts = new std::map<std::pair<std::string, std::string>, uint64_t>;
    return *counts;
}

std::string index_text(const uint3& i) {
    char text[48];
    std::snprintf(text, sizeof text, "(%u,%u,%u)", i.x, i.y, i.z);
    return text;
}

// `kernel<float>` and `kernel` are one kernel.
std::string kernel_name(const char* written) {
    std::string name = written;
    const auto angle = name.find('<');
    if (angle != std::string::npos) name.resize(angle);
    while (!name.empty() && name.back() == ' ') name.pop_back();
    return name;
}

}  // namespace

void report(Launch& launch, FindingKind kind, const uint3& block, const uint3* thread, uintptr_t address,
            const std::string& message, const std::string& key) {
    Finding finding;
    finding.kind = kind;
    finding.kernel = launch.request.kernel;
    finding.block[0] = block.x;
    finding.block[1] = block.y;
    finding.block[2] = block.z;
    if (thread) {
        finding.thread[0] = thread->x;
        finding.thread[1] = thread->y;
        finding.thread[2] = thread->z;
    }
    finding.address = address;
    std::string text = std::string(finding_kind_name(kind)) + " in kernel " + launch.request.kernel + " (launched at " +
                       launch.request.file + ":" + std::to_string(launch.request.line) + "), block " +
                       index_text(block);
    if (thread) text += ", thread " + index_text(*thread);
    if (address) {
        char hex[32];
        std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(address));
        text += ", address " + std::string(hex);
    }
    text += ": " + message;
    finding.message = text;

    bool print = false;
    {
        std::lock_guard lock(launch.findings_mutex);
        if (!key.empty() && !launch.finding_keys.insert(key).second) return;
        if (launch.finding_count++ == 0) launch.first_finding = text;
        if (kind == FindingKind::global_out_of_bounds) launch.out_of_bounds = true;
        print = launch.printed < kPrintedPerLaunch;
        if (print) ++launch.printed;
    }
    if (print) std::fprintf(stderr, "[ember kernel interpreter] %s\n", text.c_str());
    std::lock_guard lock(findings_mutex());
    if (findings().size() < kKeptFindings) findings().push_back(std::move(finding));
}

void count_launch(const LaunchRequest& request) {
    std::lock_guard lock(findings_mutex());
    ++launch_counts()[{request.file, kernel_name(request.kernel)}];
}

}  // namespace ember::cuda_interpreter::detail

namespace ember::cuda_interpreter {

const char* finding_kind_name(FindingKind kind) {
    switch (kind) {
        case FindingKind::shared_memory_race:
            return "shared-memory race";
        case FindingKind::uninitialized_shared_read:
            return "uninitialized shared-memory read";
        case FindingKind::shared_out_of_bounds:
            return "shared-memory out-of-bounds access";
        case FindingKind::global_out_of_bounds:
            return "global-memory out-of-bounds access";
        case FindingKind::barrier_divergence:
            return "barrier divergence";
        case FindingKind::warp_divergence:
            return "warp divergence";
        case FindingKind::kernel_exception:
            return "exception in a kernel";
    }
    return "finding";
}

std::vector<Finding> take_findings() {
    std::lock_guard lock(detail::findings_mutex());
    std::vector<Finding> taken = std::move(detail::findings());
    detail::findings().clear();
    return taken;
}

std::vector<KernelLaunchCount> launched_kernels() {
    std::lock_guard lock(detail::findings_mutex());
    std::vector<KernelLaunchCount> list;
    for (const auto& [key, launches] : detail::launch_counts()) list.push_back({key.first, key.second, launches});
    return list;
}

}  // namespace ember::cuda_interpreter
