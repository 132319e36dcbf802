// collective_args.h: Kineto's collective metadata of kernels and ranges (the
// collective_calls table), found by event and spelled under Kineto's own argument
// names ("Collective name", "Process Group Name", "Seq", ...), for every export that
// writes event arguments (Chrome JSON, Perfetto).
#pragma once

#include "profiler/store/reader.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string_view>
#include <tuple>
#include <vector>

namespace ember::exporting {

class CollectiveArgs {
  public:
    explicit CollectiveArgs(const store::TraceReader& reader);

    // The call of the kernel (on_stream: track is its StreamId) or range (track is its
    // ThreadId) that starts at `start`; nullptr when it has none.
    const trace::CollectiveCall* find(bool on_stream, std::uint32_t track, trace::TimeNs start) const;

    using Text = std::function<void(std::string_view key, std::string_view value)>;
    using Number = std::function<void(std::string_view key, std::int64_t value)>;
    // Each known field of `call`, in Kineto's order, under Kineto's key.
    void for_each_arg(const trace::CollectiveCall& call, const Text& text, const Number& number) const;

  private:
    const store::TraceReader& reader_;
    std::vector<trace::CollectiveCall> calls_;
    std::map<std::tuple<bool, std::uint32_t, trace::TimeNs>, const trace::CollectiveCall*> by_event_;
};

}  // namespace ember::exporting
