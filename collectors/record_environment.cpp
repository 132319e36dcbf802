// record_environment.cpp: see record_environment.h.
#include "collectors/record_environment.h"

#include <cstdio>
#include <string>

namespace ember::collector {

namespace {

// The shortest text that reads back as the same double.
std::string exact_number(double value) {
    char text[64];
    std::snprintf(text, sizeof text, "%.17g", value);
    return text;
}

const char* flag(bool on) {
    return on ? "1" : "0";
}

}  // namespace

const char* child_policy_name(ChildPolicy policy) {
    return policy == ChildPolicy::skip ? "skip" : "suffix";
}

std::optional<ChildPolicy> parse_child_policy(std::string_view text) {
    if (text == "suffix") return ChildPolicy::suffix;
    if (text == "skip") return ChildPolicy::skip;
    return std::nullopt;
}

std::vector<EnvironmentVariable> RecordSettings::to_environment() const {
    return {
        {kRecordOutputVariable, output},
        {kRecordRootPidVariable, std::to_string(root_pid)},
        {kRecordChildrenVariable, child_policy_name(children)},
        {kRecordPausedVariable, flag(paused)},
        {kRecordCpuHzVariable, exact_number(cpu_sample_hz)},
        {kRecordNvmlHzVariable, exact_number(nvml_hz)},
        {kRecordSocketVariable, flag(control_socket)},
        {kRecordNoCudaVariable, flag(!trace_cuda)},
        {kRecordCudaMemoryVariable, flag(trace_cuda_memory)},
        {kRecordQuietVariable, flag(quiet)},
        {kRecordPythonCallSitesVariable, flag(python_call_sites)},
    };
}

RecordSettings RecordSettings::from_environment(const EnvironmentLookup& lookup) {
    auto value = [&](const char* name) -> const char* {
        const char* text = lookup(name);
        return text != nullptr && *text != '\0' ? text : nullptr;
    };
    auto read_flag = [&](const char* name, bool fallback) {
        const char* text = value(name);
        return text ? std::string_view(text) != "0" : fallback;
    };
    auto read_rate = [&](const char* name, double fallback) {
        const char* text = value(name);
        return text ? std::atof(text) : fallback;
    };
    RecordSettings settings;
    if (const char* output = value(kRecordOutputVariable)) settings.output = output;
    if (const char* root = value(kRecordRootPidVariable)) settings.root_pid = std::atoll(root);
    // Anything but "skip" keeps the default (suffix), as the library always has.
    if (const char* children = value(kRecordChildrenVariable))
        settings.children = parse_child_policy(children).value_or(ChildPolicy::suffix);
    settings.paused = read_flag(kRecordPausedVariable, settings.paused);
    settings.cpu_sample_hz = read_rate(kRecordCpuHzVariable, settings.cpu_sample_hz);
    settings.nvml_hz = read_rate(kRecordNvmlHzVariable, settings.nvml_hz);
    settings.control_socket = read_flag(kRecordSocketVariable, settings.control_socket);
    settings.trace_cuda = !read_flag(kRecordNoCudaVariable, !settings.trace_cuda);
    settings.trace_cuda_memory = read_flag(kRecordCudaMemoryVariable, settings.trace_cuda_memory);
    settings.quiet = read_flag(kRecordQuietVariable, settings.quiet);
    settings.python_call_sites = read_flag(kRecordPythonCallSitesVariable, settings.python_call_sites);
    return settings;
}

}  // namespace ember::collector
