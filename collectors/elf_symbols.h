// elf_symbols.h: names the function at an address of this process from the ELF
// symbol tables of the file mapped there. dladdr only sees .dynsym, the exported
// symbols: an executable not linked with -rdynamic, and every static or hidden
// function, comes out as a bare address. ElfSymbolizer reads /proc/self/maps to find
// the file and offset behind an address, maps the file's ELF headers with <elf.h>,
// translates the address through the PT_LOAD segment that holds it, and looks it up
// in .symtab (all functions, when the file is not stripped) and .dynsym; a file
// stripped of .symtab is looked up in its separate debug file
// (/usr/lib/debug/.build-id/xx/yyyy.debug) when one is installed. Names are
// demangled.
//
// ElfSymbolizer(pid) names the code of another process the same way, from
// /proc/PID/maps (its files opened by path, else through /proc/PID/root): the native
// frames of `ember record --native` and `ember dump --native`.
//
// Not async-signal-safe (it reads files and allocates): the CPU sampler calls it on
// its drain thread, never in the SIGPROF handler. One thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <unordered_map>
#include <vector>

namespace ember::collector {

// A C++ symbol's readable name (abi::__cxa_demangle); `name` itself when it is not one.
std::string demangle_symbol(const char* name);

struct ResolvedFrame {
    std::string function;  // demangled; empty when no symbol covers the address
    std::string module;    // path of the mapped file; empty when the address is in no file
};

class ElfSymbolizer {
  public:
    ElfSymbolizer();
    // The code of process PID (its memory is not read: only its maps and files).
    explicit ElfSymbolizer(pid_t pid);
    ~ElfSymbolizer();
    ElfSymbolizer(const ElfSymbolizer&) = delete;
    ElfSymbolizer& operator=(const ElfSymbolizer&) = delete;

    // The function containing `address` (an instruction address: for a return
    // address, pass address - 1 so the call itself is looked up).
    ResolvedFrame resolve(std::uintptr_t address);

    struct ElfFile;  // elf_symbols.cpp: one mapped file's segments and symbols

  private:
    struct Mapping {
        std::uintptr_t start = 0;
        std::uintptr_t end = 0;
        std::uint64_t file_offset = 0;
        std::string path;
    };
    const Mapping* mapping_for(std::uintptr_t address);
    void read_maps();
    ElfFile* file(const std::string& path);

    pid_t pid_ = 0;  // 0: this process

    std::vector<Mapping> mappings_;  // executable file mappings, by start address
    bool maps_read_ = false;
    std::chrono::steady_clock::time_point last_maps_read_;
    std::unordered_map<std::string, std::unique_ptr<ElfFile>> files_;
};

}  // namespace ember::collector
