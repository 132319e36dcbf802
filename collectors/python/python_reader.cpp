// python_reader.cpp: CPython stacks read from outside (python_reader.h).
#include "collectors/python/python_reader.h"

#include "collectors/python/elf_lookup.h"
#include "common/os.h"
#include "common/text.h"

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cstring>
#include <ctime>
#include <string_view>
#include <regex>
#include <set>

namespace ember::collector::python {

namespace {

constexpr int kMaxInterpreters = 256;
constexpr int kMaxThreads = 4096;
constexpr int kMaxFrames = 4096;
constexpr std::uint64_t kMaxStringChars = 4096;
constexpr std::uint64_t kMaxTableBytes = 1 << 20;
constexpr int kOwnedByCStack = 3;  // 3.12+: the C stack's entry frame, no code of its own

// A file mapped into the process: its path and where its first byte is mapped.
struct MappedObject {
    std::string path;
    std::uint64_t base = 0;
};

std::vector<MappedObject> mapped_objects(pid_t pid) {
    std::vector<MappedObject> objects;
    os::for_each_maps_line(os::proc_path(pid, "maps"), [&](const os::MapsLine& entry) {
        const std::string& path = entry.path;
        if (path.empty() || path[0] != '/' || entry.offset != 0) return;
        const std::uint64_t start = entry.start;
        auto known =
            std::find_if(objects.begin(), objects.end(), [&](const MappedObject& o) { return o.path == path; });
        if (known == objects.end())
            objects.push_back({path, start});
        else
            known->base = std::min(known->base, start);
    });
    return objects;
}

std::string base_name(const std::string& path) {
    const std::size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "3.11" in "python3.11", "libpython3.11.so.1.0", "libpython3.7m.so".
std::optional<PythonVersion> version_in_name(const std::string& path) {
    static const std::regex pattern(R"(python([23])\.(\d+))");
    std::smatch match;
    const std::string name = base_name(path);
    if (!std::regex_search(name, match, pattern)) return std::nullopt;
    return PythonVersion{std::stoi(match[1]), std::stoi(match[2]), -1};
}

bool is_libpython(const std::string& path) {
    return base_name(path).rfind("libpython", 0) == 0;
}

// The location table's varints (Objects/locations.md): 6 bits a byte, bit 6 = more.
struct TableCursor {
    const std::string& bytes;
    std::size_t at = 0;
    bool done() const { return at >= bytes.size(); }
    unsigned next() { return done() ? 0 : static_cast<unsigned char>(bytes[at++]); }
    std::uint64_t varint() {
        unsigned byte = next();
        std::uint64_t value = byte & 63;
        int shift = 6;
        while ((byte & 64) && !done() && shift < 63) {
            byte = next();
            value |= std::uint64_t(byte & 63) << shift;
            shift += 6;
        }
        return value;
    }
    std::int64_t signed_varint() {
        const std::uint64_t value = varint();
        return (value & 1) ? -static_cast<std::int64_t>(value >> 1) : static_cast<std::int64_t>(value >> 1);
    }
};

}  // namespace

int line_for_instruction(LineTable format, const std::string& table, int first_line, std::int64_t instruction_byte) {
    if (instruction_byte < 0) return first_line;
    switch (format) {
        case LineTable::lnotab: {
            // PyCode_Addr2Line of 3.8/3.9: (address delta, signed line delta) pairs.
            std::int64_t address = 0;
            int line = first_line;
            for (std::size_t at = 0; at + 1 < table.size(); at += 2) {
                address += static_cast<unsigned char>(table[at]);
                if (address > instruction_byte) break;
                line += static_cast<signed char>(table[at + 1]);
            }
            return line;
        }
        case LineTable::linetable: {
            // 3.10: (byte length, signed line delta) per range; -128 = the range has no line.
            std::int64_t start = 0;
            int line = first_line;
            for (std::size_t at = 0; at + 1 < table.size(); at += 2) {
                const int length = static_cast<unsigned char>(table[at]);
                const int delta = static_cast<signed char>(table[at + 1]);
                if (delta != -128) line += delta;
                if (instruction_byte >= start && instruction_byte < start + length) return delta == -128 ? 0 : line;
                start += length;
            }
            return 0;
        }
        case LineTable::locations: {
            // 3.11+: entries of 1..8 code units; the first byte is 1CCCCLLL (code, length - 1).
            TableCursor cursor{table};
            std::int64_t start = 0;
            int line = first_line;
            while (!cursor.done()) {
                const unsigned head = cursor.next();
                if (!(head & 0x80)) return 0;  // out of step: no trustworthy line
                const int code = (head >> 3) & 15;
                const std::int64_t end = start + 2 * ((head & 7) + 1);
                bool has_line = true;
                if (code == 15) {
                    has_line = false;
                } else if (code == 14) {  // long form: line delta, end line delta, columns
                    line += static_cast<int>(cursor.signed_varint());
                    cursor.varint();
                    cursor.varint();
                    cursor.varint();
                } else if (code == 13) {  // no columns
                    line += static_cast<int>(cursor.signed_varint());
                } else if (code >= 10) {  // one-line forms: the delta is in the code
                    line += code - 10;
                    cursor.next();
                    cursor.next();
                } else {  // short form: same line, one byte of columns
                    cursor.next();
                }
                if (instruction_byte >= start && instruction_byte < end) return has_line ? line : 0;
                start = end;
            }
            return 0;
        }
    }
    return 0;
}

PythonProcess::PythonProcess(pid_t pid) : memory_(pid) {
    const std::string proc = "/proc/" + std::to_string(pid);
    if (pid <= 0 || read_proc_text(proc + "/status").empty())
        throw PythonReadError("process " + std::to_string(pid) + " does not exist");
    char executable[4096] = {};
    const ssize_t length = readlink((proc + "/exe").c_str(), executable, sizeof executable - 1);
    const std::string exe_path = length > 0 ? std::string(executable, static_cast<std::size_t>(length)) : "";
    const std::string command = os::thread_name(pid, pid);

    // The interpreter lives in libpython when the program loaded one, else in the executable.
    const std::vector<MappedObject> objects = mapped_objects(pid);
    std::vector<MappedObject> candidates;
    for (const MappedObject& object : objects)
        if (is_libpython(object.path)) candidates.push_back(object);
    for (const MappedObject& object : objects)
        if (object.path == exe_path) candidates.push_back(object);
    // An executable missing from the map (an exec still mapping it): its symbols still
    // tell whether it is CPython, but not where they lie.
    const bool executable_unmapped = candidates.empty() && !exe_path.empty();
    if (executable_unmapped) candidates.push_back({exe_path, 0});

    std::optional<PythonVersion> named;
    for (const MappedObject& object : candidates) {
        if (!named) named = version_in_name(object.path);
        ElfObjectSymbols symbols;
        // A file of another mount namespace is reached through the process's root.
        if (!read_object_symbols(object.path, symbols) && !read_object_symbols(proc + "/root" + object.path, symbols))
            continue;
        const auto runtime = symbols.values.find("_PyRuntime");
        if (runtime == symbols.values.end()) continue;
        if (executable_unmapped)
            throw PythonReadError("process " + std::to_string(pid) + " (" + command + "): " + object.path +
                                  " is not in its memory map yet (still starting): try again");
        const std::uint64_t bias = object.base - symbols.first_load_address;
        binary_ = object.path;
        runtime_ = runtime->second + bias;
        auto address_of = [&](const char* name) -> std::uint64_t {
            const auto found = symbols.values.find(name);
            return found == symbols.values.end() ? 0 : found->second + bias;
        };
        code_type_ = address_of("PyCode_Type");
        unicode_type_ = address_of("PyUnicode_Type");
        bytes_type_ = address_of("PyBytes_Type");
        const std::uint64_t py_version = address_of("Py_Version");

        unsigned char block[kDebugOffsets313Size] = {};
        if (!memory_.read(runtime_, block, sizeof block))
            throw PythonReadError("cannot read the memory of " + refusal_reason(pid, memory_.last_errno()));
        std::uint64_t hex = 0;
        if (std::memcmp(block, kDebugOffsetsCookie, sizeof kDebugOffsetsCookie) == 0) {
            version_ = debug_offsets_version(block);
        } else if (py_version != 0 && memory_.read_value(py_version, hex) && (hex >> 24) == 3) {
            version_ = {static_cast<int>(hex >> 24), static_cast<int>((hex >> 16) & 0xff),
                        static_cast<int>((hex >> 8) & 0xff)};
        } else if (named) {
            version_ = *named;
        } else {
            throw PythonReadError("process " + std::to_string(pid) + " (" + command +
                                  "): cannot tell the Python version of " + binary_ +
                                  " (no _Py_DebugOffsets, no Py_Version symbol, no version in its name)");
        }
        std::optional<PythonLayout> layout =
            version_.minor >= 13 ? layout_from_debug_offsets(block) : builtin_layout(version_);
        if (!layout)
            throw PythonReadError("process " + std::to_string(pid) + " (" + command + ") runs Python " +
                                  version_.text() +
                                  ", which ember cannot read (CPython 3.8 to 3.13, without free threading)");
        if (code_type_ == 0 || unicode_type_ == 0 || bytes_type_ == 0)
            throw PythonReadError(binary_ +
                                  " has _PyRuntime but not PyCode_Type/PyUnicode_Type/PyBytes_Type in its "
                                  "symbol tables");
        layout_ = *layout;
        return;
    }
    if (named && (named->major != 3 || named->minor < 8))
        throw PythonReadError("process " + std::to_string(pid) + " (" + command + ") runs Python " + named->text() +
                              ", which ember cannot read (CPython 3.8 to 3.13)");
    if (named)
        throw PythonReadError("process " + std::to_string(pid) + " (" + command + "): no _PyRuntime symbol in " +
                              (candidates.empty() ? exe_path : candidates.front().path) +
                              " (a Python built without symbols, or stripped)");
    throw PythonReadError("process " + std::to_string(pid) + " (" + command +
                          ") is not a CPython process: no libpython "
                          "mapped and no _PyRuntime symbol in " +
                          (exe_path.empty() ? std::string("its executable") : exe_path));
}

PythonProcess::~PythonProcess() = default;

bool PythonProcess::read_string(std::uint64_t address, std::string& out) {
    unsigned char header[80] = {};
    const std::uint64_t header_size = std::max(layout_.unicode_state + 4, layout_.unicode_length + 8);
    if (address == 0 || header_size > sizeof header || !memory_.read(address, header, header_size)) return false;
    if (word_at(header, layout_.object_type) != unicode_type_) return false;
    const std::uint64_t length = word_at(header, layout_.unicode_length);
    std::uint32_t state = 0;
    std::memcpy(&state, header + layout_.unicode_state, sizeof state);
    const unsigned kind = (state >> 2) & 7;
    const bool compact = (state >> 5) & 1;
    const bool ascii = (state >> 6) & 1;
    if (!compact || length > kMaxStringChars || (kind != 1 && kind != 2 && kind != 4)) return false;
    const std::uint64_t data = address + (ascii ? layout_.unicode_ascii_size : layout_.unicode_compact_size);
    std::string raw(length * kind, '\0');
    if (!memory_.read(data, raw.data(), raw.size())) return false;
    if (ascii) {
        out = std::move(raw);
        return true;
    }
    out.clear();
    for (std::uint64_t index = 0; index < length; ++index) {
        std::uint32_t code = 0;
        if (kind == 1)
            code = static_cast<unsigned char>(raw[index]);
        else if (kind == 2) {
            std::uint16_t unit;
            std::memcpy(&unit, raw.data() + 2 * index, 2);
            code = unit;
        } else
            std::memcpy(&code, raw.data() + 4 * index, 4);
        text::append_utf8(out, code);
    }
    return true;
}

bool PythonProcess::read_bytes(std::uint64_t address, std::string& out) {
    unsigned char header[64] = {};
    if (address == 0 || layout_.bytes_data > sizeof header || !memory_.read(address, header, layout_.bytes_data))
        return false;
    if (word_at(header, layout_.object_type) != bytes_type_) return false;
    const std::uint64_t size = word_at(header, layout_.bytes_size);
    if (size > kMaxTableBytes) return false;
    out.assign(size, '\0');
    return memory_.read(address + layout_.bytes_data, out.data(), size);
}

const PythonProcess::CodeInfo* PythonProcess::code_info(std::uint64_t code) {
    unsigned char header[512] = {};
    if (code == 0 || layout_.code_size > sizeof header || !memory_.read_cached(code, header, layout_.code_size))
        return nullptr;
    if (word_at(header, layout_.object_type) != code_type_) return nullptr;
    const std::uint64_t name = word_at(header, layout_.code_qualname ? *layout_.code_qualname : layout_.code_name);
    const std::uint64_t file = word_at(header, layout_.code_filename);
    const std::uint64_t table = word_at(header, layout_.code_linetable);
    const int first_line = int_at(header, layout_.code_firstlineno);
    // The cache is keyed by address; a code object freed and another allocated there
    // has other names and table, so the entry is checked against them.
    const std::uint64_t key = name ^ (file << 1) ^ (table << 2) ^ static_cast<std::uint64_t>(first_line);
    std::unique_ptr<CodeInfo>& entry = codes_[code];
    if (entry && entry->key == key) return entry.get();
    auto info = std::make_unique<CodeInfo>();
    if (!read_string(name, info->function) || !read_string(file, info->file) || !read_bytes(table, info->line_table)) {
        codes_.erase(code);
        return nullptr;
    }
    info->first_line = first_line;
    info->key = key;
    if (layout_.frame_localsplus && int_at(header, layout_.code_argcount) > 0) {
        constexpr std::uint64_t kTupleItems = 24;  // PyTupleObject's ob_item
        std::uint64_t first = 0;
        std::string argument;
        if (memory_.read_pointer(word_at(header, layout_.code_varnames) + kTupleItems, first) &&
            read_string(first, argument))
            info->first_argument = argument == "self" ? 1 : argument == "cls" ? 2 : 0;
    }
    entry = std::move(info);
    return entry.get();
}

// The class named by a 3.8-3.10 frame's first local: type(self).__name__ for `self`,
// cls.__name__ for `cls` (a type's tp_name, a C string); "" when unreadable or not a name.
// As with py-spy, a method inherited by a subclass is named by the subclass.
std::string PythonProcess::class_of_first_argument(std::uint64_t frame, int kind) {
    std::uint64_t object = 0, type = 0, name = 0;
    if (!memory_.read_cached(frame + *layout_.frame_localsplus, &object, sizeof object) || object == 0) return "";
    if (kind == 2)
        type = object;
    else if (!memory_.read_cached(object + layout_.object_type, &type, sizeof type))
        return "";
    if (type == 0 || !memory_.read_cached(type + layout_.type_name, &name, sizeof name) || name == 0) return "";
    char text[128] = {};
    if (!memory_.read_cached(name, text, sizeof text - 1) && !memory_.read(name, text, 32)) return "";
    std::string result;
    for (const char* c = text; *c && result.size() < sizeof text - 1; ++c) {
        const bool word = std::isalnum(static_cast<unsigned char>(*c)) || *c == '_' || *c == '.';
        if (!word) return "";
        result += *c;
    }
    // A C type's tp_name carries its module ("collections.OrderedDict"): the class alone.
    const std::size_t dot = result.rfind('.');
    return dot == std::string::npos ? result : result.substr(dot + 1);
}

int PythonProcess::line_of(const CodeInfo& code, std::int64_t instruction_byte) const {
    return line_for_instruction(layout_.line_table, code.line_table, code.first_line, instruction_byte);
}

bool PythonProcess::read_stack(std::uint64_t frame, std::vector<PythonFrame>& frames) {
    unsigned char block[512] = {};
    bootstrap_self_ = 0;
    std::uint64_t outermost = 0;  // the last frame with code of its own
    for (int depth = 0; frame != 0; ++depth) {
        if (depth >= kMaxFrames || layout_.frame_size > sizeof block) return false;
        if (!memory_.read_cached(frame, block, layout_.frame_size)) return false;
        const std::uint64_t code_address = word_at(block, layout_.frame_code);
        const std::uint64_t back = word_at(block, layout_.frame_back);
        if (layout_.frame_owner && block[*layout_.frame_owner] == kOwnedByCStack && version_.minor >= 12) {
            if (!frames.empty()) frames.back().entry = true;  // the eval call's first frame
            frame = back;
            continue;
        }
        const CodeInfo* code = code_info(code_address);
        if (!code) return false;
        std::int64_t instruction_byte = 0;
        if (layout_.interpreter_frames) {
            // The instruction executing (3.13's instr_ptr) or last executed (prev_instr).
            const std::uint64_t instruction = word_at(block, layout_.frame_instr);
            instruction_byte = static_cast<std::int64_t>(instruction - (code_address + layout_.code_adaptive));
            if (instruction_byte < 0) instruction_byte = 0;  // not started yet
        } else {
            const int lasti = int_at(block, layout_.frame_lasti);  // bytes; code units in 3.10
            instruction_byte = layout_.line_table == LineTable::linetable ? std::int64_t(lasti) * 2 : lasti;
        }
        std::string function = code->function;
        if (code->first_argument != 0)
            if (const std::string owner = class_of_first_argument(frame, code->first_argument); !owner.empty())
                function = owner + "." + function;
        PythonFrame entry{std::move(function), code->file, line_of(*code, instruction_byte)};
        entry.entry = !layout_.interpreter_frames || (layout_.frame_is_entry && block[*layout_.frame_is_entry] != 0);
        frames.push_back(std::move(entry));
        outermost = frame;
        frame = back;
    }
    // A thread threading started runs Thread._bootstrap (threading.py) outermost, its
    // first local the Thread object.
    if (!frames.empty() && layout_.frame_locals != 0) {
        const PythonFrame& last = frames.back();
        const auto ends_with = [](const std::string& text, std::string_view tail) {
            return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
        };
        if (ends_with(last.function, "_bootstrap") && ends_with(last.file, "threading.py"))
            memory_.read_pointer(outermost + layout_.frame_locals, bootstrap_self_);
    }
    return true;
}

// The value of item `name` (a str key) of a dict: `dict` (a PyDictObject), or a split
// table's shared `keys` with an object's `values` (dict 0). Keys objects: 3.8-3.10
// (dk_size, dk_nentries, indices, 24-byte entries) and 3.11+ (log2 sizes, dk_kind:
// 24-byte general entries or 16-byte str-keyed ones); 3.13's values start 8 bytes in.
bool PythonProcess::dict_item(std::uint64_t keys, std::uint64_t values, std::uint64_t dict, const std::string& name,
                              std::uint64_t& value) {
    constexpr std::uint64_t kDictKeys = 32, kDictValues = 40;  // PyDictObject's ma_keys, ma_values (3.8-3.13)
    if (dict != 0 &&
        (!memory_.read_pointer(dict + kDictKeys, keys) || !memory_.read_pointer(dict + kDictValues, values)))
        return false;
    unsigned char header[40] = {};
    if (keys == 0 || !memory_.read_cached(keys, header, sizeof header)) return false;
    std::uint64_t entries = 0, count = 0, entry_size = 24, key_at = 8, value_at = 16;
    if (version_.minor <= 10) {
        const std::uint64_t size = word_at(header, 8);
        if (size == 0 || size > (1u << 20)) return false;
        const std::uint64_t width = size <= 0xff ? 1 : size <= 0xffff ? 2 : size <= 0xffffffffull ? 4 : 8;
        count = word_at(header, 32);
        entries = keys + 40 + size * width;
    } else {
        const unsigned index_bytes = header[9];
        if (index_bytes > 24) return false;
        if (header[10] != 0) entry_size = 16, key_at = 0, value_at = 8;  // str keys: no hash stored
        count = word_at(header, 24);
        entries = keys + 32 + (std::uint64_t{1} << index_bytes);
    }
    if (count > 1024) return false;
    const std::uint64_t values_start = values + (version_.minor >= 13 ? 8 : 0);
    unsigned char entry[24] = {};
    std::string key;
    for (std::uint64_t index = 0; index < count; ++index) {
        if (!memory_.read_cached(entries + index * entry_size, entry, entry_size)) return false;
        const std::uint64_t key_object = word_at(entry, key_at);
        if (key_object == 0 || !read_string(key_object, key) || key != name) continue;
        if (values == 0)
            value = word_at(entry, value_at);
        else if (!memory_.read_pointer(values_start + index * 8, value))
            return false;
        return value != 0;
    }
    return false;
}

// Attribute `name` from an object's instance dict: at tp_dictoffset (3.8-3.10, and
// classes without a managed dict), else the managed dict of 3.11+ (a pointer three
// words before the object, or its values kept apart with the keys shared by the type:
// four words before it in 3.11, tagged in the same word in 3.12, inline after the
// object in 3.13).
bool PythonProcess::attribute(std::uint64_t object, const std::string& name, std::uint64_t& value) {
    constexpr std::uint64_t kTypeBasicSize = 32, kTypeFlags = 168, kTypeDictOffset = 288;  // PyTypeObject, 3.8-3.13
    constexpr std::uint64_t kManagedDict = 1u << 4, kInlineValues = 1u << 2;               // Py_TPFLAGS_*
    std::uint64_t type = 0, flags = 0;
    if (object == 0 || !memory_.read_pointer(object + layout_.object_type, type) || type == 0 ||
        !memory_.read_pointer(type + kTypeFlags, flags))
        return false;
    if (version_.minor <= 10 || !(flags & kManagedDict)) {
        std::int64_t offset = 0;
        std::uint64_t dict = 0;
        if (!memory_.read_value(type + kTypeDictOffset, offset) || offset <= 0 || offset > 4096 ||
            !memory_.read_pointer(object + static_cast<std::uint64_t>(offset), dict))
            return false;
        return dict != 0 && dict_item(0, 0, dict, name, value);
    }
    const std::uint64_t cached_keys = version_.minor == 11 ? 872 : 880;  // PyHeapTypeObject.ht_cached_keys
    std::uint64_t slot = 0, keys = 0;
    if (!memory_.read_pointer(object - 24, slot)) return false;
    if (version_.minor == 12 && (slot & 1)) {
        // 3.12 keeps values as (char *)values - 1: odd, where a dict pointer is even.
        return memory_.read_pointer(type + cached_keys, keys) && dict_item(keys, slot + 1, 0, name, value);
    }
    if (slot != 0) return dict_item(0, 0, slot, name, value);
    std::uint64_t values = 0;
    if (version_.minor == 11) {
        if (!memory_.read_pointer(object - 32, values) || values == 0) return false;
    } else if (version_.minor >= 13 && (flags & kInlineValues)) {
        std::uint64_t basic_size = 0;
        if (!memory_.read_pointer(type + kTypeBasicSize, basic_size) || basic_size == 0 || basic_size > 4096)
            return false;
        values = object + basic_size;
    } else {
        return false;
    }
    return memory_.read_pointer(type + cached_keys, keys) && dict_item(keys, values, 0, name, value);
}

// Thread.name (its `_name`), read again at most once a second per Thread object.
std::string PythonProcess::thread_object_name(std::uint64_t thread_object) {
    const std::int64_t now = os::monotonic_ns();
    KnownName& known = thread_names_[thread_object];
    if (known.read_ns != 0 && now - known.read_ns < 1'000'000'000) return known.name;
    std::uint64_t name = 0;
    std::string text;
    if (attribute(thread_object, "_name", name) && read_string(name, text)) known.name = text;
    known.read_ns = now;
    std::string result = known.name;
    if (thread_names_.size() > 4096) thread_names_.clear();  // threads come and go: forget the old ones
    return result;
}

pid_t PythonProcess::os_thread_of(std::uint64_t pthread_id) {
    // Before 3.11 a thread state knows only its pthread_t, the address of glibc's struct
    // pthread in the process, which holds the kernel's tid. Its offset is found once:
    // the word that equals a tid of the process for every thread state seen.
    if (auto known = os_threads_.find(pthread_id); known != os_threads_.end()) return known->second;
    const std::vector<pid_t> tids = process_threads(pid());
    const std::set<pid_t> tid_set(tids.begin(), tids.end());
    constexpr std::size_t kScan = 2048;
    std::vector<unsigned char> block(kScan);
    if (pthread_id == 0 || !memory_.read(pthread_id, block.data(), kScan)) return 0;
    auto tid_at = [&](std::size_t offset) {
        const std::int32_t value = int_at(block.data(), offset);
        return tid_set.count(value) ? static_cast<pid_t>(value) : 0;
    };
    if (pthread_tid_offset_ >= 0) {
        const pid_t tid = tid_at(static_cast<std::size_t>(pthread_tid_offset_));
        if (tid) os_threads_[pthread_id] = tid;
        return tid;
    }
    // glibc's x86-64 struct pthread has had `tid` at 0x2d0 for years: tried first.
    for (std::size_t offset : {std::size_t(0x2d0)}) {
        if (const pid_t tid = tid_at(offset)) {
            pthread_tid_offset_ = static_cast<long>(offset);
            return os_threads_[pthread_id] = tid;
        }
    }
    for (std::size_t offset = 0; offset + 4 <= kScan; offset += 4) {
        if (const pid_t tid = tid_at(offset)) {
            pthread_tid_offset_ = static_cast<long>(offset);
            return os_threads_[pthread_id] = tid;
        }
    }
    return 0;
}

bool PythonProcess::snapshot(std::vector<PythonThread>& threads, std::string& error) {
    threads.clear();
    memory_.forget_pages();  // every snapshot reads the process afresh
    std::uint64_t interpreter = 0;
    if (!memory_.read_pointer(runtime_ + layout_.runtime_interpreters_head, interpreter)) {
        error = refusal_reason(pid(), memory_.last_errno());
        return false;
    }
    unsigned char state[4096] = {};
    for (int interpreters = 0; interpreter != 0 && interpreters < kMaxInterpreters; ++interpreters) {
        std::uint64_t thread = 0;
        if (!memory_.read_pointer(interpreter + layout_.interp_threads_head, thread)) break;
        for (int count = 0; thread != 0 && count < kMaxThreads; ++count) {
            if (layout_.tstate_size > sizeof state || !memory_.read_cached(thread, state, layout_.tstate_size)) break;
            if (word_at(state, layout_.tstate_interp) != interpreter) break;  // changed under us
            PythonThread entry;
            entry.thread_id = word_at(state, layout_.tstate_thread_id);
            entry.tid = layout_.tstate_native_thread_id
                            ? static_cast<pid_t>(word_at(state, *layout_.tstate_native_thread_id))
                            : os_thread_of(entry.thread_id);
            std::uint64_t frame = word_at(state, layout_.tstate_frame);
            bool readable = true;
            if (layout_.frame_through_cframe && frame != 0)
                readable = memory_.read_pointer(frame + layout_.cframe_current_frame, frame);
            if (readable && read_stack(frame, entry.frames)) {
                if (bootstrap_self_ != 0) entry.name = thread_object_name(bootstrap_self_);
                threads.push_back(std::move(entry));
            }
            thread = word_at(state, layout_.tstate_next);
        }
        if (!memory_.read_pointer(interpreter + layout_.interp_next, interpreter)) break;
    }
    if (threads.empty() && memory_.last_errno() == ESRCH) {
        error = refusal_reason(pid(), ESRCH);
        return false;
    }
    return true;
}

}  // namespace ember::collector::python
