// trace_event_parser.cpp: simdjson On-Demand over one element at a time.
//
// Every field of an element is visited once, in the order the file has it (JSON
// objects are unordered; Kineto puts "ph" first, the 2021 format "name"), and only
// the keys an importer uses are decoded. Numbers are taken as their raw token and
// parsed by decimal_time.h, so an integer never passes through a double.
#include "profiler/import/trace_event_parser.h"

#include "profiler/import/decimal_time.h"
#include "profiler/store/trace_error.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <charconv>
#include <type_traits>

namespace ember::importing {

static_assert(kJsonPadding >= simdjson::SIMDJSON_PADDING, "the scanner's padding must satisfy simdjson");

namespace {

using namespace simdjson;
using ondemand::json_type;

// Thrown inside this file only; the public functions turn it into a TraceError with
// the file and offset.
struct ParseFailure {
    error_code code = SUCCESS;
    std::string what;
};

void check(error_code code, std::string_view what) {
    if (code != SUCCESS) throw ParseFailure{code, std::string(what)};
}

[[noreturn]] void wrong_value(std::string_view key, std::string_view expected) {
    throw ParseFailure{INCORRECT_TYPE, fmt::format("\"{}\" must be {}", key, expected)};
}

// A raw token runs on to the next token: the white space after it is cut.
std::string_view without_trailing_space(std::string_view token) {
    while (!token.empty() &&
           (token.back() == ' ' || token.back() == '\n' || token.back() == '\r' || token.back() == '\t')) {
        token.remove_suffix(1);
    }
    return token;
}

std::string_view trimmed_token(ondemand::value& value) {
    return without_trailing_space(value.raw_json_token());
}

// Calls visit(key, value) for each field of the object, in the file's order; `what`
// names the object in an error. A visitor that returns bool stops the walk with false.
template <typename Visit>
void for_each_field(ondemand::object& object, std::string_view what, Visit&& visit) {
    for (auto field_result : object) {
        ondemand::field field;
        check(std::move(field_result).get(field), what);
        // A key without escapes is its own text in the element (no copy into the
        // parser's string buffer); stage 1 found its closing quote already.
        const char* raw = field.key().raw();
        const char* end = raw;
        while (*end != '"' && *end != '\\') ++end;
        std::string_view key(raw, static_cast<std::size_t>(end - raw));
        if (*end == '\\') check(field.unescaped_key().get(key), what);
        if constexpr (std::is_same_v<decltype(visit(key, field.value())), bool>) {
            if (!visit(key, field.value())) return;
        } else {
            visit(key, field.value());
        }
    }
}

// Flow events ("s", "t", "f"; Kineto's ac2g links, half the elements of some traces)
// are counted and skipped by every importer (the links come from correlation ids):
// once "ph" says so, the rest of the element is not decoded.
bool is_flow_phase(char phase) {
    return phase == 's' || phase == 't' || phase == 'f';
}

json_type type_of(ondemand::value& value, std::string_view key) {
    json_type type;
    check(value.type().get(type), key);
    return type;
}

std::int64_t integer_of(ondemand::value& value, std::string_view key) {
    std::int64_t result = 0;
    json_type type = type_of(value, key);
    if (type == json_type::number) {
        if (!parse_decimal_scaled(trimmed_token(value), 0, result)) wrong_value(key, "a number that fits 64 bits");
        return result;
    }
    if (type == json_type::string) {
        std::string_view text;
        check(value.get_string().get(text), key);
        if (!parse_decimal_scaled(text, 0, result)) wrong_value(key, "a number");
        return result;
    }
    wrong_value(key, "a number");
}

// For optional numeric arguments: anything but a number (or numeric string) is ignored.
std::optional<std::int64_t> maybe_integer(ondemand::value& value, std::string_view key) {
    json_type type = type_of(value, key);
    std::int64_t result = 0;
    if (type == json_type::number) {
        if (parse_decimal_scaled(trimmed_token(value), 0, result)) return result;
        return std::nullopt;
    }
    if (type == json_type::string) {
        std::string_view text;
        check(value.get_string().get(text), key);
        if (parse_decimal_scaled(text, 0, result)) return result;
    }
    return std::nullopt;
}

std::optional<double> maybe_double(ondemand::value& value, std::string_view key) {
    if (type_of(value, key) != json_type::number) return std::nullopt;
    std::string_view token = trimmed_token(value);
    double result = 0.0;
    auto [end, error] = std::from_chars(token.data(), token.data() + token.size(), result);
    if (error != std::errc() || end != token.data() + token.size()) return std::nullopt;
    return result;
}

trace::TimeNs time_of(ondemand::value& value, std::string_view key) {
    json_type type = type_of(value, key);
    std::string_view text;
    if (type == json_type::number) {
        text = trimmed_token(value);
    } else if (type == json_type::string) {
        check(value.get_string().get(text), key);
    } else {
        wrong_value(key, "a number of microseconds");
    }
    trace::TimeNs ns = 0;
    // ±2^62 ns (±146 years): sums of two times and differences never overflow.
    if (!parse_microseconds_as_ns(text, ns) || ns > kLargestTimeNs || ns < -kLargestTimeNs) {
        wrong_value(key, "a number of microseconds within ±146 years");
    }
    return ns;
}

std::string_view string_of(ondemand::value& value, std::string_view key) {
    json_type type = type_of(value, key);
    if (type == json_type::string) {
        std::string_view text;
        check(value.get_string().get(text), key);
        return text;
    }
    if (type == json_type::number) return trimmed_token(value);  // "name": 7 names it "7"
    return {};
}

JsonId id_of(ondemand::value& value, std::string_view key) {
    JsonId id;
    id.present = true;
    json_type type = type_of(value, key);
    if (type == json_type::number) {
        if (!parse_decimal_scaled(trimmed_token(value), 0, id.number)) wrong_value(key, "a 64-bit integer or a string");
        return id;
    }
    if (type == json_type::string) {
        check(value.get_string().get(id.text), key);
        std::int64_t number = 0;
        bool integral = !id.text.empty() && id.text.find_first_of(".eE") == std::string_view::npos;
        if (integral && parse_decimal_scaled(id.text, 0, number)) {
            id.number = number;
        } else {
            id.is_text = true;
        }
        return id;
    }
    if (type == json_type::null) {
        id.present = false;
        return id;
    }
    wrong_value(key, "a number or a string");
}

int dims_of(ondemand::value& value, std::string_view key, std::array<std::uint32_t, 3>& dims) {
    if (type_of(value, key) != json_type::array) return 0;
    ondemand::array array;
    check(value.get_array().get(array), key);
    int count = 0;
    for (auto element_result : array) {
        ondemand::value element;
        check(std::move(element_result).get(element), key);
        std::optional<std::int64_t> n = maybe_integer(element, key);
        if (count < 3 && n && *n >= 0 && *n <= 0xffffffffll)
            dims[static_cast<std::size_t>(count)] = static_cast<std::uint32_t>(*n);
        ++count;
    }
    return count > 3 ? 3 : count;
}

// The arguments that are a plain integer, each under its key(s).
struct IntegerArgument {
    std::string_view key;
    std::optional<std::int64_t> TraceEventArgs::*field;
};
constexpr IntegerArgument kIntegerArguments[] = {
    {"bytes", &TraceEventArgs::bytes},
    {"Bytes", &TraceEventArgs::bytes},
    {"device", &TraceEventArgs::device},
    {"stream", &TraceEventArgs::stream},
    {"result", &TraceEventArgs::result},
    {"context", &TraceEventArgs::context},
    {"category", &TraceEventArgs::nvtx_category},
    {"Device Id", &TraceEventArgs::memory_device_id},
    {"Addr", &TraceEventArgs::memory_address},
    {"correlation", &TraceEventArgs::correlation},
    {"Device Type", &TraceEventArgs::memory_device_type},
    {"shared_bytes", &TraceEventArgs::shared_memory},
    {"shared memory", &TraceEventArgs::shared_memory},
    {"correlation_id", &TraceEventArgs::correlation},
    {"Total Reserved", &TraceEventArgs::total_reserved},
    {"Total Allocated", &TraceEventArgs::total_allocated},
    {"registers per thread", &TraceEventArgs::registers_per_thread},
    {"registers_per_thread", &TraceEventArgs::registers_per_thread},
    {"Seq", &TraceEventArgs::sequence},
    {"cuda_event_id", &TraceEventArgs::cuda_event_id},
    {"wait_on_cuda_event_id", &TraceEventArgs::cuda_event_id},
    {"Group size", &TraceEventArgs::group_size},
    {"In msg nelems", &TraceEventArgs::in_elements},
    {"Out msg nelems", &TraceEventArgs::out_elements},
};

// The collective metadata's text arguments.
struct TextArgument {
    std::string_view key;
    std::string_view TraceEventArgs::*field;
};
constexpr TextArgument kTextArguments[] = {
    {"dtype", &TraceEventArgs::dtype},
    {"Collective name", &TraceEventArgs::collective_name},
    {"Process Group Name", &TraceEventArgs::group_name},
    {"Process Group Description", &TraceEventArgs::group_desc},
};

// Reads one argument the importers use; false for any other key.
bool parse_known_argument(std::string_view key, ondemand::value& v, TraceEventArgs& args) {
    // string_view's == compares the lengths first: most keys are passed over after one comparison.
    for (const IntegerArgument& argument : kIntegerArguments) {
        if (key == argument.key) {
            args.*argument.field = maybe_integer(v, key);
            return true;
        }
    }
    for (const TextArgument& argument : kTextArguments) {
        if (key == argument.key) {
            args.*argument.field = string_of(v, key);
            return true;
        }
    }
    if (key == "name") {
        args.name = string_of(v, key);
    } else if (key == "Process Group Ranks") {
        // A string ("[0, 1]") in PyTorch's traces; an array in some writers'.
        if (type_of(v, key) == json_type::array) {
            ondemand::array array;
            check(v.get_array().get(array), key);
            check(array.raw_json().get(args.group_ranks), key);
        } else {
            args.group_ranks = string_of(v, key);
        }
    } else if (key == "labels") {
        args.labels = string_of(v, key);
    } else if (key == "grid") {
        args.grid_size = dims_of(v, key, args.grid);
    } else if (key == "block") {
        args.block_size = dims_of(v, key, args.block);
    } else if (key == "value") {
        if (auto d = maybe_double(v, key); d && args.number_count < args.numbers.size()) {
            args.numbers[args.number_count++] = {key, *d};
        }
        args.value = maybe_integer(v, key);
    } else if (key == "payload") {
        if (type_of(v, key) == json_type::number) {
            std::string_view token = trimmed_token(v);
            std::int64_t integer = 0;
            if (token.find_first_of(".eE") == std::string_view::npos && parse_decimal_scaled(token, 0, integer)) {
                args.payload = trace::Payload::of_integer(integer);
            } else if (auto d = maybe_double(v, key)) {
                args.payload = trace::Payload::of_real(*d);
            }
        }
    } else {
        return false;
    }
    return true;
}

// `phase`: the event's "ph" when it came before "args" (0 otherwise); only a
// counter ("C") needs its other numeric arguments.
void parse_args(ondemand::value& value, TraceEventArgs& args, char phase) {
    if (type_of(value, "args") != json_type::object) return;  // "args": null / [] carry nothing
    ondemand::object object;
    check(value.get_object().get(object), "args");
    for_each_field(object, "args", [&](std::string_view key, ondemand::value& v) {
        if (parse_known_argument(key, v, args)) return;
        // Any other number is a series of a "C" event.
        if ((phase == 0 || phase == 'C') && args.number_count < args.numbers.size() &&
            type_of(v, key) == json_type::number) {
            if (auto d = maybe_double(v, key)) args.numbers[args.number_count++] = {key, *d};
        }
    });
}

// Replaces each byte that is not part of a valid UTF-8 sequence by '?'.
void repair_utf8(const char* data, std::size_t size, std::vector<char>& out) {
    out.assign(data, data + size);
    auto byte = [&](std::size_t i) { return static_cast<unsigned char>(out[i]); };
    std::size_t i = 0;
    while (i < size) {
        unsigned char c = byte(i);
        std::size_t length = 0;
        unsigned char low = 0x80, high = 0xBF;
        if (c < 0x80) {
            ++i;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            length = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            length = 3;
            if (c == 0xE0) low = 0xA0;
            if (c == 0xED) high = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            length = 4;
            if (c == 0xF0) low = 0x90;
            if (c == 0xF4) high = 0x8F;
        }
        bool valid = length > 0 && i + length <= size;
        for (std::size_t k = 1; valid && k < length; ++k) {
            unsigned char next = byte(i + k);
            unsigned char lo = k == 1 ? low : 0x80, hi = k == 1 ? high : 0xBF;
            valid = next >= lo && next <= hi;
        }
        if (valid) {
            i += length;
        } else {
            out[i] = '?';
            ++i;
        }
    }
    out.resize(size + kJsonPadding, ' ');
}

}  // namespace

namespace {

// Starts a document over the item's text; invalid UTF-8 (a truncated name in a
// profiler's output) is replaced by '?' rather than failing the whole import.
void start_document(ondemand::parser& parser, ondemand::document& document, std::vector<char>& repaired,
                    const JsonItem& item, std::int64_t& repairs) {
    error_code code = parser.iterate(item.data, item.size, item.size + kJsonPadding).get(document);
    if (code == UTF8_ERROR) {
        repair_utf8(item.data, item.size, repaired);
        ++repairs;
        code = parser.iterate(repaired.data(), item.size, repaired.size()).get(document);
    }
    check(code, "");
}

std::string failure_detail(const ParseFailure& failure) {
    return failure.what.empty() ? std::string(error_message(failure.code))
                                : fmt::format("{} ({})", failure.what, error_message(failure.code));
}

[[noreturn]] void top_level_failure(const InputStream& input, const JsonItem& item, const ParseFailure& failure) {
    throw store::TraceError(store::TraceErrorKind::corrupt, input.path(),
                            fmt::format("malformed value of \"{}\" at {}: {}", item.key,
                                        input.describe_offset(item.offset), failure_detail(failure)));
}

}  // namespace

struct TraceEventParser::State {
    ondemand::parser parser;
    ondemand::document document;
    std::vector<char> repaired;

    ondemand::document& start(const JsonItem& item, std::int64_t& repairs) {
        start_document(parser, document, repaired, item, repairs);
        return document;
    }

    // Runs read(document) over the value of a top-level key; a malformed value is a
    // TraceError naming the key and its offset.
    template <typename Read>
    auto top_level(const InputStream& input, const JsonItem& item, std::int64_t& repairs, Read&& read) {
        try {
            return read(start(item, repairs));
        } catch (const ParseFailure& failure) {
            top_level_failure(input, item, failure);
        }
    }
};

TraceEventParser::TraceEventParser(const InputStream& input) : state_(std::make_unique<State>()), input_(input) {}

TraceEventParser::~TraceEventParser() = default;

void TraceEventParser::parse_event(const JsonItem& item, TraceEventFields& fields) {
    fields = TraceEventFields{};
    try {
        ondemand::document& document = state_->start(item, utf8_repairs_);
        ondemand::object object;
        error_code code = document.get_object().get(object);
        if (code == INCORRECT_TYPE) throw ParseFailure{code, "the element is not an object"};
        check(code, "");
        for_each_field(object, "", [&](std::string_view key, ondemand::value& value) {
            if (key.size() > 4) return true;  // every top-level key read here is short
            if (key == "ph") {
                std::string_view phase = string_of(value, key);
                fields.phase = phase.empty() ? '?' : phase.front();
                if (is_flow_phase(fields.phase)) return false;
            } else if (key == "ts") {
                fields.ts_ns = time_of(value, key);
                fields.has_ts = true;
            } else if (key == "dur") {
                fields.dur_ns = time_of(value, key);
                fields.has_dur = true;
            } else if (key == "name") {
                fields.name = string_of(value, key);
            } else if (key == "cat") {
                fields.category = string_of(value, key);
            } else if (key == "pid") {
                fields.pid = id_of(value, key);
            } else if (key == "tid") {
                fields.tid = id_of(value, key);
            } else if (key == "id") {
                fields.id = id_of(value, key);
            } else if (key == "args") {
                fields.has_args = true;
                parse_args(value, fields.args, fields.phase);
            } else if (key == "s") {
                fields.scope = string_of(value, key);
            }
            return true;
        });
    } catch (const ParseFailure& failure) {
        throw store::TraceError(store::TraceErrorKind::corrupt, input_.path(),
                                fmt::format("malformed traceEvents element #{} at {}: {}", item.index,
                                            input_.describe_offset(item.offset), failure_detail(failure)));
    }
}

std::vector<trace::DeviceInfo> TraceEventParser::device_properties(const JsonItem& item) {
    return state_->top_level(input_, item, utf8_repairs_, [](ondemand::document& document) {
        std::vector<trace::DeviceInfo> devices;
        ondemand::array array;
        check(document.get_array().get(array), "deviceProperties must be an array");
        for (auto entry_result : array) {
            ondemand::object entry;
            check(entry_result.get_object().get(entry), "each device must be an object");
            trace::DeviceInfo device;
            bool has_id = false;
            for_each_field(entry, "", [&](std::string_view key, ondemand::value& v) {
                if (key == "id") {
                    std::int64_t id = integer_of(v, key);
                    if (id < 0 || id > 1'000'000) wrong_value(key, "a device ordinal");
                    device.device_id = static_cast<trace::DeviceId>(id);
                    has_id = true;
                } else if (key == "name") {
                    device.name = std::string(string_of(v, key));
                } else if (key == "totalGlobalMem") {
                    device.memory_bytes = maybe_integer(v, key).value_or(0);
                } else if (key == "computeMajor") {
                    device.compute_capability_major = static_cast<std::int32_t>(maybe_integer(v, key).value_or(0));
                } else if (key == "computeMinor") {
                    device.compute_capability_minor = static_cast<std::int32_t>(maybe_integer(v, key).value_or(0));
                } else if (key == "numSms") {
                    device.multiprocessor_count = static_cast<std::int32_t>(maybe_integer(v, key).value_or(0));
                } else if (key == "uuid") {
                    device.uuid = std::string(string_of(v, key));
                }
            });
            if (has_id) devices.push_back(std::move(device));
        }
        return devices;
    });
}

KinetoDistributedInfo TraceEventParser::distributed_info(const JsonItem& item) {
    return state_->top_level(input_, item, utf8_repairs_, [](ondemand::document& document) {
        KinetoDistributedInfo info;
        ondemand::object object;
        check(document.get_object().get(object), "distributedInfo must be an object");
        for_each_field(object, "", [&](std::string_view key, ondemand::value& v) {
            if (key == "rank") {
                std::int64_t rank = integer_of(v, key);
                if (rank < 0 || rank > 0x7fffffff) wrong_value(key, "a rank");
                info.rank = static_cast<std::int32_t>(rank);
            } else if (key == "world_size") {
                std::int64_t size = integer_of(v, key);
                if (size < 1 || size > 0x7fffffff) wrong_value(key, "a world size");
                info.world_size = static_cast<std::int32_t>(size);
            } else if (key == "backend") {
                info.backend = std::string(string_of(v, key));
            } else if (key == "nccl_version") {
                info.nccl_version = std::string(string_of(v, key));
            }
        });
        return info;
    });
}

std::optional<std::int64_t> TraceEventParser::integer(const JsonItem& item) {
    return state_->top_level(input_, item, utf8_repairs_,
                             [](ondemand::document& document) -> std::optional<std::int64_t> {
                                 // A scalar document: read it through its raw token.
                                 std::string_view token;
                                 check(document.raw_json_token().get(token), "");
                                 std::int64_t result = 0;
                                 if (parse_decimal_scaled(without_trailing_space(token), 0, result)) return result;
                                 throw ParseFailure{INCORRECT_TYPE, "expected an integer"};
                             });
}

std::optional<std::string> TraceEventParser::string(const JsonItem& item) {
    return state_->top_level(input_, item, utf8_repairs_,
                             [](ondemand::document& document) -> std::optional<std::string> {
                                 std::string_view text;
                                 if (document.get_string().get(text) != SUCCESS) return std::nullopt;
                                 return std::string(text);
                             });
}

ChromeOtherData TraceEventParser::other_data(const JsonItem& item) {
    return state_->top_level(input_, item, utf8_repairs_, [](ondemand::document& document) {
        ChromeOtherData data;
        ondemand::object object;
        if (document.get_object().get(object) != SUCCESS) return data;
        for_each_field(object, "", [&](std::string_view key, ondemand::value& v) {
            if (key == "time_origin_ns") {
                data.time_origin_ns = maybe_integer(v, key);
                if (data.time_origin_ns &&
                    (*data.time_origin_ns > kLargestTimeNs || *data.time_origin_ns < -kLargestTimeNs)) {
                    wrong_value(key, "a time within ±146 years");
                }
            } else if (key == "exporter") {
                data.exporter = std::string(string_of(v, key));
            }
        });
        return data;
    });
}

}  // namespace ember::importing
