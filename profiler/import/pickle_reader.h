// pickle_reader.h: a reader of Python pickles (protocols 0 to 5) that takes data
// only. It builds plain values — None, bool, int, float, str, bytes, list, tuple,
// dict — and never runs anything: every opcode that names a class or a callable
// (GLOBAL, STACK_GLOBAL, INST, OBJ, REDUCE, BUILD, NEWOBJ, NEWOBJ_EX, EXT1/2/4,
// PERSID, BINPERSID) and the out-of-band buffers of protocol 5 (NEXT_BUFFER,
// READONLY_BUFFER) are refused with store::TraceError naming the file, the opcode
// and its byte offset. Sets (EMPTY_SET, ADDITEMS, FROZENSET) are refused too: no
// snapshot has one and the value model has no place for them.
//
// Integers are 64-bit signed: a LONG wider than that is refused (addresses, sizes,
// stream handles and microsecond times all fit; nothing in a memory snapshot is
// bigger).
//
// Memory. The file is read through a 1 MiB buffer, never held whole. A memory
// snapshot is a dict whose `device_traces` hold nearly all of its bytes (one dict per
// allocator event), so a tree of the whole file would cost several times the file.
// Instead the caller may take the items of a list as the pickle appends them
// (ListItemsHook): pickle appends in batches of at most 1,000, so the snapshot
// importer turns each batch of events into trace rows and the events never pile up.
// An item taken this way also leaves the memo (the table of shared objects a pickle
// refers back to), so only the objects that are shared — frame lists, strings —
// stay in memory, and the rest of the tree (the segments) is built as usual.
//
// Where a list lies. A pickle builds a container before it is attached to its
// parent, so when a batch arrives the reader works out the list's place from the
// stack: an item above a MARK belongs to the container just below that MARK, at the
// parent list's length plus its distance from the MARK, or, in a dict, under the key
// just below it; without a MARK, the container just below it (APPEND / SETITEM of a
// single item). The hook gets that path ("device_traces", 2). A hook that must be
// sure can check the identity of the list it was given against the finished tree
// (Value::same_container).
//
// Cycles (a list appended to itself, or to something it contains) are refused: the
// value tree stays a tree of shared parts, and freeing it never recurses.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ember::importing::pickle {

enum class Kind : std::uint8_t { none, boolean, integer, real, string, bytes, list, tuple, dict };

const char* kind_name(Kind kind);

struct Container;

// A plain value. Containers are shared (a pickle refers back to an object through
// its memo); scalars are held inline, text in a shared string.
class Value {
  public:
    Value() = default;
    static Value of_none() { return Value(); }
    static Value of_bool(bool value);
    static Value of_int(std::int64_t value);
    static Value of_real(double value);
    static Value of_string(std::string text);
    static Value of_bytes(std::string bytes);
    static Value of_container(Kind kind);  // an empty list, tuple or dict

    Kind kind() const { return kind_; }
    bool is_none() const { return kind_ == Kind::none; }
    bool is_container() const { return kind_ == Kind::list || kind_ == Kind::tuple || kind_ == Kind::dict; }
    bool boolean() const { return integer_ != 0; }
    std::int64_t integer() const { return integer_; }
    double real() const { return real_; }
    // Text of a str or bytes value ("" for others).
    std::string_view text() const { return text_ ? std::string_view(*text_) : std::string_view(); }

    // A number as int64 when it is one (int, bool); nullopt otherwise.
    bool is_integer() const { return kind_ == Kind::integer || kind_ == Kind::boolean; }
    // A number as double (int, bool or float).
    bool is_number() const { return is_integer() || kind_ == Kind::real; }
    double as_double() const { return kind_ == Kind::real ? real_ : static_cast<double>(integer_); }

    // Items of a list or tuple (empty for others).
    std::span<const Value> items() const;
    // Entries of a dict in insertion order (empty for others).
    std::span<const std::pair<Value, Value>> entries() const;
    // The value under a str key of a dict; nullptr when absent or not a dict.
    const Value* find(std::string_view key) const;
    std::size_t size() const;  // items or entries of a container, 0 otherwise
    bool same_container(const Value& other) const { return container_ && container_ == other.container_; }

    // For the reader.
    Container* container() const { return container_.get(); }
    const std::shared_ptr<Container>& shared_container() const { return container_; }

  private:
    Kind kind_ = Kind::none;
    std::int64_t integer_ = 0;
    double real_ = 0.0;
    std::shared_ptr<const std::string> text_;
    std::shared_ptr<Container> container_;
};

struct Container {
    Kind kind = Kind::list;
    std::vector<Value> items;                      // list, tuple
    std::vector<std::pair<Value, Value>> entries;  // dict
    std::int64_t memo_key = -1;                    // where the memo holds it (the last PUT), -1 none
    bool holds_containers = false;
    bool attached = false;  // placed in another container
    Container() = default;
    Container(const Container&) = delete;
    Container& operator=(const Container&) = delete;
    ~Container();  // frees nested containers without recursing
};

// One step of a list's place in the tree: a dict key or a list/tuple index.
struct PathStep {
    std::string key;          // a str key of a dict ("" when the step is an index)
    std::int64_t index = -1;  // an index in a list (-1 when the step is a key)
};

// Called with a list and the items about to be appended to it (one APPEND or one
// APPENDS batch). Return true to take them: they are then neither appended nor kept
// in the memo. `path` runs from the root (see "Where a list lies").
using ListItemsHook = std::function<bool(std::span<const PathStep> path, const Value& list, std::vector<Value>& items)>;

struct ReadOptions {
    ListItemsHook on_list_items;
};

// Reads the pickle at `path` (the file's first pickle; bytes after STOP are ignored).
// Throws store::TraceError: not_found (cannot open), truncated (ends before STOP),
// corrupt (a malformed or refused opcode: "PATH: byte 1234: opcode REDUCE (0x52)
// would call a Python callable; refused: only plain data is read").
Value read_pickle_file(const std::string& path, const ReadOptions& options = {});

// The same on bytes in memory (`name` stands for the file in messages).
Value read_pickle_bytes(std::string_view bytes, const std::string& name, const ReadOptions& options = {});

}  // namespace ember::importing::pickle
