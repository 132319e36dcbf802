// range_roles.h: what a host range is to the analyses — a step, the host waiting for
// data, communication, or work — decided one way for every report and `ember diff`.
//
//   step             steps.h: "step" or "ProfilerStep#N";
//   dataloader wait  ember's "dataloader/wait" (the Kineto importer renames PyTorch's
//                    `enumerate(DataLoader)#...__next__` to it) and PyTorch's own names
//                    where a trace keeps them (a Chrome import);
//   communication    a range that issues a collective (communication.h: `nccl:all_reduce`,
//                    `c10d::allgather_`, NCCL's `ncclAllReduce`, ember's `allreduce/bucket`),
//                    or a range of the communication category: number 4 in ember's own
//                    domain (common/nvtx_contract.h), a category named "communication"
//                    in any other (the importer names it in each domain);
//   work             anything else.
#pragma once

#include "profiler/store/reader.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>

namespace ember::analysis {

bool is_dataloader_wait_name(std::string_view name);

enum class RangeRole : std::uint8_t { work, step, dataloader_wait, communication };

// The roles of one trace's ranges, each decided once per distinct name and category (a
// trace repeats a few thousand names millions of times).
class RangeRoles {
  public:
    explicit RangeRoles(const store::TraceReader& reader);

    RangeRole of(trace::StringId domain, trace::StringId name, std::uint32_t category);
    // The role the name alone gives: step, dataloader_wait, communication or work.
    RangeRole of_name(trace::StringId name);
    bool is_communication_category(trace::StringId domain, std::uint32_t category);

  private:
    const store::TraceReader& reader_;
    std::optional<trace::StringId> ember_domain_;
    std::unordered_map<trace::StringId, RangeRole> name_roles_;
    std::unordered_map<std::uint64_t, bool> communication_categories_;  // by domain << 32 | category
};

}  // namespace ember::analysis
