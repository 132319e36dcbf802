// python_reader.h: the Python stacks of another CPython process, read from outside.
//
// PythonProcess finds the interpreter of a running process (the `_PyRuntime` symbol in
// the ELF symbol tables of libpython or the executable, mapped where /proc/PID/maps
// says), tells its version (3.13's _Py_DebugOffsets, else the `Py_Version` symbol,
// else the file's name), and on each snapshot() walks interpreters -> thread states ->
// frames -> code objects with process_vm_readv (process_memory.h). The process is never
// stopped and never written to, so a snapshot races with the interpreter: every pointer
// is checked (thread states point back at their interpreter, code objects and strings
// have the type they must have, bounded loops) and a thread whose stack changed under
// the reader is dropped from that snapshot rather than reported with garbage frames.
//
// Supported: CPython 3.8 to 3.13 on 64-bit Linux, GIL builds. Anything else is refused
// by the constructor with one line (PythonReadError).
#pragma once

#include "collectors/python/python_layout.h"
#include "collectors/python/process_memory.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <unordered_map>
#include <vector>

namespace ember::collector::python {

class PythonReadError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

struct PythonFrame {
    std::string
        function;      // co_qualname (3.11+); before, co_name, as "Class.name" when its first argument is self or cls
    std::string file;  // co_filename as the interpreter knows it
    int line = 0;      // 0 when the line table has no line for the instruction
    // The outermost frame of one C-level call of the interpreter's eval loop
    // (_PyEval_EvalFrameDefault): every frame before 3.11 (one call per frame); 3.11's
    // is_entry frames; 3.12+, the frame just inside an entry frame owned by the C stack.
    // Mixed stacks (native_stack.h) put each such group where its eval call is.
    bool entry = false;
};

struct PythonThread {
    pid_t tid = 0;                    // OS thread id; 0 when it could not be told
    std::uint64_t thread_id = 0;      // threading.get_ident() (pthread_t)
    std::vector<PythonFrame> frames;  // innermost first; empty for a thread outside Python code
    // threading.Thread.name of a thread that threading started (read from the Thread
    // object, `self` of its outermost frame, Thread._bootstrap); "" for the main thread
    // and threads started otherwise (callers fall back to the OS name).
    std::string name;
};

class PythonProcess {
  public:
    // Throws PythonReadError: the process is gone, its memory may not be read (naming
    // the ptrace rule), it is not CPython, its version is not supported, or the binary
    // has no `_PyRuntime` symbol.
    explicit PythonProcess(pid_t pid);
    ~PythonProcess();
    PythonProcess(const PythonProcess&) = delete;
    PythonProcess& operator=(const PythonProcess&) = delete;

    pid_t pid() const { return memory_.pid(); }
    const PythonVersion& version() const { return version_; }
    const std::string& binary() const { return binary_; }  // the file holding _PyRuntime

    // Every thread state of every interpreter, with its stack. Returns false (and
    // `error`) when the interpreter could not be read at all: the process exited
    // (errno ESRCH), or its memory is refused. Threads whose stack changed while it was
    // read are left out of `threads`.
    bool snapshot(std::vector<PythonThread>& threads, std::string& error);

  private:
    struct CodeInfo {
        std::string function;
        std::string file;
        std::string line_table;
        int first_line = 0;
        std::uint64_t key = 0;  // the code object's name, file and table pointers, mixed
        // 3.8-3.10: the first argument is `self` (1) or `cls` (2), naming the method's class.
        int first_argument = 0;
    };
    std::string class_of_first_argument(std::uint64_t frame, int kind);
    bool read_stack(std::uint64_t frame, std::vector<PythonFrame>& frames);
    const CodeInfo* code_info(std::uint64_t code);
    bool read_string(std::uint64_t address, std::string& out);
    bool read_bytes(std::uint64_t address, std::string& out);
    int line_of(const CodeInfo& code, std::int64_t instruction_byte) const;
    pid_t os_thread_of(std::uint64_t pthread_id);
    std::string thread_object_name(std::uint64_t thread_object);
    bool attribute(std::uint64_t object, const std::string& name, std::uint64_t& value);
    bool dict_item(std::uint64_t keys, std::uint64_t values, std::uint64_t dict, const std::string& name,
                   std::uint64_t& value);

    ProcessMemory memory_;
    PythonVersion version_;
    PythonLayout layout_;
    std::string binary_;
    std::uint64_t runtime_ = 0;
    std::uint64_t code_type_ = 0;
    std::uint64_t unicode_type_ = 0;
    std::uint64_t bytes_type_ = 0;
    std::unordered_map<std::uint64_t, std::unique_ptr<CodeInfo>> codes_;  // by code object address
    std::unordered_map<std::uint64_t, pid_t> os_threads_;                 // pthread_t -> tid (3.8-3.10)
    long pthread_tid_offset_ = -1;
    struct KnownName {
        std::string name;
        std::int64_t read_ns = 0;
    };
    std::unordered_map<std::uint64_t, KnownName> thread_names_;  // Thread object -> its name, read again each second
    std::uint64_t bootstrap_self_ = 0;  // read_stack: `self` of the outermost Thread._bootstrap frame
};

// The line of the instruction at byte offset `instruction_byte` in a code object whose
// line table (in the `format` of its version) is `table` and first line `first_line`;
// 0 when the table has none for it. Exposed for tests.
int line_for_instruction(LineTable format, const std::string& table, int first_line, std::int64_t instruction_byte);

}  // namespace ember::collector::python
