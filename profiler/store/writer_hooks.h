// writer_hooks.h: process-wide hooks that make open trace writers flush when the
// process ends: an atexit() handler that closes them, and the one SIGINT/SIGTERM
// handler of the process's trace machinery. The handler asks every participant to
// flush, stage by stage, waits (bounded) for each stage to acknowledge, then lets the
// signal do what it would have done (default action, ignore, or the previous handler).
// Stages run in order because data moves forward: producers (the collector's CUPTI
// buffers) hand their records to the writers first, then the writers commit them.
#pragma once

#include <cstdint>
#include <functional>

namespace ember::store {

// close() of each still-registered writer runs at exit().
void register_for_exit(void* writer, std::function<void()> close);
void unregister_for_exit(void* writer);

// Signal flush protocol. A participant's thread polls signal_flush_epoch(stage); when
// it grows, the thread flushes and calls acknowledge_signal_flush(stage) once. The
// handler is installed with the first participant and the previous one restored
// after the last.
enum class FlushStage : int {
    producers = 0,  // hold records the writers have not seen yet (CUPTI's buffers)
    writers = 1,    // commit what is in their rings to the file
};
void add_signal_flush_participant(FlushStage stage);
void remove_signal_flush_participant(FlushStage stage);
std::uint64_t signal_flush_epoch(FlushStage stage);
void acknowledge_signal_flush(FlushStage stage);

// fork(): the child inherits open writers but not their threads, so it must not
// touch them (a traced PyTorch program forks data-loader workers). The generation
// grows in every child; a writer created in another generation stays inert.
std::uint64_t fork_generation();
void install_fork_handler();  // once per process; called by every writer

// Blocks SIGINT/SIGTERM in the calling thread (a participant's thread), so the
// handler never runs on a thread it waits for.
void block_flush_signals_in_this_thread();

}  // namespace ember::store
