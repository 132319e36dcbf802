// memcheck.cpp: every load and store a kernel makes, checked. The kernel translation
// units are compiled with GCC's kernel-address instrumentation in its outline form
// (-fsanitize=kernel-address, one call per access; see CMakeLists.txt): the compiler
// calls __asan_{load,store}{1,2,4,8,16,N}_noabort(address) before each access, and this
// file defines those calls. Outside a kernel they return at once. Inside one:
//   the thread's own fiber stack, the launch's argument block and the executable's
//     static data                                                   not checked
//   the block's shared arena                                        race detection
//   anything else must lie inside a live cudaMalloc/cudaHostAlloc block, else the
//     access is reported and never happens: the thread is stopped before it.
//
// Race detection keeps, per shared byte, the last write and the reads since it, each
// with the barrier epoch (completed __syncthreads of the block) and, for threads of
// one warp, the warp's synchronisation epoch (completed warp intrinsics). Two accesses
// by different threads in one barrier epoch, one a write, race unless both threads
// are in one warp and a warp intrinsic completed between them. (A completed intrinsic
// orders the whole warp here even when its mask named only some lanes: a race between
// lanes outside the mask can be missed, never invented.)
//
// [SECTION] shared variables
// [SECTION] race detection
// [SECTION] global memory
// [SECTION] the instrumentation entry points
#include "engine/cuda/interpreter/simt.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>

namespace ember::cuda_interpreter::detail {

using namespace std::string_literals;

namespace {

struct DeclarationInfo {
    const char* name;
    const char* file;
    int line;
};

std::mutex& declarations_mutex() {
    static auto* mutex = new std::mutex;  // never destroyed: see findings.cpp
    return *mutex;
}
std::deque<DeclarationInfo>& declarations() {
    static auto* list = new std::deque<DeclarationInfo>;
    return *list;
}

DeclarationInfo declaration(int id) {
    if (id < 0) return {"extern __shared__ (dynamic)", "", 0};
    std::lock_guard lock(declarations_mutex());
    return declarations()[static_cast<std::size_t>(id)];
}

std::string hex_address(uintptr_t address) {
    char text[32];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(address));
    return text;
}

std::string file_name(const char* path) {
    std::string file = path;
    const auto slash = file.find_last_of('/');
    return slash == std::string::npos ? file : file.substr(slash + 1);
}

SimThread& require_thread() {
    SimThread* thread = current_thread;
    if (!thread) {
        std::fprintf(stderr, "ember kernel interpreter: shared memory used outside a kernel\n");
        std::abort();
    }
    return *thread;
}

// ============================================================================================
// [SECTION] shared variables
// ============================================================================================

// Places a variable in the arena after the last one, behind a redzone, poisoned.
std::byte* place(Block& block, int declaration_id, std::size_t bytes, std::size_t alignment) {
    alignment = std::max<std::size_t>(alignment, 16);
    const uintptr_t arena = reinterpret_cast<uintptr_t>(block.arena);
    const uintptr_t start = (arena + block.arena_used + alignment - 1) / alignment * alignment;
    const std::size_t offset = start - arena;
    if (offset + bytes + kSharedRedzoneBytes > kSharedArenaBytes) return nullptr;
    const int slot = static_cast<int>(block.slots.size());
    block.slots.push_back({declaration_id, offset, bytes});
    // The NaN pattern of f32, f16 and bf16 (and -1 for integers): a value read before
    // anyone wrote it cannot pass for a result.
    std::memset(block.arena + offset, 0xff, bytes);
    for (std::size_t i = 0; i < bytes; ++i) {
        block.shadow[offset + i] = ShadowCell{};
        block.shadow[offset + i].variable = slot;
    }
    for (std::size_t i = 0; i < kSharedRedzoneBytes; ++i) block.shadow[offset + bytes + i] = ShadowCell{};
    block.arena_used = offset + bytes + kSharedRedzoneBytes;
    return block.arena + offset;
}

}  // namespace

void reset_shared_memory(Block& block, std::size_t dynamic_bytes) {
    std::fill(block.shadow, block.shadow + block.arena_used, ShadowCell{});
    for (const SharedSlot& slot : block.slots)
        if (slot.declaration >= 0) block.slot_of_declaration[static_cast<std::size_t>(slot.declaration)] = -1;
    block.slots.clear();
    block.arena_used = 0;
    block.shared_limit_reported = false;
    if (dynamic_bytes > 0) place(block, -1, dynamic_bytes, 16);
}

std::string shared_variable_name(const Block& block, uintptr_t address) {
    const std::size_t offset = address - reinterpret_cast<uintptr_t>(block.arena);
    const ShadowCell& cell = block.shadow[offset];
    int slot = cell.variable;
    std::string where;
    if (slot < 0) {
        // In a redzone or past the last variable: name the variable before it.
        for (int s = static_cast<int>(block.slots.size()) - 1; s >= 0; --s)
            if (block.slots[s].offset <= offset) {
                slot = s;
                break;
            }
        if (slot < 0) return "no shared variable";
        const SharedSlot& before = block.slots[slot];
        const DeclarationInfo info = declaration(before.declaration);
        return std::to_string(offset - before.offset - before.bytes) + " bytes past the end of `" + info.name + "` (" +
               std::to_string(before.bytes) + " bytes" +
               (info.line ? ", "s + file_name(info.file) + ":" + std::to_string(info.line) : std::string()) + ")";
    }
    const SharedSlot& owner = block.slots[slot];
    const DeclarationInfo info = declaration(owner.declaration);
    return "`"s + info.name + "` + " + std::to_string(offset - owner.offset) + " bytes" +
           (info.line ? " ("s + file_name(info.file) + ":" + std::to_string(info.line) + ")" : std::string());
}

namespace {

// ============================================================================================
// [SECTION] race detection
// ============================================================================================

// One report per hazard and variable per launch: the first says what is wrong.
std::string variable_key(const Block& block, uintptr_t address) {
    const int slot = block.shadow[address - reinterpret_cast<uintptr_t>(block.arena)].variable;
    return slot < 0 ? std::string("none") : std::to_string(block.slots[static_cast<std::size_t>(slot)].declaration);
}

uint3 index_of(const Block& block, int linear) {
    return block.threads[static_cast<std::size_t>(linear)].index;
}

std::string thread_text(const Block& block, int linear) {
    const uint3 i = index_of(block, linear);
    return "thread (" + std::to_string(i.x) + "," + std::to_string(i.y) + "," + std::to_string(i.z) + ")";
}

// Whether an access by `other` (in this barrier epoch, at warp epoch `other_warp_epoch`
// of its warp) may run concurrently with the current thread's.
bool unordered(const Block& block, const SimThread& thread, int other_warp, uint32_t other_warp_epoch) {
    if (other_warp != thread.warp) return true;
    return other_warp_epoch == block.warps[static_cast<std::size_t>(thread.warp)].sync_epoch;
}

void report_race(SimThread& thread, uintptr_t address, const char* hazard, const std::string& other) {
    Block& block = *thread.block;
    const std::string variable = shared_variable_name(block, address);
    report(*block.launch, FindingKind::shared_memory_race, block.index, &thread.index, address,
           std::string(hazard) + " race on shared " + variable + ": " + thread_text(block, thread.linear) + " " +
               (hazard[0] == 'r' ? "reads" : "writes") + " it and " + other +
               " since the last __syncthreads (barrier epoch " + std::to_string(block.barrier_epoch) + ")",
           std::string("race:") + hazard + ":" + variable_key(block, address));
}

void shared_access(SimThread& thread, uintptr_t address, std::size_t bytes, bool write, bool atomic) {
    Block& block = *thread.block;
    const std::size_t offset = address - reinterpret_cast<uintptr_t>(block.arena);
    const uint32_t epoch = block.barrier_epoch + 1;
    const uint32_t warp_epoch = block.warps[static_cast<std::size_t>(thread.warp)].sync_epoch;
    bool reported = false;
    for (std::size_t i = 0; i < bytes; ++i) {
        if (offset + i >= kSharedArenaBytes || block.shadow[offset + i].variable < 0) {
            report(*block.launch, FindingKind::shared_out_of_bounds, block.index, &thread.index, address + i,
                   std::string(write ? "write" : "read") + " of " + std::to_string(bytes) +
                       " bytes of shared memory at " + shared_variable_name(block, address + i),
                   "shared-oob:" + std::to_string(offset + i));
            return;
        }
        ShadowCell& cell = block.shadow[offset + i];
        if (atomic) {
            // Atomics never race with each other; they count as an initialising write.
            cell.write_epoch = epoch;
            cell.writer = ShadowCell::kAtomic;
            continue;
        }
        const bool written_now =
            cell.write_epoch == epoch && cell.writer != ShadowCell::kAtomic && cell.writer != thread.linear;
        if (write) {
            if (!reported && written_now && unordered(block, thread, cell.writer / kWarpSize, cell.write_warp_epoch)) {
                report_race(thread, address, "write-after-write", thread_text(block, cell.writer) + " wrote it");
                reported = true;
            }
            if (!reported && cell.read_epoch == epoch && cell.reader != thread.linear) {
                bool race;
                std::string readers;
                if (cell.reader == ShadowCell::kMany) {
                    race = cell.reader_warp == ShadowCell::kMultiWarp ||
                           unordered(block, thread, cell.reader_warp, cell.read_warp_epoch);
                    readers = cell.reader_warp == ShadowCell::kMultiWarp
                                  ? "threads of several warps read"
                                  : "threads of warp " + std::to_string(cell.reader_warp) + " read";
                } else {
                    race = unordered(block, thread, cell.reader / kWarpSize, cell.read_warp_epoch);
                    readers = thread_text(block, cell.reader) + " read";
                }
                if (race) {
                    report_race(thread, address, "write-after-read", readers);
                    reported = true;
                }
            }
            cell.write_epoch = epoch;
            cell.write_warp_epoch = warp_epoch;
            cell.writer = static_cast<uint16_t>(thread.linear);
            cell.read_epoch = 0;
            cell.reader = ShadowCell::kNone;
        } else {
            if (cell.write_epoch == 0) {
                if (!reported)
                    report(*block.launch, FindingKind::uninitialized_shared_read, block.index, &thread.index, address,
                           "read of shared " + shared_variable_name(block, address) +
                               ", which no thread of the block has written",
                           "uninitialized:" + variable_key(block, address));
                reported = true;
            } else if (!reported && written_now &&
                       unordered(block, thread, cell.writer / kWarpSize, cell.write_warp_epoch)) {
                report_race(thread, address, "read-after-write", thread_text(block, cell.writer) + " wrote it");
                reported = true;
            }
            if (cell.read_epoch != epoch) {
                cell.read_epoch = epoch;
                cell.reader = static_cast<uint16_t>(thread.linear);
                cell.reader_warp = static_cast<uint16_t>(thread.warp);
                cell.read_warp_epoch = warp_epoch;
            } else if (cell.reader != thread.linear) {
                if (cell.reader != ShadowCell::kMany) {
                    cell.reader_warp = cell.reader / kWarpSize == thread.warp ? static_cast<uint16_t>(thread.warp)
                                                                              : ShadowCell::kMultiWarp;
                    cell.reader = ShadowCell::kMany;
                } else if (cell.reader_warp != thread.warp) {
                    cell.reader_warp = ShadowCell::kMultiWarp;
                }
                cell.read_warp_epoch = std::max(cell.read_warp_epoch, warp_epoch);
            }
        }
    }
}

// ============================================================================================
// [SECTION] global memory
// ============================================================================================

// The block that held the last checked address, per worker, and the launch it was
// found in (a copy: the map may be gone and its address reused by the next launch's).
thread_local uint64_t t_cached_launch = 0;
thread_local MemoryBlock t_cached_block;

bool inside(const MemoryBlock& block, uintptr_t address, std::size_t bytes) {
    return address >= block.base && address - block.base + bytes <= block.bytes;
}

void global_access(SimThread& thread, uintptr_t address, std::size_t bytes, bool write) {
    Launch& launch = *thread.block->launch;
    const MemoryMap& memory = *launch.memory;
    if (t_cached_launch == launch.id && inside(t_cached_block, address, bytes)) return;
    auto next = std::upper_bound(memory.begin(), memory.end(), address,
                                 [](uintptr_t a, const MemoryBlock& block) { return a < block.base; });
    if (next != memory.begin() && inside(*std::prev(next), address, bytes)) {
        t_cached_launch = launch.id;
        t_cached_block = *std::prev(next);
        return;
    }
    Block& block = *thread.block;
    report(launch, FindingKind::global_out_of_bounds, block.index, &thread.index, address,
           std::string("out-of-bounds ") + (write ? "write" : "read") + " of " + std::to_string(bytes) + " bytes at " +
               hex_address(address) + ": " + describe_address(memory, address, bytes));
    abandon(thread);
}

void check_access(uintptr_t address, std::size_t bytes, bool write, bool atomic = false) {
    SimThread* thread = current_thread;
    if (!thread || thread->in_runtime) return;
    if (address - thread->stack_low < thread->stack_bytes) return;
    const RuntimeScope runtime;
    Block& block = *thread->block;
    if (address - reinterpret_cast<uintptr_t>(block.arena) < kSharedArenaBytes) {
        shared_access(*thread, address, bytes, write, atomic);
        return;
    }
    const Launch& launch = *block.launch;
    if (address - launch.arguments_base < launch.request.argument_bytes) return;
    if (address - launch.static_image_begin < launch.static_image_end - launch.static_image_begin) return;
    global_access(*thread, address, bytes, write);
}

}  // namespace

void check_atomic_access(void* address, std::size_t bytes) {
    check_access(reinterpret_cast<uintptr_t>(address), bytes, true, true);
}

}  // namespace ember::cuda_interpreter::detail

namespace ember::cuda_interpreter {

using namespace detail;

SharedDeclaration::SharedDeclaration(const char* name, const char* file, int line) {
    const RuntimeScope runtime;
    std::lock_guard lock(declarations_mutex());
    id_ = static_cast<int>(declarations().size());
    declarations().push_back({name, file, line});
}

void* shared_storage(const SharedDeclaration& declaration_site, std::size_t bytes, std::size_t alignment) {
    SimThread& thread = require_thread();
    const RuntimeScope runtime;
    Block& block = *thread.block;
    const auto id = static_cast<std::size_t>(declaration_site.id());
    if (id < block.slot_of_declaration.size() && block.slot_of_declaration[id] >= 0)
        return block.arena + block.slots[static_cast<std::size_t>(block.slot_of_declaration[id])].offset;
    std::byte* storage = place(block, declaration_site.id(), bytes, alignment);
    const std::size_t used = block.arena_used - kSharedRedzoneBytes * block.slots.size();
    if (!storage || (used > kSharedLimitBytes && !block.shared_limit_reported)) {
        block.shared_limit_reported = true;
        const DeclarationInfo info = declaration(declaration_site.id());
        report(*block.launch, FindingKind::shared_out_of_bounds, block.index, &thread.index, 0,
               std::string("shared variable `") + info.name + "` (" + std::to_string(bytes) +
                   " bytes) takes the block past the " + std::to_string(kSharedLimitBytes) +
                   " bytes of shared memory a block may use");
        if (!storage) abandon(thread);
    }
    if (id >= block.slot_of_declaration.size()) block.slot_of_declaration.resize(id + 1, -1);
    block.slot_of_declaration[id] = static_cast<int32_t>(block.slots.size() - 1);
    return storage;
}

void* dynamic_shared_storage() {
    SimThread& thread = require_thread();
    return thread.block->arena;  // the dynamic region is placed first (reset_shared_memory)
}

}  // namespace ember::cuda_interpreter

// ============================================================================================
// [SECTION] the instrumentation entry points
// ============================================================================================
// The names and signatures GCC's kernel-address instrumentation calls. Under the asan
// preset libasan defines them too; ours take precedence in the executable, and
// user-space ASan code never calls the _noabort forms (ember builds without
// -fsanitize-recover=address), so nothing else is affected.
using ember::cuda_interpreter::detail::check_access;

extern "C" {
void __asan_load1_noabort(uintptr_t address) {
    check_access(address, 1, false);
}
void __asan_load2_noabort(uintptr_t address) {
    check_access(address, 2, false);
}
void __asan_load4_noabort(uintptr_t address) {
    check_access(address, 4, false);
}
void __asan_load8_noabort(uintptr_t address) {
    check_access(address, 8, false);
}
void __asan_load16_noabort(uintptr_t address) {
    check_access(address, 16, false);
}
void __asan_loadN_noabort(uintptr_t address, std::size_t bytes) {
    check_access(address, bytes, false);
}
void __asan_store1_noabort(uintptr_t address) {
    check_access(address, 1, true);
}
void __asan_store2_noabort(uintptr_t address) {
    check_access(address, 2, true);
}
void __asan_store4_noabort(uintptr_t address) {
    check_access(address, 4, true);
}
void __asan_store8_noabort(uintptr_t address) {
    check_access(address, 8, true);
}
void __asan_store16_noabort(uintptr_t address) {
    check_access(address, 16, true);
}
void __asan_storeN_noabort(uintptr_t address, std::size_t bytes) {
    check_access(address, bytes, true);
}
#if !defined(EMBER_INTERPRETER_UNDER_ASAN)
// Called before noreturn calls (throw); libasan's own serves under the asan preset.
void __asan_handle_no_return() {}
#endif
}
