// elf_symbols.cpp: ELF symbol lookup for CPU samples (see elf_symbols.h).
#include "collectors/elf_symbols.h"

#include "common/os.h"
#include "common/text.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cxxabi.h>
#include <cstdlib>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace ember::collector {

namespace {

// A read-only private mapping of a whole file; unmapped when destroyed.
class MappedFile {
  public:
    MappedFile() = default;
    ~MappedFile() {
        if (data_) munmap(data_, size_);
    }
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    bool open(const std::string& path) {
        int descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (descriptor < 0) return false;
        struct stat status {};
        if (fstat(descriptor, &status) != 0 || status.st_size <= 0) {
            ::close(descriptor);
            return false;
        }
        void* data = mmap(nullptr, static_cast<std::size_t>(status.st_size), PROT_READ, MAP_PRIVATE, descriptor, 0);
        ::close(descriptor);
        if (data == MAP_FAILED) return false;
        data_ = data;
        size_ = static_cast<std::size_t>(status.st_size);
        return true;
    }
    const unsigned char* bytes() const { return static_cast<const unsigned char*>(data_); }
    std::size_t size() const { return size_; }
    // [offset, offset + length) lies inside the file.
    bool holds(std::uint64_t offset, std::uint64_t length) const { return offset <= size_ && length <= size_ - offset; }

  private:
    void* data_ = nullptr;
    std::size_t size_ = 0;
};

struct Symbol {
    std::uint64_t start = 0;  // virtual address in the file's address space
    std::uint64_t size = 0;
    const char* name = nullptr;  // inside the mapped file
};

const Elf64_Ehdr* elf_header(const MappedFile& file) {
    if (!file.holds(0, sizeof(Elf64_Ehdr))) return nullptr;
    const auto* header = reinterpret_cast<const Elf64_Ehdr*>(file.bytes());
    if (std::memcmp(header->e_ident, ELFMAG, SELFMAG) != 0) return nullptr;
    if (header->e_ident[EI_CLASS] != ELFCLASS64) return nullptr;  // 64-bit processes only
    return header;
}

const Elf64_Shdr* section_headers(const MappedFile& file, const Elf64_Ehdr& header) {
    if (header.e_shentsize != sizeof(Elf64_Shdr) || header.e_shnum == 0) return nullptr;
    if (!file.holds(header.e_shoff, std::uint64_t(header.e_shnum) * sizeof(Elf64_Shdr))) return nullptr;
    return reinterpret_cast<const Elf64_Shdr*>(file.bytes() + header.e_shoff);
}

// Function symbols of every table of `type` (SHT_SYMTAB or SHT_DYNSYM). Returns
// whether the file has such a table.
bool read_function_symbols(const MappedFile& file, std::uint32_t type, std::vector<Symbol>& out) {
    const Elf64_Ehdr* header = elf_header(file);
    if (!header) return false;
    const Elf64_Shdr* sections = section_headers(file, *header);
    if (!sections) return false;
    bool found = false;
    for (std::uint32_t index = 0; index < header->e_shnum; ++index) {
        const Elf64_Shdr& table = sections[index];
        if (table.sh_type != type || table.sh_entsize != sizeof(Elf64_Sym)) continue;
        if (table.sh_link >= header->e_shnum || !file.holds(table.sh_offset, table.sh_size)) continue;
        const Elf64_Shdr& strings = sections[table.sh_link];
        if (strings.sh_type != SHT_STRTAB || !file.holds(strings.sh_offset, strings.sh_size) || strings.sh_size == 0)
            continue;
        const char* string_bytes = reinterpret_cast<const char*>(file.bytes() + strings.sh_offset);
        // The table must end with a NUL so every name inside it is terminated.
        if (string_bytes[strings.sh_size - 1] != '\0') continue;
        found = true;
        const auto* symbols = reinterpret_cast<const Elf64_Sym*>(file.bytes() + table.sh_offset);
        std::uint64_t count = table.sh_size / sizeof(Elf64_Sym);
        for (std::uint64_t at = 0; at < count; ++at) {
            const Elf64_Sym& symbol = symbols[at];
            unsigned kind = ELF64_ST_TYPE(symbol.st_info);
            if (kind != STT_FUNC && kind != STT_GNU_IFUNC) continue;
            if (symbol.st_shndx == SHN_UNDEF || symbol.st_value == 0 || symbol.st_name >= strings.sh_size) continue;
            const char* name = string_bytes + symbol.st_name;
            if (*name == '\0') continue;
            out.push_back({symbol.st_value, symbol.st_size, name});
        }
    }
    return found;
}

// The GNU build id (hex) from the file's note sections, or "".
std::string build_id(const MappedFile& file) {
    const Elf64_Ehdr* header = elf_header(file);
    if (!header) return "";
    const Elf64_Shdr* sections = section_headers(file, *header);
    if (!sections) return "";
    for (std::uint32_t index = 0; index < header->e_shnum; ++index) {
        const Elf64_Shdr& notes = sections[index];
        if (notes.sh_type != SHT_NOTE || !file.holds(notes.sh_offset, notes.sh_size)) continue;
        std::uint64_t at = 0;
        while (at + sizeof(Elf64_Nhdr) <= notes.sh_size) {
            const auto* note = reinterpret_cast<const Elf64_Nhdr*>(file.bytes() + notes.sh_offset + at);
            std::uint64_t name_bytes = (std::uint64_t(note->n_namesz) + 3) & ~std::uint64_t(3);
            std::uint64_t description_bytes = (std::uint64_t(note->n_descsz) + 3) & ~std::uint64_t(3);
            std::uint64_t description_at = at + sizeof(Elf64_Nhdr) + name_bytes;
            if (description_at + description_bytes > notes.sh_size) break;
            const char* name = reinterpret_cast<const char*>(note + 1);
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
                const unsigned char* id = file.bytes() + notes.sh_offset + description_at;
                std::string hex;
                char digits[3];
                for (std::uint32_t byte = 0; byte < note->n_descsz; ++byte) {
                    std::snprintf(digits, sizeof digits, "%02x", id[byte]);
                    hex += digits;
                }
                return hex;
            }
            at = description_at + description_bytes;
        }
    }
    return "";
}

std::string without_deleted_suffix(std::string path) {
    constexpr std::string_view kDeleted = " (deleted)";
    if (path.size() > kDeleted.size() && path.compare(path.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0)
        path.resize(path.size() - kDeleted.size());
    return path;
}

}  // namespace

struct ElfSymbolizer::ElfFile {
    MappedFile image;
    MappedFile debug_image;  // separate debug file, when the image has no .symtab
    std::vector<Elf64_Phdr> loads;
    std::vector<Symbol> symbols;  // by start address

    void load(const std::string& path) {
        if (!image.open(path)) return;
        const Elf64_Ehdr* header = elf_header(image);
        if (!header) return;
        if (header->e_phentsize == sizeof(Elf64_Phdr) &&
            image.holds(header->e_phoff, std::uint64_t(header->e_phnum) * sizeof(Elf64_Phdr))) {
            const auto* segments = reinterpret_cast<const Elf64_Phdr*>(image.bytes() + header->e_phoff);
            for (std::uint32_t index = 0; index < header->e_phnum; ++index)
                if (segments[index].p_type == PT_LOAD) loads.push_back(segments[index]);
        }
        bool has_symtab = read_function_symbols(image, SHT_SYMTAB, symbols);
        read_function_symbols(image, SHT_DYNSYM, symbols);
        if (!has_symtab) {
            std::string id = build_id(image);
            if (id.size() > 2 &&
                debug_image.open("/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug"))
                read_function_symbols(debug_image, SHT_SYMTAB, symbols);
        }
        // By address; among symbols at one address the sized one first (aliases of
        // one function: .symtab's entry came first and is kept).
        std::stable_sort(symbols.begin(), symbols.end(), [](const Symbol& left, const Symbol& right) {
            if (left.start != right.start) return left.start < right.start;
            return left.size > right.size;
        });
    }

    // Virtual address of a byte at `file_offset`, through the PT_LOAD that maps it.
    bool virtual_address(std::uint64_t file_offset, std::uint64_t& address) const {
        for (const Elf64_Phdr& segment : loads) {
            if (file_offset >= segment.p_offset && file_offset - segment.p_offset < segment.p_filesz) {
                address = file_offset - segment.p_offset + segment.p_vaddr;
                return true;
            }
        }
        return false;
    }

    const char* function_at(std::uint64_t address) const {
        auto after = std::upper_bound(symbols.begin(), symbols.end(), address,
                                      [](std::uint64_t value, const Symbol& symbol) { return value < symbol.start; });
        if (after == symbols.begin()) return nullptr;
        auto nearest = after - 1;
        // A sized symbol spanning the address: the nearest one at or below it, or one of
        // the few before it (aliases at the same address, a function nested in another).
        auto candidate = nearest;
        for (int looked = 0; looked < 8; ++looked) {
            if (candidate->size > 0 && address - candidate->start < candidate->size) return candidate->name;
            if (candidate == symbols.begin()) break;
            --candidate;
        }
        // An unsized symbol (hand-written assembly) runs up to the next one.
        if (nearest->size == 0) return nearest->name;
        return nullptr;
    }
};

std::string demangle_symbol(const char* name) {
    return text::demangled(name);
}

ElfSymbolizer::ElfSymbolizer() = default;
ElfSymbolizer::ElfSymbolizer(pid_t pid) : pid_(pid) {}
ElfSymbolizer::~ElfSymbolizer() = default;

void ElfSymbolizer::read_maps() {
    mappings_.clear();
    os::for_each_maps_line(pid_ ? os::proc_path(pid_, "maps") : std::string("/proc/self/maps"),
                           [&](const os::MapsLine& entry) {
                               if (!os::is_file_code(entry)) return;
                               Mapping mapping;
                               mapping.start = entry.start;
                               mapping.end = entry.end;
                               mapping.file_offset = entry.offset;
                               mapping.path = without_deleted_suffix(entry.path);
                               mappings_.push_back(std::move(mapping));
                           });
    std::sort(mappings_.begin(), mappings_.end(),
              [](const Mapping& left, const Mapping& right) { return left.start < right.start; });
}

const ElfSymbolizer::Mapping* ElfSymbolizer::mapping_for(std::uintptr_t address) {
    auto find = [&]() -> const Mapping* {
        auto after =
            std::upper_bound(mappings_.begin(), mappings_.end(), address,
                             [](std::uintptr_t value, const Mapping& mapping) { return value < mapping.start; });
        if (after == mappings_.begin()) return nullptr;
        --after;
        return address < after->end ? &*after : nullptr;
    };
    if (const Mapping* mapping = find()) return mapping;
    // A library loaded since the last read: read the maps again (at most every 100 ms,
    // so addresses outside any file, like JIT code, do not re-read it each time).
    auto now = os::SteadyClock::now();
    if (maps_read_ && now - last_maps_read_ < std::chrono::milliseconds(100)) return nullptr;
    maps_read_ = true;
    last_maps_read_ = now;
    read_maps();
    return find();
}

ElfSymbolizer::ElfFile* ElfSymbolizer::file(const std::string& path) {
    auto known = files_.find(path);
    if (known != files_.end()) return known->second.get();
    auto loaded = std::make_unique<ElfFile>();
    loaded->load(path);
    // A file of another mount namespace (a container's) is reached through its root.
    if (pid_ && loaded->symbols.empty() && loaded->loads.empty()) {
        loaded = std::make_unique<ElfFile>();
        loaded->load("/proc/" + std::to_string(pid_) + "/root" + path);
    }
    ElfFile* raw = loaded.get();
    files_.emplace(path, std::move(loaded));
    return raw;
}

ResolvedFrame ElfSymbolizer::resolve(std::uintptr_t address) {
    ResolvedFrame frame;
    const Mapping* mapping = mapping_for(address);
    if (!mapping) return frame;
    frame.module = mapping->path;
    ElfFile* elf = file(mapping->path);
    std::uint64_t file_offset = address - mapping->start + mapping->file_offset;
    std::uint64_t virtual_address = 0;
    if (!elf->virtual_address(file_offset, virtual_address)) return frame;
    if (const char* name = elf->function_at(virtual_address)) {
        // .symtab spells versioned symbols "name@VERSION" / "name@@VERSION" (glibc's
        // debug files do): the version is dropped, or C++ names would not demangle.
        std::string bare(name, std::strcspn(name, "@"));
        frame.function = demangle_symbol(bare.c_str());
    }
    return frame;
}

}  // namespace ember::collector
