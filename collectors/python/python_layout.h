// python_layout.h: where CPython keeps what a stack reader needs, per version, on
// 64-bit Linux. 3.8 to 3.12 from each release's headers (Include/internal/
// pycore_runtime.h, pycore_interp.h, cpython/pystate.h, cpython/code.h,
// cpython/frameobject.h / pycore_frame.h, cpython/unicodeobject.h); 3.13 from the
// `_Py_DebugOffsets` the interpreter publishes at the start of `_PyRuntime` for
// out-of-process readers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace ember::collector::python {

struct PythonVersion {
    int major = 0;
    int minor = 0;
    int micro = 0;
    std::string text() const;  // "3.11.7" ("3.11" when the micro version is unknown: -1)
};

// How a frame's line is found from its code object's line table.
enum class LineTable {
    lnotab,     // 3.8, 3.9: co_lnotab, (byte offset delta, line delta) pairs; f_lasti in bytes
    linetable,  // 3.10: co_linetable, (byte delta, line delta) pairs, -128 = no line; f_lasti in code units
    locations,  // 3.11+: co_linetable, the location table (PEP 657)
};

struct PythonLayout {
    // _PyRuntimeState
    std::uint64_t runtime_interpreters_head = 0;
    // PyInterpreterState
    std::uint64_t interp_next = 0;
    std::uint64_t interp_threads_head = 0;
    // PyThreadState
    std::uint64_t tstate_size = 0;  // bytes read at once
    std::uint64_t tstate_next = 0;
    std::uint64_t tstate_interp = 0;
    // 3.8-3.10: the frame object; 3.11-3.12: the _PyCFrame pointer; 3.13: the frame.
    std::uint64_t tstate_frame = 0;
    bool frame_through_cframe = false;  // 3.11, 3.12
    std::uint64_t cframe_current_frame = 0;
    std::uint64_t tstate_thread_id = 0;                    // pthread_t
    std::optional<std::uint64_t> tstate_native_thread_id;  // 3.11+
    // Frames: PyFrameObject (3.8-3.10) or _PyInterpreterFrame (3.11+)
    bool interpreter_frames = false;
    std::uint64_t frame_size = 0;
    std::uint64_t frame_back = 0;              // f_back / previous
    std::uint64_t frame_code = 0;              // f_code / f_executable
    std::uint64_t frame_lasti = 0;             // 3.8-3.10: int f_lasti
    std::uint64_t frame_instr = 0;             // 3.11+: prev_instr / instr_ptr
    std::optional<std::uint64_t> frame_owner;  // 3.11+ (char)
    // 3.11: bool is_entry, set on the first frame a C-level _PyEval_EvalFrameDefault
    // call runs (3.12+ mark that place with a frame owned by the C stack instead).
    std::optional<std::uint64_t> frame_is_entry;
    // 3.8-3.10, for the class of a method (py-spy's way: 3.8-3.10 code objects have no
    // co_qualname): the frame's first local (f_localsplus[0]), the code object's
    // argument count and co_varnames, and a type's tp_name.
    std::optional<std::uint64_t> frame_localsplus;
    std::uint64_t code_argcount = 16;
    std::uint64_t code_varnames = 72;
    std::uint64_t type_name = 24;
    // Where a frame's local variables start (f_localsplus, localsplus): the `self` of
    // threading's Thread._bootstrap frame, for the thread's name.
    std::uint64_t frame_locals = 0;
    // PyCodeObject
    std::uint64_t code_size = 0;  // bytes read at once
    std::uint64_t code_filename = 0;
    std::uint64_t code_name = 0;
    std::optional<std::uint64_t> code_qualname;  // 3.11+
    std::uint64_t code_linetable = 0;
    std::uint64_t code_firstlineno = 0;
    std::uint64_t code_adaptive = 0;  // 3.11+: the first code unit
    LineTable line_table = LineTable::lnotab;
    // PyASCIIObject / PyCompactUnicodeObject
    std::uint64_t unicode_length = 16;
    std::uint64_t unicode_state = 32;
    std::uint64_t unicode_ascii_size = 48;
    std::uint64_t unicode_compact_size = 72;
    // PyBytesObject
    std::uint64_t bytes_size = 16;
    std::uint64_t bytes_data = 32;
    // PyObject
    std::uint64_t object_type = 8;
};

// A field at `offset` of a block copied out of the process (host byte order, any
// alignment): a pointer or size, and a C int.
inline std::uint64_t word_at(const unsigned char* block, std::uint64_t offset) {
    std::uint64_t value = 0;
    std::memcpy(&value, block + offset, sizeof value);
    return value;
}
inline std::int32_t int_at(const unsigned char* block, std::uint64_t offset) {
    std::int32_t value = 0;
    std::memcpy(&value, block + offset, sizeof value);
    return value;
}

// The layout of a release that has no _Py_DebugOffsets (3.8 to 3.12); nullopt for any
// other version.
std::optional<PythonLayout> builtin_layout(const PythonVersion& version);

// The cookie at the start of _PyRuntime from 3.13 on.
inline constexpr char kDebugOffsetsCookie[8] = {'x', 'd', 'e', 'b', 'u', 'g', 'p', 'y'};
// Bytes of 3.13's _Py_DebugOffsets that layout_from_debug_offsets reads.
inline constexpr std::size_t kDebugOffsets313Size = 584;

// The version in a _Py_DebugOffsets block (its PY_VERSION_HEX).
PythonVersion debug_offsets_version(const unsigned char* block);
// The layout a 3.13 interpreter publishes in `block` (kDebugOffsets313Size bytes read at
// _PyRuntime); nullopt when the block is not 3.13's (another version, free-threaded).
std::optional<PythonLayout> layout_from_debug_offsets(const unsigned char* block);

}  // namespace ember::collector::python
