// event_ring.h: the bounded per-thread buffer between a producer thread and the
// writer thread: a single-producer single-consumer ring of fixed-size records.
// The producer owns `tail`, the writer owns `head`; both are plain atomics, so
// recording an event is a copy and one release store — no lock, no allocation.
#pragma once

#include "profiler/trace/events.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>

namespace ember::store {

enum class RecordType : std::uint8_t {
    kernel,
    memcpy,
    memset,
    sync,
    api_call,
    range,
    mark,
    counter,
    stack_sample,
    overhead,
    dropped,
    collective_call,
    memory_event,
    memory_block,
};

// The largest event, rounded up: every record has room for any event.
constexpr std::size_t kRecordPayloadBytes = std::max(
    {sizeof(trace::KernelEvent), sizeof(trace::MemcpyEvent), sizeof(trace::MemsetEvent), sizeof(trace::SyncEvent),
     sizeof(trace::ApiEvent), sizeof(trace::RangeEvent), sizeof(trace::MarkEvent), sizeof(trace::CounterSample),
     sizeof(trace::StackSample), sizeof(trace::OverheadEvent), sizeof(trace::DroppedRecords),
     sizeof(trace::CollectiveCall), sizeof(trace::MemoryEvent), sizeof(trace::MemoryBlock)});

struct Record {
    RecordType type;
    alignas(8) unsigned char payload[kRecordPayloadBytes];

    template <typename Event>
    void store(RecordType record_type, const Event& event) {
        static_assert(std::is_trivially_copyable_v<Event> && sizeof(Event) <= kRecordPayloadBytes);
        type = record_type;
        std::memcpy(payload, &event, sizeof(Event));
    }
    template <typename Event>
    Event load() const {
        Event event;
        std::memcpy(&event, payload, sizeof(Event));
        return event;
    }
};

class EventRing {
  public:
    static constexpr std::uint64_t kPrefetchDistance = 4;  // records ahead of the producer

    explicit EventRing(std::size_t capacity) {
        std::size_t rounded = 1024;
        while (rounded < capacity) rounded <<= 1;
        capacity_ = rounded;
        // Not zeroed: pages become resident only as the ring first reaches them, so a
        // thread that records little costs little memory.
        slots_ = std::make_unique_for_overwrite<Record[]>(rounded);
    }

    // The producing thread's id when it registered (TraceWriter::current_thread), else 0.
    trace::ThreadId thread_id() const { return thread_id_.load(std::memory_order_relaxed); }
    void set_thread_id(trace::ThreadId id) { thread_id_.store(id, std::memory_order_relaxed); }
    std::size_t capacity() const { return capacity_; }

    // Producer side. False when full (nothing written).
    template <typename Event>
    bool try_push(RecordType type, const Event& event) {
        std::uint64_t tail = tail_.load(std::memory_order_relaxed);
        if (tail - cached_head_ >= capacity_) {
            cached_head_ = head_.load(std::memory_order_acquire);
            if (tail - cached_head_ >= capacity_) return false;
        }
        slots_[tail & (capacity_ - 1)].store(type, event);
        // The slots ahead were last touched by the writer thread (or never): ask for
        // their cache lines now, so the store a few events from now does not wait
        // for them (the slot write's cache miss was most of a recorded NVTX range).
        __builtin_prefetch(&slots_[(tail + kPrefetchDistance) & (capacity_ - 1)], 1, 3);
        tail_.store(tail + 1, std::memory_order_release);
        return true;
    }

    // Either side: records the ring could take now.
    std::uint64_t free_space() const {
        return capacity_ - (tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_acquire));
    }

    // Consumer side: records [head, tail) are readable until release(n).
    std::uint64_t available() const {
        return tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_relaxed);
    }
    const Record& at(std::uint64_t offset) const {
        return slots_[(head_.load(std::memory_order_relaxed) + offset) & (capacity_ - 1)];
    }
    void release(std::uint64_t count) {
        head_.store(head_.load(std::memory_order_relaxed) + count, std::memory_order_release);
    }

    // Events this ring refused (drop policy); read and reset by the writer.
    std::atomic<std::uint64_t> dropped{0};
    // The producing thread exited; the writer drains the ring and forgets it.
    std::atomic<bool> retired{false};
    // The writer closed; producers stop pushing.
    std::atomic<bool> closed{false};

  private:
    alignas(64) std::atomic<std::uint64_t> head_{0};
    alignas(64) std::atomic<std::uint64_t> tail_{0};
    std::uint64_t cached_head_ = 0;  // producer's last view of head_
    alignas(64) std::size_t capacity_ = 0;
    std::unique_ptr<Record[]> slots_;
    std::atomic<trace::ThreadId> thread_id_{0};
};

}  // namespace ember::store
