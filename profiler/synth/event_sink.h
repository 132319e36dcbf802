// event_sink.h: where the synthetic trace generator sends what it makes. The
// usual sink is a TraceWriter (WriterSink); `ember bench store` also feeds the
// same stream to a plain one-row-per-INSERT loop and to a counter, so every
// contender receives exactly the same rows.
#pragma once

#include "profiler/store/writer.h"
#include "profiler/trace/events.h"

#include <span>
#include <string_view>

namespace ember::synth {

class EventSink {
  public:
    virtual ~EventSink() = default;

    virtual trace::StringId intern(std::string_view text) = 0;
    virtual void register_process(const trace::ProcessInfo& process) = 0;
    virtual trace::ThreadId register_thread(const trace::ThreadInfo& thread) = 0;
    virtual void register_device(const trace::DeviceInfo& device) = 0;
    virtual trace::StreamId register_stream(const trace::StreamInfo& stream) = 0;
    virtual trace::CounterId register_counter(const trace::CounterInfo& counter) = 0;
    virtual trace::FrameId intern_frame(std::string_view function, std::string_view module, std::uint64_t address) = 0;
    virtual trace::StackId intern_stack(std::span<const trace::FrameId> frames_outermost_first) = 0;
    virtual trace::RangeId next_range_id() = 0;

    virtual void record_kernel(const trace::KernelEvent& event) = 0;
    virtual void record_memcpy(const trace::MemcpyEvent& event) = 0;
    virtual void record_memset(const trace::MemsetEvent& event) = 0;
    virtual void record_sync(const trace::SyncEvent& event) = 0;
    virtual void record_api_call(const trace::ApiEvent& event) = 0;
    virtual void record_range(const trace::RangeEvent& event) = 0;
    virtual void record_mark(const trace::MarkEvent& event) = 0;
    virtual void record_counter(const trace::CounterSample& sample) = 0;
    virtual void record_stack_sample(const trace::StackSample& sample) = 0;
    virtual void record_overhead(const trace::OverheadEvent& event) = 0;
};

// Forwards everything to a TraceWriter.
class WriterSink : public EventSink {
  public:
    explicit WriterSink(store::TraceWriter& writer) : writer_(writer) {}

    trace::StringId intern(std::string_view text) override { return writer_.intern(text); }
    void register_process(const trace::ProcessInfo& process) override { writer_.register_process(process); }
    trace::ThreadId register_thread(const trace::ThreadInfo& thread) override {
        return writer_.register_thread(thread);
    }
    void register_device(const trace::DeviceInfo& device) override { writer_.register_device(device); }
    trace::StreamId register_stream(const trace::StreamInfo& stream) override {
        return writer_.register_stream(stream);
    }
    trace::CounterId register_counter(const trace::CounterInfo& counter) override {
        return writer_.register_counter(counter);
    }
    trace::FrameId intern_frame(std::string_view function, std::string_view module, std::uint64_t address) override {
        return writer_.intern_frame(function, module, address);
    }
    trace::StackId intern_stack(std::span<const trace::FrameId> frames) override {
        return writer_.intern_stack(frames);
    }
    trace::RangeId next_range_id() override { return writer_.next_range_id(); }

    void record_kernel(const trace::KernelEvent& e) override { writer_.record_kernel(e); }
    void record_memcpy(const trace::MemcpyEvent& e) override { writer_.record_memcpy(e); }
    void record_memset(const trace::MemsetEvent& e) override { writer_.record_memset(e); }
    void record_sync(const trace::SyncEvent& e) override { writer_.record_sync(e); }
    void record_api_call(const trace::ApiEvent& e) override { writer_.record_api_call(e); }
    void record_range(const trace::RangeEvent& e) override { writer_.record_range(e); }
    void record_mark(const trace::MarkEvent& e) override { writer_.record_mark(e); }
    void record_counter(const trace::CounterSample& e) override { writer_.record_counter(e); }
    void record_stack_sample(const trace::StackSample& e) override { writer_.record_stack_sample(e); }
    void record_overhead(const trace::OverheadEvent& e) override { writer_.record_overhead(e); }

  private:
    store::TraceWriter& writer_;
};

}  // namespace ember::synth
