// python_layout.cpp: CPython's struct offsets per version (python_layout.h). The
// numbers are the x86-64 offsets of the release headers (checked against each pyenv
// build's DWARF with gdb's `ptype /o`).
#include "collectors/python/python_layout.h"

namespace ember::collector::python {

std::string PythonVersion::text() const {
    std::string text = std::to_string(major) + "." + std::to_string(minor);
    if (micro >= 0) text += "." + std::to_string(micro);
    return text;
}

std::optional<PythonLayout> builtin_layout(const PythonVersion& version) {
    if (version.major != 3 || version.minor < 8 || version.minor > 12) return std::nullopt;
    PythonLayout layout;
    layout.interp_next = 0;
    layout.tstate_next = 8;
    layout.tstate_interp = 16;
    if (version.minor <= 10) {
        layout.runtime_interpreters_head = 32;
        layout.interp_threads_head = 8;  // tstate_head
        layout.tstate_frame = 24;        // PyFrameObject *frame
        layout.tstate_thread_id = 176;
        layout.tstate_size = 184;
        layout.frame_size = 112;
        layout.frame_back = 24;
        layout.frame_code = 32;
        layout.frame_lasti = version.minor == 10 ? 96 : 104;
        layout.code_firstlineno = 40;
        layout.code_filename = 104;
        layout.code_name = 112;
        layout.code_linetable = 120;  // co_lnotab (3.8, 3.9), co_linetable (3.10)
        layout.code_size = 128;
        layout.line_table = version.minor == 10 ? LineTable::linetable : LineTable::lnotab;
        // PyFrameObject's f_localsplus follows 20 PyTryBlocks: type(frame).__basicsize__ - 8.
        layout.frame_localsplus = version.minor == 10 ? 352 : 360;
        layout.frame_locals = *layout.frame_localsplus;
        return layout;
    }
    layout.runtime_interpreters_head = 40;
    layout.interp_threads_head = version.minor == 11 ? 16 : 72;  // threads.head
    layout.tstate_frame = 56;                                    // _PyCFrame *cframe
    layout.frame_through_cframe = true;
    layout.cframe_current_frame = version.minor == 11 ? 8 : 0;
    layout.tstate_thread_id = version.minor == 11 ? 152 : 136;
    layout.tstate_native_thread_id = version.minor == 11 ? 160 : 144;
    layout.tstate_size = *layout.tstate_native_thread_id + 8;
    layout.interpreter_frames = true;
    layout.frame_size = 72;
    layout.frame_code = version.minor == 11 ? 32 : 0;
    layout.frame_back = version.minor == 11 ? 48 : 8;
    layout.frame_instr = 56;  // prev_instr
    layout.frame_owner = version.minor == 11 ? 69 : 70;
    layout.frame_locals = 72;
    if (version.minor == 11) layout.frame_is_entry = 68;
    layout.code_firstlineno = version.minor == 11 ? 72 : 68;
    layout.code_filename = 112;
    layout.code_name = 120;
    layout.code_qualname = 128;
    layout.code_linetable = 136;
    layout.code_size = 144;
    layout.code_adaptive = version.minor == 11 ? 184 : 192;
    layout.line_table = LineTable::locations;
    if (version.minor == 12) {
        layout.unicode_ascii_size = 40;  // no wstr from 3.12 on
        layout.unicode_compact_size = 56;
    }
    return layout;
}

namespace {

std::uint64_t largest(std::initializer_list<std::uint64_t> values) {
    std::uint64_t most = 0;
    for (std::uint64_t value : values) most = value > most ? value : most;
    return most;
}

}  // namespace

PythonVersion debug_offsets_version(const unsigned char* block) {
    const std::uint64_t hex = word_at(block, 8);  // PY_VERSION_HEX
    return {static_cast<int>((hex >> 24) & 0xff), static_cast<int>((hex >> 16) & 0xff),
            static_cast<int>((hex >> 8) & 0xff)};
}

std::optional<PythonLayout> layout_from_debug_offsets(const unsigned char* block) {
    if (std::memcmp(block, kDebugOffsetsCookie, sizeof kDebugOffsetsCookie) != 0) return std::nullopt;
    const PythonVersion version = debug_offsets_version(block);
    if (version.major != 3 || version.minor != 13) return std::nullopt;
    if (word_at(block, 16) != 0) return std::nullopt;  // free-threaded: other object headers
    // Offsets of 3.13's _Py_DebugOffsets members (Include/internal/pycore_runtime.h).
    PythonLayout layout;
    layout.runtime_interpreters_head = word_at(block, 40);
    layout.interp_next = word_at(block, 64);
    layout.interp_threads_head = word_at(block, 72);
    layout.tstate_next = word_at(block, 168);
    layout.tstate_interp = word_at(block, 176);
    layout.tstate_frame = word_at(block, 184);  // current_frame
    layout.tstate_thread_id = word_at(block, 192);
    layout.tstate_native_thread_id = word_at(block, 200);
    layout.tstate_size = largest({layout.tstate_next, layout.tstate_interp, layout.tstate_frame,
                                  layout.tstate_thread_id, *layout.tstate_native_thread_id}) +
                         8;
    layout.interpreter_frames = true;
    layout.frame_back = word_at(block, 232);
    layout.frame_code = word_at(block, 240);  // f_executable
    layout.frame_instr = word_at(block, 248);
    layout.frame_owner = word_at(block, 264);
    layout.frame_locals = word_at(block, 256);
    layout.frame_size = largest({layout.frame_back, layout.frame_code, layout.frame_instr, *layout.frame_owner}) + 8;
    layout.code_filename = word_at(block, 280);
    layout.code_name = word_at(block, 288);
    layout.code_qualname = word_at(block, 296);
    layout.code_linetable = word_at(block, 304);
    layout.code_firstlineno = word_at(block, 312);
    layout.code_adaptive = word_at(block, 344);
    layout.code_size = largest({layout.code_filename, layout.code_name, *layout.code_qualname, layout.code_linetable,
                                layout.code_firstlineno}) +
                       8;
    layout.line_table = LineTable::locations;
    layout.object_type = word_at(block, 360);
    layout.bytes_size = word_at(block, 520);
    layout.bytes_data = word_at(block, 528);
    layout.unicode_state = word_at(block, 544);
    layout.unicode_length = word_at(block, 552);
    layout.unicode_ascii_size = word_at(block, 560);
    layout.unicode_compact_size = layout.unicode_ascii_size + 16;  // utf8_length, utf8
    // Offsets far beyond any real struct mean the block is not what it claims.
    for (std::uint64_t size : {layout.tstate_size, layout.frame_size, layout.code_size})
        if (size > 4096) return std::nullopt;
    return layout;
}

}  // namespace ember::collector::python
