// json_stream.cpp: chunked (optionally gzip) input and the top-level JSON scanner.
//
// Index:
//   [SECTION] InputStream: plain and gzip chunks
//   [SECTION] JsonTraceScanner: the document's top level
//   [SECTION] JsonTraceScanner: one value, across chunks
//   [SECTION] ScanAhead: the scanner on its own thread
#include "profiler/import/json_stream.h"

#include "profiler/store/trace_error.h"

#include <fmt/format.h>
#include <zlib.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace ember::importing {

using store::TraceError;
using store::TraceErrorKind;

// ---------------------------------------------------------------------------
// [SECTION] InputStream: plain and gzip chunks
// ---------------------------------------------------------------------------

struct InputStream::Inflater {
    z_stream stream{};
    bool initialized = false;
    bool member_done = false;  // the current gzip member reached its end (trailer checked)
    ~Inflater() {
        if (initialized) inflateEnd(&stream);
    }
};

InputStream::InputStream(const std::string& path, std::size_t chunk_bytes) : path_(path) {
    file_ = std::fopen(path.c_str(), "rb");
    if (file_ == nullptr) {
        throw TraceError(TraceErrorKind::not_found, path, fmt::format("cannot open: {}", std::strerror(errno)));
    }
    unsigned char magic[2] = {0, 0};
    std::size_t got = std::fread(magic, 1, 2, file_);
    compressed_ = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (std::fseek(file_, 0, SEEK_SET) != 0) {
        throw TraceError(TraceErrorKind::io, path, fmt::format("cannot seek: {}", std::strerror(errno)));
    }
    chunk_capacity_ = std::max<std::size_t>(chunk_bytes, 1);
    chunk_.reset(new char[chunk_capacity_ + kJsonPadding]);
    if (compressed_) {
        inflater_ = std::make_unique<Inflater>();
        // 15 + 16: a gzip wrapper with the largest window; zlib checks each member's CRC.
        if (inflateInit2(&inflater_->stream, 15 + 16) != Z_OK) {
            throw TraceError(TraceErrorKind::io, path, "cannot initialize zlib");
        }
        inflater_->initialized = true;
        compressed_capacity_ = std::min<std::size_t>(chunk_capacity_, 1u << 20);
        compressed_buffer_.reset(new unsigned char[compressed_capacity_]);
    }
}

InputStream::~InputStream() {
    if (file_ != nullptr) std::fclose(file_);
}

std::string InputStream::describe_offset(std::uint64_t offset) const {
    return compressed_ ? fmt::format("decompressed byte {}", offset) : fmt::format("byte {}", offset);
}

std::size_t InputStream::read_compressed() {
    std::size_t got = std::fread(compressed_buffer_.get(), 1, compressed_capacity_, file_);
    if (got == 0 && std::ferror(file_)) {
        throw TraceError(TraceErrorKind::io, path_,
                         fmt::format("read error at byte {}: {}", compressed_consumed_, std::strerror(errno)));
    }
    inflater_->stream.next_in = compressed_buffer_.get();
    inflater_->stream.avail_in = static_cast<uInt>(got);
    compressed_consumed_ += got;
    return got;
}

std::string_view InputStream::inflate_chunk() {
    z_stream& zs = inflater_->stream;
    zs.next_out = reinterpret_cast<Bytef*>(chunk_.get());
    zs.avail_out = static_cast<uInt>(chunk_capacity_);
    auto compressed_position = [&] { return compressed_consumed_ - zs.avail_in; };
    while (zs.avail_out > 0) {
        if (zs.avail_in == 0 && read_compressed() == 0) {
            if (!inflater_->member_done) {
                throw TraceError(TraceErrorKind::truncated, path_,
                                 fmt::format("truncated gzip stream: the file ends at byte {} inside the compressed "
                                             "data (after {} decompressed bytes)",
                                             compressed_consumed_, next_offset_ + (chunk_capacity_ - zs.avail_out)));
            }
            finished_ = true;
            break;
        }
        if (inflater_->member_done) {
            // After a member: zero padding is tolerated, another member continues the
            // stream (`cat a.gz b.gz`), anything else is not gzip.
            while (zs.avail_in > 0 && *zs.next_in == 0) {
                ++zs.next_in;
                --zs.avail_in;
            }
            if (zs.avail_in == 0) continue;
            if (*zs.next_in != 0x1f) {
                throw TraceError(
                    TraceErrorKind::corrupt, path_,
                    fmt::format("corrupt gzip stream: unexpected bytes after the compressed data at byte {}",
                                compressed_position()));
            }
            inflateReset(&zs);
            inflater_->member_done = false;
        }
        int result = inflate(&zs, Z_NO_FLUSH);
        if (result == Z_STREAM_END) {
            inflater_->member_done = true;
        } else if (result == Z_BUF_ERROR) {
            continue;  // needs more input; the loop reads it (or reports truncation)
        } else if (result != Z_OK) {
            throw TraceError(TraceErrorKind::corrupt, path_,
                             fmt::format("corrupt gzip stream at byte {}: {}", compressed_position(),
                                         zs.msg != nullptr ? zs.msg : zError(result)));
        }
    }
    return {chunk_.get(), chunk_capacity_ - zs.avail_out};
}

std::string_view InputStream::next_chunk() {
    chunk_offset_ = next_offset_;
    if (finished_) return {};
    std::string_view chunk;
    if (compressed_) {
        chunk = inflate_chunk();
    } else {
        std::size_t got = std::fread(chunk_.get(), 1, chunk_capacity_, file_);
        if (got < chunk_capacity_) {
            if (std::ferror(file_)) {
                throw TraceError(TraceErrorKind::io, path_,
                                 fmt::format("read error at byte {}: {}", next_offset_ + got, std::strerror(errno)));
            }
            finished_ = true;
        }
        chunk = {chunk_.get(), got};
    }
    // The padding after the text must be readable; spaces keep it inert.
    std::memset(chunk_.get() + chunk.size(), ' ', kJsonPadding);
    next_offset_ += chunk.size();
    return chunk;
}

// ---------------------------------------------------------------------------
// [SECTION] JsonTraceScanner: the document's top level
// ---------------------------------------------------------------------------

namespace {

bool is_json_space(char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

std::string printable(int c) {
    if (c < 0) return "the end of the input";
    if (c >= 0x20 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
    return fmt::format("byte 0x{:02x}", c);
}

}  // namespace

JsonTraceScanner::JsonTraceScanner(InputStream& input, std::vector<std::string> wanted_keys,
                                   std::size_t max_value_bytes)
    : input_(input), wanted_keys_(std::move(wanted_keys)), max_value_bytes_(max_value_bytes) {}

bool JsonTraceScanner::fill() {
    if (eof_) return false;
    std::string_view chunk = input_.next_chunk();
    if (chunk.empty()) {
        eof_ = true;
        chunk_begin_ = pos_ = end_;  // offset_here() is now the input's length
        return false;
    }
    chunk_begin_ = chunk.data();
    pos_ = chunk.data();
    end_ = chunk.data() + chunk.size();
    return true;
}

std::uint64_t JsonTraceScanner::offset_here() const {
    return input_.chunk_offset() + static_cast<std::uint64_t>(pos_ - chunk_begin_);
}

int JsonTraceScanner::peek_significant() {
    for (;;) {
        while (pos_ < end_ && is_json_space(*pos_)) ++pos_;
        if (pos_ < end_) return static_cast<unsigned char>(*pos_);
        if (!fill()) return -1;
    }
}

void JsonTraceScanner::fail_malformed(const std::string& what) const {
    throw TraceError(TraceErrorKind::corrupt, input_.path(),
                     fmt::format("malformed JSON at {}: {}", input_.describe_offset(offset_here()), what));
}

void JsonTraceScanner::close_events() {
    state_ = top_level_array_ ? State::done : State::after_value;
    key_ = "traceEvents";
}

void JsonTraceScanner::end_events_at_end_of_input() {
    // Chrome's JSON Array Format may omit the closing bracket.
    if (!top_level_array_) fail_truncated(fmt::format("inside traceEvents, after {} elements", element_index_));
    state_ = State::done;
}

void JsonTraceScanner::fail_truncated(const std::string& what) const {
    throw TraceError(
        TraceErrorKind::truncated, input_.path(),
        fmt::format("truncated JSON: the input ends at {} {}", input_.describe_offset(offset_here()), what));
}

void JsonTraceScanner::expect(char wanted, const char* context) {
    int c = peek_significant();
    if (c == -1) fail_truncated(fmt::format("where '{}' was expected {}", wanted, context));
    if (c != static_cast<unsigned char>(wanted)) {
        fail_malformed(fmt::format("expected '{}' {}, found {}", wanted, context, printable(c)));
    }
    ++pos_;
}

void JsonTraceScanner::read_key() {
    expect('"', "to open an object key");
    key_.clear();
    bool escaped = false;
    for (;;) {
        if (pos_ == end_ && !fill()) fail_truncated("inside an object key");
        char c = *pos_++;
        if (escaped) {
            escaped = false;
        } else if (c == '\\') {
            escaped = true;
        } else if (c == '"') {
            return;
        }
        // Keys we look for are short; a huge key is kept short (it matches nothing).
        if (key_.size() < 256) key_.push_back(c);
    }
}

bool JsonTraceScanner::next(JsonItem& item) {
    for (;;) {
        switch (state_) {
            case State::start: {
                int c = peek_significant();
                // A UTF-8 byte order mark is allowed before the document (it may straddle chunks).
                if (c == 0xEF) {
                    ++pos_;
                    for (int expected : {0xBB, 0xBF}) {
                        if (pos_ == end_ && !fill()) fail_truncated("inside a byte order mark");
                        if (static_cast<unsigned char>(*pos_) != expected) {
                            fail_malformed(fmt::format("a trace starts with '{{' or '[', found {}", printable(0xEF)));
                        }
                        ++pos_;
                    }
                    c = peek_significant();
                }
                if (c == -1) {
                    throw TraceError(TraceErrorKind::truncated, input_.path(), "empty input: no JSON document");
                }
                if (c == '{') {
                    ++pos_;
                    if (peek_significant() == '}') {
                        ++pos_;
                        state_ = State::done;
                    } else {
                        state_ = State::object_key;
                    }
                } else if (c == '[') {
                    ++pos_;
                    top_level_array_ = true;
                    saw_trace_events_ = true;
                    state_ = State::events_element;
                } else {
                    fail_malformed(fmt::format("a trace starts with '{{' or '[', found {}", printable(c)));
                }
                break;
            }
            case State::object_key: {
                read_key();
                expect(':', fmt::format("after the object key \"{}\"", key_).c_str());
                if (key_ == "traceEvents") {
                    int c = peek_significant();
                    if (c == -1) fail_truncated("where the traceEvents array was expected");
                    if (c != '[') fail_malformed(fmt::format("traceEvents must be an array, found {}", printable(c)));
                    ++pos_;
                    saw_trace_events_ = true;
                    state_ = State::events_element;
                    break;
                }
                bool wanted = std::find(wanted_keys_.begin(), wanted_keys_.end(), key_) != wanted_keys_.end();
                scan_value(wanted, item);
                state_ = State::after_value;
                if (wanted) {
                    item.kind = JsonItem::Kind::top_level_value;
                    item.key = key_;
                    return true;
                }
                break;
            }
            case State::after_value: {
                int c = peek_significant();
                if (c == -1) fail_truncated("inside the top-level object (no closing '}')");
                ++pos_;
                if (c == ',') {
                    state_ = State::object_key;
                } else if (c == '}') {
                    state_ = State::done;
                } else {
                    --pos_;
                    fail_malformed(
                        fmt::format("expected ',' or '}}' after the value of \"{}\", found {}", key_, printable(c)));
                }
                break;
            }
            case State::events_element: {
                int c = peek_significant();
                if (c == -1) {
                    end_events_at_end_of_input();
                    break;
                }
                if (c == ']') {  // an empty array, or a trailing comma
                    ++pos_;
                    close_events();
                    break;
                }
                scan_value(true, item);
                item.kind = JsonItem::Kind::trace_event;
                item.key = {};
                item.index = element_index_++;
                state_ = State::after_element;
                return true;
            }
            case State::after_element: {
                int c = peek_significant();
                if (c == -1) {
                    end_events_at_end_of_input();
                    break;
                }
                ++pos_;
                if (c == ',') {
                    state_ = State::events_element;
                } else if (c == ']') {
                    close_events();
                } else {
                    --pos_;
                    fail_malformed(fmt::format("expected ',' or ']' after traceEvents element #{}, found {}",
                                               element_index_ - 1, printable(c)));
                }
                break;
            }
            case State::done: {
                int c = peek_significant();
                if (c == -1) return false;
                fail_malformed(fmt::format("unexpected {} after the end of the JSON document", printable(c)));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// [SECTION] JsonTraceScanner: one value, across chunks
// ---------------------------------------------------------------------------

namespace {

// Where an object or array value ends, 64 bytes at a time: bit masks of the quotes
// and brackets of a block, the bytes inside strings from the running parity of the
// quotes (a prefix XOR), and the depth counted over the brackets outside strings
// alone, a handful per trace event. A block with a backslash in it, or after one
// that may escape its first byte, goes byte by byte instead: backslashes are rare in
// traces, and the byte loop states the rules plainly. Both give the end the plain
// loop over every byte gave (25-30% of an import's CPU time before).
struct ContainerScan {
    std::int64_t depth = 0;
    bool in_string = false;
    bool escape_next = false;  // the previous byte was an unescaped backslash in a string

    // One past the value's closing bracket within [p, end), or nullptr when the value
    // goes on past `end` (the state then carries into the next chunk).
    const char* scan(const char* p, const char* end) {
        while (p < end) {
            const std::size_t n = std::min<std::size_t>(64, static_cast<std::size_t>(end - p));
            const char* found = n == 64 ? block(p, p, n) : short_block(p, n);
            if (found != nullptr) return found;
            p += n;
        }
        return nullptr;
    }

    // The rules, one byte at a time.
    const char* bytes(const char* p, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) {
            const char c = p[i];
            if (in_string) {
                if (escape_next) {
                    escape_next = false;
                } else if (c == '\\') {
                    escape_next = true;
                } else if (c == '"') {
                    in_string = false;
                }
            } else if (c == '"') {
                in_string = true;
            } else if (c == '{' || c == '[') {
                ++depth;
            } else if ((c == '}' || c == ']') && --depth == 0) {
                return p + i + 1;
            }
        }
        return nullptr;
    }

  private:
    struct Masks {
        std::uint64_t quote = 0, backslash = 0, open = 0, close = 0;
    };

    static Masks classify(const char* data) {
        Masks m;
#if defined(__SSE2__)
        const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
        // '{' and '[' (0x7B, 0x5B) differ only in bit 0x20, as do '}' and ']'.
        const __m128i case_bit = _mm_set1_epi8(0x20), open = _mm_set1_epi8('{'), close = _mm_set1_epi8('}');
        for (int i = 0; i < 4; ++i) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 16 * i));
            const __m128i folded = _mm_or_si128(v, case_bit);
            const int shift = 16 * i;
            m.quote |=
                static_cast<std::uint64_t>(static_cast<std::uint16_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote))))
                << shift;
            m.backslash |=
                static_cast<std::uint64_t>(static_cast<std::uint16_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, backslash))))
                << shift;
            m.open |=
                static_cast<std::uint64_t>(static_cast<std::uint16_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(folded, open))))
                << shift;
            m.close |=
                static_cast<std::uint64_t>(static_cast<std::uint16_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(folded, close))))
                << shift;
        }
#else
        for (int i = 0; i < 64; ++i) {
            const std::uint64_t bit = std::uint64_t{1} << i;
            const char c = data[i];
            if (c == '"') m.quote |= bit;
            if (c == '\\') m.backslash |= bit;
            if (c == '{' || c == '[') m.open |= bit;
            if (c == '}' || c == ']') m.close |= bit;
        }
#endif
        return m;
    }

    // Bit i: the parity of the bits 0..i of x.
    static std::uint64_t prefix_xor(std::uint64_t x) {
        x ^= x << 1;
        x ^= x << 2;
        x ^= x << 4;
        x ^= x << 8;
        x ^= x << 16;
        x ^= x << 32;
        return x;
    }

    // The last bytes of a chunk: copied into a block of spaces, so nothing past `end`
    // is read.
    const char* short_block(const char* p, std::size_t n) {
        alignas(16) char padded[64];
        std::memcpy(padded, p, n);
        std::memset(padded + n, ' ', 64 - n);
        return block(padded, p, n);
    }

    // `data`: 64 readable bytes, the first `n` of which are the input at `at`.
    const char* block(const char* data, const char* at, std::size_t n) {
        const Masks m = classify(data);
        if (m.backslash != 0 || escape_next) return bytes(at, n);
        const std::uint64_t valid = n == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
        const std::uint64_t quotes = m.quote & valid;
        const std::uint64_t inside = prefix_xor(quotes) ^ (in_string ? ~std::uint64_t{0} : 0);
        std::uint64_t brackets = (m.open | m.close) & valid & ~inside;
        while (brackets != 0) {
            const int i = __builtin_ctzll(brackets);
            brackets &= brackets - 1;
            if ((m.open >> i) & 1) {
                ++depth;
            } else if (--depth == 0) {
                return at + i + 1;
            }
        }
        if (__builtin_popcountll(quotes) & 1) in_string = !in_string;
        return nullptr;
    }
};

}  // namespace

void JsonTraceScanner::scan_value(bool keep, JsonItem& item) {
    int first = peek_significant();
    if (first == -1) fail_truncated("where a value was expected");
    enum class Mode { container, string, scalar } mode;
    if (first == '{' || first == '[') {
        mode = Mode::container;
    } else if (first == '"') {
        mode = Mode::string;
    } else if (first == '-' || (first >= '0' && first <= '9') || first == 't' || first == 'f' || first == 'n') {
        mode = Mode::scalar;
    } else {
        fail_malformed(fmt::format("expected a JSON value, found {}", printable(first)));
    }
    const std::uint64_t start_offset = offset_here();
    const char* start = pos_;
    std::size_t carried = 0;  // bytes of this value already copied into carry_
    bool carrying = false;
    ContainerScan container;
    bool in_string = false;
    std::size_t backslash_run = 0;  // backslashes ending the previous chunk's string bytes
    if (mode == Mode::string) {
        in_string = true;
        ++pos_;
    }

    auto append_to_carry = [&](const char* from, const char* to) {
        std::size_t n = static_cast<std::size_t>(to - from);
        if (carried + n > max_value_bytes_) {
            throw TraceError(TraceErrorKind::corrupt, input_.path(),
                             fmt::format("a JSON value at {} is larger than {} bytes (an element this size is not a "
                                         "trace event)",
                                         input_.describe_offset(start_offset), max_value_bytes_));
        }
        if (carry_.size() < carried + n + kJsonPadding)
            carry_.resize(std::max(carry_.size() * 2, carried + n + kJsonPadding));
        std::memcpy(carry_.data() + carried, from, n);
        carried += n;
    };

    for (;;) {
        const char* p = pos_;
        const char* found_end = mode == Mode::container ? container.scan(pos_, end_) : nullptr;
        // Strings and scalars (top-level values only: elements are objects).
        while (mode != Mode::container && p < end_ && found_end == nullptr) {
            if (in_string) {
                const char* quote = static_cast<const char*>(std::memchr(p, '"', static_cast<std::size_t>(end_ - p)));
                if (quote == nullptr) {
                    std::size_t run = 0;
                    const char* b = end_;
                    while (b > p && b[-1] == '\\') {
                        --b;
                        ++run;
                    }
                    backslash_run = b == p ? backslash_run + run : run;
                    p = end_;
                    break;
                }
                std::size_t run = 0;
                const char* b = quote;
                while (b > p && b[-1] == '\\') {
                    --b;
                    ++run;
                }
                if (b == p) run += backslash_run;
                backslash_run = 0;
                p = quote + 1;
                if (run % 2 == 1) continue;  // an escaped quote: still inside the string
                in_string = false;
                if (mode == Mode::string) found_end = p;
                continue;
            }
            char c = *p;
            if (c == ',' || c == '}' || c == ']' || is_json_space(c) || c == '"' || c == '{' || c == '[' || c == ':') {
                found_end = p;
                break;
            }
            ++p;
        }
        if (found_end != nullptr) {
            if (keep) {
                if (carrying) {
                    append_to_carry(start, found_end);
                    item.data = carry_.data();
                    item.size = carried;
                    std::memset(carry_.data() + carried, ' ', kJsonPadding);
                } else {
                    // Inside one chunk: the chunk's own padding follows it.
                    item.data = start;
                    item.size = static_cast<std::size_t>(found_end - start);
                    if (item.size > max_value_bytes_) append_to_carry(start, found_end);  // reports the limit
                }
                item.offset = start_offset;
            }
            pos_ = found_end;
            return;
        }
        if (keep) {
            append_to_carry(start, end_);
            carrying = true;
        }
        pos_ = end_;
        if (!fill()) {
            fail_truncated(fmt::format("inside a value that starts at {}", input_.describe_offset(start_offset)));
        }
        start = pos_;
    }
}

// ---------------------------------------------------------------------------
// [SECTION] ScanAhead: the scanner on its own thread
// ---------------------------------------------------------------------------

struct ScanAhead::Batch {
    struct Entry {
        JsonItem::Kind kind = JsonItem::Kind::trace_event;
        std::size_t text_at = 0;  // in text
        std::size_t size = 0;
        std::size_t key_at = 0;  // in keys (top-level values only)
        std::size_t key_size = 0;
        std::uint64_t offset = 0;
        std::uint64_t index = 0;
    };
    std::vector<char> text;  // each element's text, then kJsonPadding spaces
    std::string keys;
    std::vector<Entry> entries;
    bool last = false;              // nothing follows this batch
    bool saw_trace_events = false;  // (on the last batch)
    std::exception_ptr error;       // (on the last batch) what the scanner threw
};

struct ScanAhead::Shared {
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<std::unique_ptr<Batch>> queue;
    std::vector<std::unique_ptr<Batch>> spare;  // emptied batches, their buffers kept
    std::size_t max_batches = 4;
    bool stop = false;
    std::thread thread;
};

ScanAhead::ScanAhead(InputStream& input, std::vector<std::string> wanted_keys, std::size_t batch_bytes,
                     std::size_t max_batches)
    : input_(input), batch_bytes_(std::max<std::size_t>(batch_bytes, 1)), shared_(std::make_unique<Shared>()) {
    shared_->max_batches = std::max<std::size_t>(max_batches, 1);
    shared_->thread = std::thread([this, keys = std::move(wanted_keys)]() mutable { scan(std::move(keys)); });
}

ScanAhead::~ScanAhead() {
    {
        std::lock_guard lock(shared_->mutex);
        shared_->stop = true;
    }
    shared_->changed.notify_all();
    if (shared_->thread.joinable()) shared_->thread.join();
}

void ScanAhead::scan(std::vector<std::string> wanted_keys) {
    auto fresh_batch = [&] {
        std::unique_ptr<Batch> batch;
        {
            std::lock_guard lock(shared_->mutex);
            if (!shared_->spare.empty()) {
                batch = std::move(shared_->spare.back());
                shared_->spare.pop_back();
            }
        }
        if (batch == nullptr) {
            batch = std::make_unique<Batch>();
            batch->text.reserve(batch_bytes_ + (64u << 10));
        }
        batch->text.clear();
        batch->keys.clear();
        batch->entries.clear();
        return batch;
    };
    // Queues `batch`; false when the reader is gone (stop).
    auto hand_over = [&](std::unique_ptr<Batch> batch) {
        std::unique_lock lock(shared_->mutex);
        shared_->changed.wait(lock, [&] { return shared_->stop || shared_->queue.size() < shared_->max_batches; });
        if (shared_->stop) return false;
        shared_->queue.push_back(std::move(batch));
        lock.unlock();
        shared_->changed.notify_all();
        return true;
    };
    std::unique_ptr<Batch> batch = fresh_batch();
    try {
        JsonTraceScanner scanner(input_, std::move(wanted_keys));
        JsonItem item;
        while (scanner.next(item)) {
            Batch::Entry entry;
            entry.kind = item.kind;
            entry.text_at = batch->text.size();
            entry.size = item.size;
            entry.offset = item.offset;
            entry.index = item.index;
            if (item.kind == JsonItem::Kind::top_level_value) {
                entry.key_at = batch->keys.size();
                entry.key_size = item.key.size();
                batch->keys.append(item.key);
            }
            batch->text.insert(batch->text.end(), item.data, item.data + item.size);
            batch->text.insert(batch->text.end(), kJsonPadding, ' ');
            batch->entries.push_back(entry);
            if (batch->text.size() >= batch_bytes_) {
                if (!hand_over(std::move(batch))) return;
                batch = fresh_batch();
            }
        }
        batch->saw_trace_events = scanner.saw_trace_events();
    } catch (...) {
        batch->error = std::current_exception();
    }
    batch->last = true;
    hand_over(std::move(batch));
}

bool ScanAhead::take_batch() {
    std::unique_ptr<Batch> done = std::move(current_);
    std::unique_lock lock(shared_->mutex);
    if (done != nullptr) shared_->spare.push_back(std::move(done));
    shared_->changed.wait(lock, [&] { return !shared_->queue.empty(); });
    current_ = std::move(shared_->queue.front());
    shared_->queue.pop_front();
    lock.unlock();
    shared_->changed.notify_all();
    next_in_batch_ = 0;
    return true;
}

bool ScanAhead::next(JsonItem& item) {
    while (current_ == nullptr || next_in_batch_ == current_->entries.size()) {
        if (current_ != nullptr && current_->last) {
            saw_trace_events_ = current_->saw_trace_events;
            if (current_->error) std::rethrow_exception(current_->error);
            return false;
        }
        take_batch();
    }
    const Batch::Entry& entry = current_->entries[next_in_batch_++];
    item.kind = entry.kind;
    item.key = std::string_view(current_->keys).substr(entry.key_at, entry.key_size);
    item.data = current_->text.data() + entry.text_at;
    item.size = entry.size;
    item.offset = entry.offset;
    item.index = entry.index;
    return true;
}

}  // namespace ember::importing
