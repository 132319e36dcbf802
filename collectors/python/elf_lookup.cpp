// elf_lookup.cpp: CPython's data symbols in an ELF file (elf_lookup.h).
#include "collectors/python/elf_lookup.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string_view>

namespace ember::collector::python {

namespace {

constexpr std::string_view kWanted[] = {"_PyRuntime", "PyCode_Type", "PyUnicode_Type", "PyBytes_Type", "Py_Version"};

}  // namespace

bool read_object_symbols(const std::string& path, ElfObjectSymbols& out) {
    const int descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) return false;
    struct stat status {};
    if (fstat(descriptor, &status) != 0 || status.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
        ::close(descriptor);
        return false;
    }
    const std::size_t size = static_cast<std::size_t>(status.st_size);
    void* mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, descriptor, 0);
    ::close(descriptor);
    if (mapped == MAP_FAILED) return false;
    const auto* bytes = static_cast<const unsigned char*>(mapped);
    auto holds = [size](std::uint64_t offset, std::uint64_t length) {
        return offset <= size && length <= size - offset;
    };
    bool ok = false;
    const auto* header = reinterpret_cast<const Elf64_Ehdr*>(bytes);
    if (std::memcmp(header->e_ident, ELFMAG, SELFMAG) == 0 && header->e_ident[EI_CLASS] == ELFCLASS64) {
        ok = true;
        if (header->e_phentsize == sizeof(Elf64_Phdr) &&
            holds(header->e_phoff, std::uint64_t(header->e_phnum) * sizeof(Elf64_Phdr))) {
            const auto* segments = reinterpret_cast<const Elf64_Phdr*>(bytes + header->e_phoff);
            bool first = true;
            for (std::uint32_t index = 0; index < header->e_phnum; ++index) {
                if (segments[index].p_type != PT_LOAD) continue;
                const std::uint64_t start = segments[index].p_vaddr & ~std::uint64_t(0xfff);
                if (first || start < out.first_load_address) out.first_load_address = start;
                first = false;
            }
        }
        const bool sections_fit = header->e_shentsize == sizeof(Elf64_Shdr) &&
                                  holds(header->e_shoff, std::uint64_t(header->e_shnum) * sizeof(Elf64_Shdr));
        const auto* sections = sections_fit ? reinterpret_cast<const Elf64_Shdr*>(bytes + header->e_shoff) : nullptr;
        for (std::uint32_t index = 0; sections && index < header->e_shnum; ++index) {
            const Elf64_Shdr& table = sections[index];
            if ((table.sh_type != SHT_SYMTAB && table.sh_type != SHT_DYNSYM) || table.sh_entsize != sizeof(Elf64_Sym))
                continue;
            if (table.sh_link >= header->e_shnum || !holds(table.sh_offset, table.sh_size)) continue;
            const Elf64_Shdr& strings = sections[table.sh_link];
            if (strings.sh_type != SHT_STRTAB || strings.sh_size == 0 || !holds(strings.sh_offset, strings.sh_size))
                continue;
            const char* names = reinterpret_cast<const char*>(bytes + strings.sh_offset);
            if (names[strings.sh_size - 1] != '\0') continue;
            const auto* symbols = reinterpret_cast<const Elf64_Sym*>(bytes + table.sh_offset);
            for (std::uint64_t at = 0; at < table.sh_size / sizeof(Elf64_Sym); ++at) {
                const Elf64_Sym& symbol = symbols[at];
                if (ELF64_ST_TYPE(symbol.st_info) != STT_OBJECT || symbol.st_shndx == SHN_UNDEF ||
                    symbol.st_value == 0 || symbol.st_name >= strings.sh_size)
                    continue;
                const std::string_view name(names + symbol.st_name);
                for (std::string_view wanted : kWanted)
                    if (name == wanted) out.values.emplace(std::string(name), symbol.st_value);
            }
        }
    }
    munmap(mapped, size);
    return ok;
}

}  // namespace ember::collector::python
