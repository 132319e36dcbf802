// range_roles.cpp: see range_roles.h.
#include "profiler/analysis/range_roles.h"

#include "common/nvtx_contract.h"
#include "profiler/analysis/communication.h"
#include "profiler/analysis/steps.h"

namespace ember::analysis {

bool is_dataloader_wait_name(std::string_view name) {
    return name == nvtx::range::kDataloaderWait ||
           (name.starts_with("enumerate(DataLoader)#") && name.ends_with(".__next__")) ||
           name.starts_with("enumerate(DataPipe)#");
}

RangeRoles::RangeRoles(const store::TraceReader& reader) : reader_(reader) {
    ember_domain_ = reader.find_string(nvtx::kDomain);
}

RangeRole RangeRoles::of_name(trace::StringId name) {
    auto [found, inserted] = name_roles_.try_emplace(name, RangeRole::work);
    if (inserted) {
        const std::string_view text = reader_.string(name);
        if (is_step_range_name(text))
            found->second = RangeRole::step;
        else if (is_dataloader_wait_name(text))
            found->second = RangeRole::dataloader_wait;
        else if (collective_kind_of_operation(text))
            found->second = RangeRole::communication;
    }
    return found->second;
}

RangeRole RangeRoles::of(trace::StringId domain, trace::StringId name, std::uint32_t category) {
    const RangeRole by_name = of_name(name);
    if (by_name != RangeRole::work) return by_name;
    return is_communication_category(domain, category) ? RangeRole::communication : RangeRole::work;
}

bool RangeRoles::is_communication_category(trace::StringId domain, std::uint32_t category) {
    if (category == nvtx::number(nvtx::Category::none)) return false;
    const std::uint64_t key = (static_cast<std::uint64_t>(domain) << 32) | category;
    auto [found, inserted] = communication_categories_.try_emplace(key, false);
    if (inserted) {
        constexpr std::uint32_t kCommunication = nvtx::number(nvtx::Category::communication);
        found->second =
            (ember_domain_ && domain == *ember_domain_ && category == kCommunication) ||
            reader_.nvtx_category_name(domain, category) == nvtx::category_name(nvtx::Category::communication);
    }
    return found->second;
}

}  // namespace ember::analysis
