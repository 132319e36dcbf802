// pickle_reader.cpp: the pickle virtual machine, restricted to data (pickle_reader.h).
// Index:
//   [SECTION] Values
//   [SECTION] Input: a buffered file or bytes in memory, with the offset of each byte
//   [SECTION] The machine: stack, marks, memo, and one case per opcode
#include "profiler/import/pickle_reader.h"

#include "common/text.h"
#include "profiler/store/trace_error.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

namespace ember::importing::pickle {

using store::TraceError;
using store::TraceErrorKind;

// ---------------------------------------------------------------------------
// [SECTION] Values
// ---------------------------------------------------------------------------

const char* kind_name(Kind kind) {
    switch (kind) {
        case Kind::none:
            return "None";
        case Kind::boolean:
            return "bool";
        case Kind::integer:
            return "int";
        case Kind::real:
            return "float";
        case Kind::string:
            return "str";
        case Kind::bytes:
            return "bytes";
        case Kind::list:
            return "list";
        case Kind::tuple:
            return "tuple";
        case Kind::dict:
            return "dict";
    }
    return "?";
}

Value Value::of_bool(bool value) {
    Value v;
    v.kind_ = Kind::boolean;
    v.integer_ = value ? 1 : 0;
    return v;
}
Value Value::of_int(std::int64_t value) {
    Value v;
    v.kind_ = Kind::integer;
    v.integer_ = value;
    return v;
}
Value Value::of_real(double value) {
    Value v;
    v.kind_ = Kind::real;
    v.real_ = value;
    return v;
}
Value Value::of_string(std::string text) {
    Value v;
    v.kind_ = Kind::string;
    v.text_ = std::make_shared<const std::string>(std::move(text));
    return v;
}
Value Value::of_bytes(std::string bytes) {
    Value v = of_string(std::move(bytes));
    v.kind_ = Kind::bytes;
    return v;
}
Value Value::of_container(Kind kind) {
    Value v;
    v.kind_ = kind;
    v.container_ = std::make_shared<Container>();
    v.container_->kind = kind;
    return v;
}

std::span<const Value> Value::items() const {
    if (!container_ || kind_ == Kind::dict) return {};
    return container_->items;
}
std::span<const std::pair<Value, Value>> Value::entries() const {
    if (!container_ || kind_ != Kind::dict) return {};
    return container_->entries;
}
const Value* Value::find(std::string_view key) const {
    for (const auto& [k, v] : entries()) {
        if (k.kind() == Kind::string && k.text() == key) return &v;
    }
    return nullptr;
}
std::size_t Value::size() const {
    if (!container_) return 0;
    return kind_ == Kind::dict ? container_->entries.size() : container_->items.size();
}

namespace {

// Containers freed while another is being freed wait here, so a nesting a million
// deep is freed by a loop, not a million nested destructor calls.
thread_local std::vector<std::shared_ptr<Container>>* g_freeing = nullptr;

void hand_over(Value& value, std::vector<std::shared_ptr<Container>>& pending) {
    if (value.container() != nullptr) pending.push_back(value.shared_container());
    value = Value();
}

}  // namespace

Container::~Container() {
    if (!holds_containers) return;
    std::vector<std::shared_ptr<Container>> local;
    std::vector<std::shared_ptr<Container>>& pending = g_freeing != nullptr ? *g_freeing : local;
    for (Value& item : items) hand_over(item, pending);
    for (auto& [key, value] : entries) {
        hand_over(key, pending);
        hand_over(value, pending);
    }
    if (g_freeing != nullptr) return;  // an outer destructor drains them
    g_freeing = &local;
    while (!local.empty()) {
        std::shared_ptr<Container> next = std::move(local.back());
        local.pop_back();
        next.reset();  // may push its own children onto `local`
    }
    g_freeing = nullptr;
}

// ---------------------------------------------------------------------------
// [SECTION] Input
// ---------------------------------------------------------------------------

namespace {

class Input {
  public:
    Input(std::string_view bytes, std::string name) : name_(std::move(name)), memory_(bytes), total_(bytes.size()) {}
    Input(std::FILE* file, std::uint64_t total, std::string name)
        : name_(std::move(name)), file_(file), total_(total), buffer_(1u << 20) {}

    const std::string& name() const { return name_; }
    std::uint64_t offset() const { return consumed_; }
    std::uint64_t remaining() const { return total_ > consumed_ ? total_ - consumed_ : 0; }

    // The next byte, or -1 at the end.
    int next_byte() {
        if (file_ == nullptr) {
            if (consumed_ >= memory_.size()) return -1;
            return static_cast<unsigned char>(memory_[consumed_++]);
        }
        if (at_ == filled_ && !refill()) return -1;
        ++consumed_;
        return static_cast<unsigned char>(buffer_[at_++]);
    }

    void read(char* out, std::size_t count) {
        if (count > remaining()) truncated();
        if (file_ == nullptr) {
            std::memcpy(out, memory_.data() + consumed_, count);
            consumed_ += count;
            return;
        }
        while (count > 0) {
            if (at_ == filled_ && !refill()) truncated();
            std::size_t take = std::min(count, filled_ - at_);
            std::memcpy(out, buffer_.data() + at_, take);
            at_ += take;
            consumed_ += take;
            out += take;
            count -= take;
        }
    }

    std::string read_string(std::uint64_t count) {
        if (count > remaining()) truncated();
        std::string text(static_cast<std::size_t>(count), '\0');
        read(text.data(), text.size());
        return text;
    }

    // A protocol 0 argument: the bytes up to the next newline (not included).
    std::string read_line() {
        std::string line;
        for (;;) {
            int c = next_byte();
            if (c < 0) truncated();
            if (c == '\n') return line;
            if (line.size() >= (1u << 20)) {
                throw TraceError(TraceErrorKind::corrupt, name_,
                                 fmt::format("byte {}: a text argument over 1 MiB", consumed_));
            }
            line.push_back(static_cast<char>(c));
        }
    }

    template <typename T>
    T read_little_endian() {
        unsigned char bytes[sizeof(T)];
        read(reinterpret_cast<char*>(bytes), sizeof bytes);
        std::uint64_t value = 0;
        for (std::size_t i = 0; i < sizeof(T); ++i) value |= static_cast<std::uint64_t>(bytes[i]) << (8 * i);
        return static_cast<T>(value);
    }

    [[noreturn]] void truncated() const {
        throw TraceError(TraceErrorKind::truncated, name_,
                         fmt::format("byte {}: the pickle ends before its STOP opcode", consumed_));
    }

  private:
    bool refill() {
        at_ = 0;
        filled_ = std::fread(buffer_.data(), 1, buffer_.size(), file_);
        if (filled_ == 0 && std::ferror(file_)) {
            throw TraceError(TraceErrorKind::io, name_,
                             fmt::format("byte {}: read failed: {}", consumed_, std::strerror(errno)));
        }
        return filled_ > 0;
    }

    std::string name_;
    std::string_view memory_;
    std::FILE* file_ = nullptr;
    std::uint64_t total_ = 0;
    std::uint64_t consumed_ = 0;
    std::vector<char> buffer_;
    std::size_t at_ = 0, filled_ = 0;
};

// ---------------------------------------------------------------------------
// [SECTION] The machine
// ---------------------------------------------------------------------------

const char* opcode_name(int op) {
    switch (op) {
        case 'c':
            return "GLOBAL";
        case 0x93:
            return "STACK_GLOBAL";
        case 'R':
            return "REDUCE";
        case 'b':
            return "BUILD";
        case 'i':
            return "INST";
        case 'o':
            return "OBJ";
        case 0x81:
            return "NEWOBJ";
        case 0x92:
            return "NEWOBJ_EX";
        case 0x82:
            return "EXT1";
        case 0x83:
            return "EXT2";
        case 0x84:
            return "EXT4";
        case 'P':
            return "PERSID";
        case 'Q':
            return "BINPERSID";
        case 0x97:
            return "NEXT_BUFFER";
        case 0x98:
            return "READONLY_BUFFER";
        case 0x8f:
            return "EMPTY_SET";
        case 0x90:
            return "ADDITEMS";
        case 0x91:
            return "FROZENSET";
        default:
            return "?";
    }
}

class Machine {
  public:
    Machine(Input& input, const ReadOptions& options) : in_(input), options_(options) {}

    Value run() {
        for (;;) {
            op_offset_ = in_.offset();
            int op = in_.next_byte();
            if (op < 0) in_.truncated();
            if (op == '.') {
                Value result = pop();
                return result;
            }
            step(op);
        }
    }

  private:
    [[noreturn]] void fail(const std::string& message) const {
        throw TraceError(TraceErrorKind::corrupt, in_.name(), fmt::format("byte {}: {}", op_offset_, message));
    }

    std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
    Value pop() {
        if (stack_.size() <= floor()) fail("stack underflow (an opcode takes more values than were pushed)");
        Value v = std::move(stack_.back());
        stack_.pop_back();
        return v;
    }
    Value& top() {
        if (stack_.size() <= floor()) fail("stack underflow (an opcode takes more values than were pushed)");
        return stack_.back();
    }
    // The values above the last MARK, which is removed.
    std::vector<Value> pop_mark() {
        if (marks_.empty()) fail("no MARK to pop to");
        std::size_t at = marks_.back();
        marks_.pop_back();
        std::vector<Value> items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(at)),
                                 std::make_move_iterator(stack_.end()));
        stack_.resize(at);
        return items;
    }

    void push(Value v) {
        if (stack_.size() >= (1u << 26)) fail("over 67 million values on the stack");
        stack_.push_back(std::move(v));
    }

    // Whether `target` is reachable from `from` (a cycle if `from` were put in `target`).
    static bool reaches(Container* from, const Container* target) {
        if (from == target) return true;
        if (!from->holds_containers) return false;
        std::vector<Container*> work{from};
        std::unordered_set<Container*> seen{from};
        auto visit = [&](const Value& v) {
            Container* c = v.container();
            if (c == nullptr) return false;
            if (c == target) return true;
            if (c->holds_containers && seen.insert(c).second) work.push_back(c);
            return false;
        };
        while (!work.empty()) {
            Container* c = work.back();
            work.pop_back();
            for (const Value& item : c->items)
                if (visit(item)) return true;
            for (const auto& [key, value] : c->entries)
                if (visit(key) || visit(value)) return true;
        }
        return false;
    }

    // A cycle needs `parent` to be reachable from `child`, so `parent` must already sit
    // inside some container. A pickle written by Python fills each container before
    // placing it in its parent, so the search runs only for unusual (or cyclic) input.
    void check_child(Container& parent, const Value& child) {
        Container* c = child.container();
        if (c == nullptr) return;
        if (c == &parent || (parent.attached && reaches(c, &parent)))
            fail("a container would contain itself (a cycle); refused");
        parent.holds_containers = true;
        c->attached = true;
    }

    Container& container_of(Value& v, Kind kind, const char* opcode) {
        if (v.kind() != kind || v.container() == nullptr) {
            fail(fmt::format("{} on a {} (expected a {})", opcode, kind_name(v.kind()), kind_name(kind)));
        }
        return *v.container();
    }

    Value make_sequence(Kind kind, std::vector<Value> items) {
        Value v = Value::of_container(kind);
        for (const Value& item : items) check_child(*v.container(), item);
        v.container()->items = std::move(items);
        return v;
    }

    Value make_dict(std::vector<Value> items) {
        if (items.size() % 2 != 0) fail("DICT with an odd number of values (a key without its value)");
        Value v = Value::of_container(Kind::dict);
        set_items(*v.container(), items);
        return v;
    }

    void set_items(Container& dict, std::vector<Value>& items) {
        if (items.size() % 2 != 0) fail("SETITEMS with an odd number of values (a key without its value)");
        for (std::size_t i = 0; i < items.size(); i += 2) {
            check_child(dict, items[i]);
            check_child(dict, items[i + 1]);
            // A repeated key replaces the value, as in Python (str keys; other keys are kept in
            // order).
            bool replaced = false;
            if (items[i].kind() == Kind::string) {
                for (auto& [key, value] : dict.entries) {
                    if (key.kind() == Kind::string && key.text() == items[i].text()) {
                        value = std::move(items[i + 1]);
                        replaced = true;
                        break;
                    }
                }
            }
            if (!replaced) dict.entries.emplace_back(std::move(items[i]), std::move(items[i + 1]));
        }
    }

    // --- where a list lies (pickle_reader.h, "Where a list lies") ----------------------
    std::vector<PathStep> path_of(std::size_t position) const {
        std::vector<PathStep> reversed;
        for (int guard = 0; position > 0 && guard < 64; ++guard) {
            // The last MARK at or below `position`.
            std::size_t mark = 0;
            bool has_mark = false;
            for (std::size_t i = marks_.size(); i-- > 0;) {
                if (marks_[i] <= position) {
                    mark = marks_[i];
                    has_mark = true;
                    break;
                }
            }
            std::size_t parent = 0;
            PathStep step;
            bool found = false;
            if (has_mark && mark >= 1) {
                const Value& candidate = stack_[mark - 1];
                std::size_t distance = position - mark;
                if (candidate.kind() == Kind::list) {
                    step.index = static_cast<std::int64_t>(candidate.size() + distance);
                    parent = mark - 1;
                    found = true;
                } else if (candidate.kind() == Kind::dict && distance % 2 == 1 &&
                           stack_[position - 1].kind() == Kind::string) {
                    step.key = std::string(stack_[position - 1].text());
                    parent = mark - 1;
                    found = true;
                }
            }
            if (!found && !(has_mark && mark == position)) {
                if (stack_[position - 1].kind() == Kind::list) {
                    step.index = static_cast<std::int64_t>(stack_[position - 1].size());
                    parent = position - 1;
                    found = true;
                } else if (position >= 2 && stack_[position - 1].kind() == Kind::string &&
                           stack_[position - 2].kind() == Kind::dict) {
                    step.key = std::string(stack_[position - 1].text());
                    parent = position - 2;
                    found = true;
                }
            }
            if (!found) {
                reversed.push_back(PathStep{"?", -1});
                break;
            }
            reversed.push_back(std::move(step));
            position = parent;
        }
        return {reversed.rbegin(), reversed.rend()};
    }

    // The hook sees the items first; what it takes leaves the memo too.
    bool offer(std::size_t list_position, std::vector<Value>& items) {
        if (!options_.on_list_items) return false;
        std::vector<PathStep> path = path_of(list_position);
        if (!options_.on_list_items(path, stack_[list_position], items)) return false;
        for (const Value& item : items) {
            Container* c = item.container();
            if (c == nullptr || c->memo_key < 0) continue;
            auto found = memo_.find(static_cast<std::uint64_t>(c->memo_key));
            if (found != memo_.end() && found->second.container() == c) memo_.erase(found);
        }
        items.clear();
        return true;
    }

    void append(std::size_t list_position, std::vector<Value> items, const char* opcode) {
        Container& list = container_of(stack_[list_position], Kind::list, opcode);
        if (offer(list_position, items)) return;
        for (Value& item : items) {
            check_child(list, item);
            list.items.push_back(std::move(item));
        }
    }

    void memo_put(std::uint64_t key) {
        Value& v = top();
        if (memo_.size() >= (1u << 27) && !memo_.count(key)) fail("over 134 million memo entries");
        if (Container* c = v.container()) c->memo_key = static_cast<std::int64_t>(key);
        memo_[key] = v;
    }
    void memo_get(std::uint64_t key) {
        auto found = memo_.find(key);
        if (found == memo_.end()) fail(fmt::format("memo entry {} is not defined", key));
        push(found->second);
    }

    std::int64_t parse_decimal(std::string_view text, const char* opcode) {
        while (!text.empty() && (text.back() == 'L' || text.back() == '\r' || text.back() == ' '))
            text.remove_suffix(1);
        if (!text.empty() && text.front() == '+') text.remove_prefix(1);
        std::int64_t value = 0;
        auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error == std::errc::result_out_of_range) {
            fail(fmt::format("{}: the integer {} is wider than 64 bits; refused", opcode, text.substr(0, 40)));
        }
        if (error != std::errc() || end != text.data() + text.size() || text.empty()) {
            fail(fmt::format("{}: not an integer: '{}'", opcode, text.substr(0, 40)));
        }
        return value;
    }

    std::int64_t parse_long_bytes(const std::string& bytes) {
        if (bytes.empty()) return 0;
        if (bytes.size() > 8) {
            // Accept sign extension of a value that fits (e.g. 9 bytes for 2^63 - 1 is not needed,
            // but a redundant 0x00 / 0xff is harmless).
            bool negative = (static_cast<unsigned char>(bytes.back()) & 0x80) != 0;
            for (std::size_t i = 8; i < bytes.size(); ++i) {
                unsigned char expected = negative ? 0xff : 0x00;
                if (static_cast<unsigned char>(bytes[i]) != expected)
                    fail(fmt::format("LONG of {} bytes: an integer wider than 64 bits; refused", bytes.size()));
            }
            if (((static_cast<unsigned char>(bytes[7]) & 0x80) != 0) != negative)
                fail(fmt::format("LONG of {} bytes: an integer wider than 64 bits; refused", bytes.size()));
        }
        std::uint64_t value = 0;
        std::size_t used = std::min<std::size_t>(bytes.size(), 8);
        for (std::size_t i = 0; i < used; ++i)
            value |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
        if (used < 8 && (static_cast<unsigned char>(bytes[used - 1]) & 0x80) != 0)
            value |= ~std::uint64_t{0} << (8 * used);
        return static_cast<std::int64_t>(value);
    }

    static int hex_digit(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }

    // STRING's argument: a Python 2 str literal, 'text' or "text", with escapes.
    std::string parse_quoted(std::string line) {
        while (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.size() < 2 || (line.front() != '\'' && line.front() != '"') || line.back() != line.front())
            fail("STRING: the argument is not a quoted string");
        std::string_view body(line.data() + 1, line.size() - 2);
        std::string out;
        for (std::size_t i = 0; i < body.size(); ++i) {
            char c = body[i];
            if (c != '\\' || i + 1 >= body.size()) {
                out.push_back(c);
                continue;
            }
            char e = body[++i];
            switch (e) {
                case 'n':
                    out.push_back('\n');
                    break;
                case 't':
                    out.push_back('\t');
                    break;
                case 'r':
                    out.push_back('\r');
                    break;
                case 'a':
                    out.push_back('\a');
                    break;
                case 'b':
                    out.push_back('\b');
                    break;
                case 'f':
                    out.push_back('\f');
                    break;
                case 'v':
                    out.push_back('\v');
                    break;
                case 'x': {
                    int hi = i + 1 < body.size() ? hex_digit(body[i + 1]) : -1;
                    int lo = i + 2 < body.size() ? hex_digit(body[i + 2]) : -1;
                    if (hi < 0 || lo < 0) fail("STRING: a bad \\x escape");
                    out.push_back(static_cast<char>(hi * 16 + lo));
                    i += 2;
                    break;
                }
                default:
                    if (e >= '0' && e <= '7') {
                        int value = e - '0';
                        for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
                            value = value * 8 + (body[++i] - '0');
                        out.push_back(static_cast<char>(value & 0xFF));
                    } else {
                        out.push_back(e);  // \\ \' \" and anything else: the character itself
                    }
            }
        }
        return out;
    }

    // UNICODE's argument: raw-unicode-escape (\uXXXX, \UXXXXXXXX; other bytes are Latin-1).
    std::string parse_raw_unicode(const std::string& line) {
        std::string out;
        for (std::size_t i = 0; i < line.size(); ++i) {
            unsigned char c = static_cast<unsigned char>(line[i]);
            if (c == '\\' && i + 1 < line.size() && (line[i + 1] == 'u' || line[i + 1] == 'U')) {
                std::size_t digits = line[i + 1] == 'u' ? 4 : 8;
                if (i + 2 + digits > line.size()) fail("UNICODE: a short \\u escape");
                std::uint32_t code = 0;
                for (std::size_t k = 0; k < digits; ++k) {
                    int d = hex_digit(line[i + 2 + k]);
                    if (d < 0) fail("UNICODE: a bad \\u escape");
                    code = code * 16 + static_cast<std::uint32_t>(d);
                }
                if (code > 0x10FFFF) fail("UNICODE: a code point beyond U+10FFFF");
                text::append_utf8(out, code);
                i += 1 + digits;
            } else {
                text::append_utf8(out, c);
            }
        }
        return out;
    }

    std::uint64_t length(std::uint64_t count) {
        if (count > in_.remaining()) in_.truncated();
        return count;
    }

    void step(int op) {
        switch (op) {
            // --- framing -------------------------------------------------------------------
            case 0x80: {  // PROTO
                int version = in_.next_byte();
                if (version < 0) in_.truncated();
                if (version > 5) fail(fmt::format("pickle protocol {} is newer than 5", version));
                return;
            }
            case 0x95:
                in_.read_little_endian<std::uint64_t>();
                return;  // FRAME: a length hint only
            // --- stack ---------------------------------------------------------------------
            case '(':  // MARK
                if (marks_.size() >= (1u << 20)) fail("over a million open MARKs");
                marks_.push_back(stack_.size());
                return;
            case '0':  // POP
                if (!marks_.empty() && marks_.back() == stack_.size()) {
                    marks_.pop_back();
                } else {
                    pop();
                }
                return;
            case '1':
                pop_mark();
                return;  // POP_MARK
            case '2':
                push(top());
                return;  // DUP
            // --- scalars -------------------------------------------------------------------
            case 'N':
                push(Value::of_none());
                return;
            case 0x88:
                push(Value::of_bool(true));
                return;
            case 0x89:
                push(Value::of_bool(false));
                return;
            case 'I': {  // INT (protocol 0; "00" and "01" are False and True)
                std::string line = in_.read_line();
                if (line == "00") return push(Value::of_bool(false));
                if (line == "01") return push(Value::of_bool(true));
                return push(Value::of_int(parse_decimal(line, "INT")));
            }
            case 'J':
                push(Value::of_int(in_.read_little_endian<std::int32_t>()));
                return;  // BININT
            case 'K':
                push(Value::of_int(in_.read_little_endian<std::uint8_t>()));
                return;  // BININT1
            case 'M':
                push(Value::of_int(in_.read_little_endian<std::uint16_t>()));
                return;  // BININT2
            case 'L':
                push(Value::of_int(parse_decimal(in_.read_line(), "LONG")));
                return;
            case 0x8a: {  // LONG1
                std::uint64_t n = in_.read_little_endian<std::uint8_t>();
                push(Value::of_int(parse_long_bytes(in_.read_string(n))));
                return;
            }
            case 0x8b: {  // LONG4
                std::int32_t n = in_.read_little_endian<std::int32_t>();
                if (n < 0) fail("LONG4 with a negative length");
                if (n > 64) fail(fmt::format("LONG4 of {} bytes: an integer wider than 64 bits; refused", n));
                push(Value::of_int(parse_long_bytes(in_.read_string(static_cast<std::uint64_t>(n)))));
                return;
            }
            case 'F': {  // FLOAT
                std::string line = in_.read_line();
                double value = 0.0;
                auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), value);
                if (error != std::errc() || line.empty())
                    fail(fmt::format("FLOAT: not a number: '{}'", line.substr(0, 40)));
                (void)end;
                push(Value::of_real(value));
                return;
            }
            case 'G': {  // BINFLOAT: big-endian IEEE 754
                unsigned char bytes[8];
                in_.read(reinterpret_cast<char*>(bytes), 8);
                std::uint64_t bits = 0;
                for (unsigned char b : bytes) bits = (bits << 8) | b;
                double value;
                std::memcpy(&value, &bits, sizeof value);
                push(Value::of_real(value));
                return;
            }
            // --- text and bytes --------------------------------------------------------------
            case 'S':
                push(Value::of_string(parse_quoted(in_.read_line())));
                return;  // STRING
            case 'T': {  // BINSTRING
                std::int32_t n = in_.read_little_endian<std::int32_t>();
                if (n < 0) fail("BINSTRING with a negative length");
                push(Value::of_string(in_.read_string(length(static_cast<std::uint64_t>(n)))));
                return;
            }
            case 'U':
                push(Value::of_string(in_.read_string(in_.read_little_endian<std::uint8_t>())));
                return;
            case 'V':
                push(Value::of_string(parse_raw_unicode(in_.read_line())));
                return;  // UNICODE
            case 'X':
                push(Value::of_string(in_.read_string(length(in_.read_little_endian<std::uint32_t>()))));
                return;
            case 0x8c:
                push(Value::of_string(in_.read_string(in_.read_little_endian<std::uint8_t>())));
                return;
            case 0x8d:
                push(Value::of_string(in_.read_string(length(in_.read_little_endian<std::uint64_t>()))));
                return;
            case 'B':
                push(Value::of_bytes(in_.read_string(length(in_.read_little_endian<std::uint32_t>()))));
                return;
            case 'C':
                push(Value::of_bytes(in_.read_string(in_.read_little_endian<std::uint8_t>())));
                return;
            case 0x8e:  // BINBYTES8
            case 0x96:  // BYTEARRAY8 (read as bytes)
                push(Value::of_bytes(in_.read_string(length(in_.read_little_endian<std::uint64_t>()))));
                return;
            // --- containers ------------------------------------------------------------------
            case ']':
                push(Value::of_container(Kind::list));
                return;
            case ')':
                push(Value::of_container(Kind::tuple));
                return;
            case '}':
                push(Value::of_container(Kind::dict));
                return;
            case 'l':
                push(make_sequence(Kind::list, pop_mark()));
                return;  // LIST
            case 't':
                push(make_sequence(Kind::tuple, pop_mark()));
                return;  // TUPLE
            case 'd':
                push(make_dict(pop_mark()));
                return;  // DICT
            case 0x85:
            case 0x86:
            case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
                std::size_t n = static_cast<std::size_t>(op - 0x84);
                std::vector<Value> items(n);
                for (std::size_t i = n; i-- > 0;) items[i] = pop();
                push(make_sequence(Kind::tuple, std::move(items)));
                return;
            }
            case 'a': {  // APPEND
                Value item = pop();
                if (stack_.size() <= floor()) fail("APPEND without a list below its value");
                std::vector<Value> items;
                items.push_back(std::move(item));
                append(stack_.size() - 1, std::move(items), "APPEND");
                return;
            }
            case 'e': {  // APPENDS
                std::vector<Value> items = pop_mark();
                if (stack_.size() <= floor()) fail("APPENDS without a list below its MARK");
                append(stack_.size() - 1, std::move(items), "APPENDS");
                return;
            }
            case 's': {  // SETITEM
                Value value = pop();
                Value key = pop();
                Container& dict = container_of(top(), Kind::dict, "SETITEM");
                std::vector<Value> items;
                items.push_back(std::move(key));
                items.push_back(std::move(value));
                set_items(dict, items);
                return;
            }
            case 'u': {  // SETITEMS
                std::vector<Value> items = pop_mark();
                Container& dict = container_of(top(), Kind::dict, "SETITEMS");
                set_items(dict, items);
                return;
            }
            // --- memo ------------------------------------------------------------------------
            case 'p': {  // PUT
                std::int64_t key = parse_decimal(in_.read_line(), "PUT");
                if (key < 0) fail("PUT with a negative index");
                memo_put(static_cast<std::uint64_t>(key));
                return;
            }
            case 'q':
                memo_put(in_.read_little_endian<std::uint8_t>());
                return;  // BINPUT
            case 'r':
                memo_put(in_.read_little_endian<std::uint32_t>());
                return;  // LONG_BINPUT
            case 0x94:
                memo_put(next_memo_++);
                return;  // MEMOIZE
            case 'g': {  // GET
                std::int64_t key = parse_decimal(in_.read_line(), "GET");
                if (key < 0) fail("GET with a negative index");
                memo_get(static_cast<std::uint64_t>(key));
                return;
            }
            case 'h':
                memo_get(in_.read_little_endian<std::uint8_t>());
                return;  // BINGET
            case 'j':
                memo_get(in_.read_little_endian<std::uint32_t>());
                return;  // LONG_BINGET
            // --- refused: they name classes or callables, or data held elsewhere -----------------
            case 'c':
            case 0x93:
            case 'R':
            case 'b':
            case 'i':
            case 'o':
            case 0x81:
            case 0x92:
            case 0x82:
            case 0x83:
            case 0x84:
            case 'P':
            case 'Q':
                fail(
                    fmt::format("opcode {} (0x{:02x}) would import a Python class or call a callable; refused: "
                                "only "
                                "plain data (None, bool, int, float, str, bytes, list, tuple, dict) is read",
                                opcode_name(op), op));
            case 0x97:
            case 0x98:
                fail(fmt::format("opcode {} (0x{:02x}) refers to an out-of-band buffer; refused", opcode_name(op), op));
            case 0x8f:
            case 0x90:
            case 0x91:
                fail(
                    fmt::format("opcode {} (0x{:02x}): sets are not read (plain data only: None, "
                                "bool, int, float, "
                                "str, bytes, list, tuple, dict)",
                                opcode_name(op), op));
            default:
                fail(fmt::format("unknown opcode 0x{:02x}: not a pickle, or a damaged one", op));
        }
    }

    Input& in_;
    const ReadOptions& options_;
    std::vector<Value> stack_;
    std::vector<std::size_t> marks_;
    std::unordered_map<std::uint64_t, Value> memo_;
    std::uint64_t next_memo_ = 0;
    std::uint64_t op_offset_ = 0;
};

}  // namespace

Value read_pickle_bytes(std::string_view bytes, const std::string& name, const ReadOptions& options) {
    Input input(bytes, name);
    Machine machine(input, options);
    return machine.run();
}

Value read_pickle_file(const std::string& path, const ReadOptions& options) {
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (file == nullptr)
        throw TraceError(TraceErrorKind::not_found, path, fmt::format("cannot open: {}", std::strerror(errno)));
    struct Closer {
        std::FILE* file;
        ~Closer() { std::fclose(file); }
    } closer{file};
    struct stat info {};
    if (::fstat(::fileno(file), &info) != 0) {
        throw TraceError(TraceErrorKind::io, path, fmt::format("cannot stat: {}", std::strerror(errno)));
    }
    Input input(file, static_cast<std::uint64_t>(info.st_size), path);
    Machine machine(input, options);
    return machine.run();
}

}  // namespace ember::importing::pickle
