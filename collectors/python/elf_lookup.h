// elf_lookup.h: the addresses of CPython's data symbols (`_PyRuntime`, the type
// objects, `Py_Version`) in an ELF file on disk, from .symtab and .dynsym.
// elf_symbols.h names code addresses of this process; this looks names up in a file
// another process has mapped, and the caller adds the load bias from /proc/PID/maps.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace ember::collector::python {

struct ElfObjectSymbols {
    // Symbol -> its virtual address in the file's address space.
    std::unordered_map<std::string, std::uint64_t> values;
    // The lowest PT_LOAD's virtual address, page-aligned: the process maps the file's
    // first byte at this address plus the load bias (0 for a non-PIE executable).
    std::uint64_t first_load_address = 0;
};

// Reads the data symbols CPython's stack reader needs. False when `path` is not a
// readable 64-bit ELF file.
bool read_object_symbols(const std::string& path, ElfObjectSymbols& out);

}  // namespace ember::collector::python
