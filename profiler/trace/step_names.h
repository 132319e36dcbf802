// step_names.h: how the traces name their steps, for the importers and the analyses.
#pragma once

#include "common/nvtx_contract.h"

#include <cstdint>
#include <optional>
#include <string_view>

namespace ember::trace {

// The number of a PyTorch profiler step range: "ProfilerStep#12" -> 12; nullopt for any
// other name (no digits, other characters, more than 18 digits).
inline std::optional<std::int64_t> profiler_step_number(std::string_view name) {
    constexpr std::string_view kPrefix = nvtx::range::kProfilerStepPrefix;
    if (name.substr(0, kPrefix.size()) != kPrefix || name.size() == kPrefix.size() || name.size() > kPrefix.size() + 18)
        return std::nullopt;
    std::int64_t number = 0;
    for (char c : name.substr(kPrefix.size())) {
        if (c < '0' || c > '9') return std::nullopt;
        number = number * 10 + (c - '0');
    }
    return number;
}

}  // namespace ember::trace
