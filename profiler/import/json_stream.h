// json_stream.h: reading a trace JSON of any size one traceEvents element at a time.
//
// InputStream gives the file's bytes in chunks, looking through gzip (zlib, detected
// from the magic bytes, several members allowed). JsonTraceScanner walks the top
// level of {"traceEvents": [...], "otherKey": ...} (or a bare [...] array, Chrome's
// "JSON Array Format") and hands out each element of traceEvents, and the value of
// each top-level key the caller asked for, as one complete JSON text with
// simdjson's padding after it. The scanner is aware of strings and escapes across
// chunk boundaries but does not validate values (simdjson does, per element).
//
// Memory: two chunk buffers and the largest element that straddles a chunk
// boundary; nothing grows with the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ember::importing {

// Readable bytes after every text this file hands out (simdjson::SIMDJSON_PADDING).
constexpr std::size_t kJsonPadding = 64;

class InputStream {
  public:
    // Opens `path`; throws TraceError (not_found) when it cannot be read.
    explicit InputStream(const std::string& path, std::size_t chunk_bytes = 4u << 20);
    ~InputStream();
    InputStream(const InputStream&) = delete;
    InputStream& operator=(const InputStream&) = delete;

    // The next chunk of (decompressed) bytes, followed by kJsonPadding readable bytes;
    // empty at the end. Valid until the next call. Throws TraceError for a truncated
    // or corrupt gzip stream, naming the compressed byte offset.
    std::string_view next_chunk();
    // Decompressed offset of the first byte of the chunk next_chunk() returned last.
    std::uint64_t chunk_offset() const { return chunk_offset_; }
    bool compressed() const { return compressed_; }
    const std::string& path() const { return path_; }
    // "byte N" or "decompressed byte N" for error messages.
    std::string describe_offset(std::uint64_t offset) const;

  private:
    std::size_t read_compressed();
    std::string_view inflate_chunk();

    std::string path_;
    std::FILE* file_ = nullptr;
    bool compressed_ = false;
    bool finished_ = false;
    // chunk_bytes + padding, left uninitialized: a page is touched only when the
    // input reaches it (a small file never faults in the whole chunk).
    std::unique_ptr<char[]> chunk_;
    std::size_t chunk_capacity_ = 0;  // usable bytes of chunk_
    std::uint64_t chunk_offset_ = 0;
    std::uint64_t next_offset_ = 0;
    // gzip state.
    struct Inflater;
    std::unique_ptr<Inflater> inflater_;
    std::unique_ptr<unsigned char[]> compressed_buffer_;  // uninitialized, like chunk_
    std::size_t compressed_capacity_ = 0;
    std::uint64_t compressed_consumed_ = 0;  // bytes of the file handed to zlib
};

// One value handed out by the scanner: data[0, size) is the JSON text, and
// data[size, size + kJsonPadding) is readable. Valid until the next next().
struct JsonItem {
    enum class Kind { trace_event, top_level_value };
    Kind kind = Kind::trace_event;
    std::string_view key;  // top-level key (raw text between the quotes)
    const char* data = nullptr;
    std::size_t size = 0;
    std::uint64_t offset = 0;  // decompressed byte offset of the value's first byte
    std::uint64_t index = 0;   // 0-based element number within traceEvents
    std::string_view text() const { return {data, size}; }
};

class JsonTraceScanner {
  public:
    // `wanted_keys`: top-level keys (other than traceEvents) whose values to hand
    // out; every other key's value is skipped without being held.
    JsonTraceScanner(InputStream& input, std::vector<std::string> wanted_keys,
                     std::size_t max_value_bytes = std::size_t{1} << 30);

    // The next element or wanted value; false at the end of the document. Throws
    // TraceError: corrupt (malformed JSON, naming the byte offset and what was
    // expected), truncated (the input ends inside the document).
    bool next(JsonItem& item);

    // Whether a traceEvents array (or a top-level array) was found.
    bool saw_trace_events() const { return saw_trace_events_; }

  private:
    enum class State { start, object_key, after_value, events_element, after_element, done };

    bool fill();             // next chunk into [pos_, end_); false at EOF
    int peek_significant();  // next non-space byte (not consumed), -1 at EOF
    void expect(char wanted, const char* context);
    [[noreturn]] void fail_malformed(const std::string& what) const;
    [[noreturn]] void fail_truncated(const std::string& what) const;
    void close_events();                // after traceEvents' ']'
    void end_events_at_end_of_input();  // the input ended inside traceEvents
    std::uint64_t offset_here() const;
    void read_key();
    // Scans one JSON value starting at pos_; keeps its text when `keep`.
    void scan_value(bool keep, JsonItem& item);

    InputStream& input_;
    std::vector<std::string> wanted_keys_;
    std::size_t max_value_bytes_;
    State state_ = State::start;
    bool top_level_array_ = false;
    bool saw_trace_events_ = false;
    const char* chunk_begin_ = nullptr;
    const char* pos_ = nullptr;
    const char* end_ = nullptr;
    bool eof_ = false;
    std::string key_;
    std::vector<char> carry_;  // a value that straddles chunks, plus padding
    std::uint64_t element_index_ = 0;
};

// JsonTraceScanner on a thread of its own: reading, gzip inflation and the scan for
// element boundaries run ahead of the caller, which parses and stores. Elements
// travel in batches (copies of their text, each with its padding) through a queue of
// at most `max_batches`, so memory stays bounded whatever the file: about
// max_batches x batch_bytes plus the scanner's own. next() hands out exactly what
// JsonTraceScanner::next would, in the same order, and rethrows the scanner's error
// where the scanner would have thrown it (after every element before it).
class ScanAhead {
  public:
    ScanAhead(InputStream& input, std::vector<std::string> wanted_keys, std::size_t batch_bytes = 1u << 20,
              std::size_t max_batches = 4);
    // Stops the scanning thread (it may be blocked on a full queue) and joins it.
    ~ScanAhead();
    ScanAhead(const ScanAhead&) = delete;
    ScanAhead& operator=(const ScanAhead&) = delete;

    bool next(JsonItem& item);
    // Valid once next() returned false.
    bool saw_trace_events() const { return saw_trace_events_; }

  private:
    struct Batch;
    struct Shared;
    void scan(std::vector<std::string> wanted_keys);
    bool take_batch();

    InputStream& input_;
    std::size_t batch_bytes_;
    std::unique_ptr<Shared> shared_;
    std::unique_ptr<Batch> current_;
    std::size_t next_in_batch_ = 0;
    bool saw_trace_events_ = false;
};

}  // namespace ember::importing
