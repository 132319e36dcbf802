// writer_hooks.h: process-wide hooks that make open trace writers flush when the
// process ends: an atexit() handler that closes them, and SIGINT/SIGTERM handlers
// that wait (bounded) until every writer thread has committed, then let the signal
// do what it would have done (default action, ignore, or the previous handler).
#pragma once

#include <cstdint>
#include <functional>

namespace ember::store {

// close() of each still-registered writer runs at exit().
void register_for_exit(void* writer, std::function<void()> close);
void unregister_for_exit(void* writer);

// Signal flush protocol. A writer thread polls signal_flush_epoch(); when it grows
// the thread commits everything and calls acknowledge_signal_flush().
void add_signal_flushing_writer();     // installs the handlers with the first writer
void remove_signal_flushing_writer();  // restores the old handlers after the last
std::uint64_t signal_flush_epoch();
void acknowledge_signal_flush();

// fork(): the child inherits open writers but not their threads, so it must not
// touch them (a traced PyTorch program forks data-loader workers). The generation
// grows in every child; a writer created in another generation stays inert.
std::uint64_t fork_generation();
void install_fork_handler();  // once per process; called by every writer

// Blocks SIGINT/SIGTERM in the calling thread (the writer thread), so the handler
// never runs on the thread it waits for.
void block_flush_signals_in_this_thread();

}  // namespace ember::store
