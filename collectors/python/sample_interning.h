// sample_interning.h: what the outside sampler has told the trace writer already, so
// that each frame and each thread is written once. FrameInterner gives every distinct
// frame (function, file, line) one id for the whole recording; ThreadNames gives every
// OS thread of one process its trace thread, and renames it when the name changes.
// Neither knows the writer: the caller passes how to intern, register and rename, so a
// test counts what would be written.
#pragma once

#include "collectors/python/native_stack.h"
#include "profiler/trace/events.h"

#include <functional>
#include <map>
#include <string>
#include <sys/types.h>
#include <tuple>
#include <utility>
#include <vector>

namespace ember::collector::python {

class FrameInterner {
  public:
    // Writes a frame not seen before and returns its id.
    using Intern = std::function<trace::FrameId(const MixedFrame&)>;
    explicit FrameInterner(Intern intern) : intern_(std::move(intern)) {}

    // The ids of a stack held innermost first (as snapshots read it), outermost first
    // (as the trace stores it). Valid until the next call.
    const std::vector<trace::FrameId>& outermost_first(const std::vector<MixedFrame>& innermost_first) {
        stack_.clear();
        for (auto frame = innermost_first.rbegin(); frame != innermost_first.rend(); ++frame) {
            auto key = std::make_tuple(frame->function, frame->file, frame->line);
            auto found = ids_.find(key);
            if (found == ids_.end())  // native frames: line -1, the library as file
                found = ids_.emplace(std::move(key), intern_(*frame)).first;
            stack_.push_back(found->second);
        }
        return stack_;
    }

    std::size_t size() const { return ids_.size(); }  // distinct frames written

  private:
    Intern intern_;
    std::map<std::tuple<std::string, std::string, int>, trace::FrameId> ids_;
    std::vector<trace::FrameId> stack_;
};

class ThreadNames {
  public:
    using Register = std::function<trace::ThreadId(pid_t tid, const std::string& name)>;
    using Rename = std::function<void(trace::ThreadId, const std::string& name)>;

    // The trace thread of OS thread `tid`: registered under name() when first seen.
    // With `rename_check` (about once a second: a thread renames itself now and then,
    // not every 10 ms), renamed when name() is another name, not empty. name() is
    // called only then, since it may read /proc.
    template <typename Name>
    trace::ThreadId thread(pid_t tid, bool rename_check, Name&& name, const Register& register_thread,
                           const Rename& rename) {
        auto known = ids_.find(tid);
        if (known == ids_.end()) {
            const std::string now = name();
            known = ids_.emplace(tid, register_thread(tid, now)).first;
            names_[tid] = now;
        } else if (rename_check) {
            const std::string now = name();
            if (!now.empty() && now != names_[tid]) {
                rename(known->second, now);
                names_[tid] = now;
            }
        }
        return known->second;
    }

  private:
    std::map<pid_t, trace::ThreadId> ids_;
    std::map<pid_t, std::string> names_;
};

}  // namespace ember::collector::python
