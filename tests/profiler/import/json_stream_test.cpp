// json_stream_test.cpp: the pieces under the JSON importers — exact decimal
// microseconds, gzip chunks, and the top-level scanner, which must hand out the same
// elements whatever the chunk size (strings, escapes and brackets cut anywhere).
#include "profiler/import/decimal_time.h"
#include "profiler/import/json_stream.h"
#include "profiler/store/trace_error.h"
#include "tests/profiler/import/import_fixtures.h"
#include "tests/profiler/import/import_steps.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <utility>

namespace {

using namespace ember;
using import_test::TempDir;

TEST(DecimalTime, MicrosecondTextIsExactNanoseconds) {
    const std::pair<const char*, std::int64_t> exact[] = {
        {"123.456", 123456},
        {"1712195495519695.8", 1712195495519695800},
        {"1682725898236567", 1682725898236567000},
        {"0.0005", 1},  // half a ns rounds away from zero
        {"0.0004999", 0},
        {"-2.5", -2500},
        {"1.7121954955196958e15", 1712195495519695800},
        {"15E-1", 1500},
        {" \"42\" ", 42000},
        {"0.000000000000000000000000000000000000000001", 0},
        {"9223372036854775.807", std::numeric_limits<std::int64_t>::max()},
    };
    std::int64_t ns = 0;
    for (const auto& [text, want] : exact) {
        ASSERT_TRUE(importing::parse_microseconds_as_ns(text, ns)) << text;
        EXPECT_EQ(ns, want) << text;
    }
    EXPECT_FALSE(importing::parse_microseconds_as_ns("9223372036854775.808", ns));  // one past int64
    EXPECT_FALSE(importing::parse_microseconds_as_ns("1e400", ns));
    for (const char* bad :
         {"", "-", ".", "1.", "1e", "1e+", "abc", "1.2.3", "0x10", "NaN", "Infinity", "1 2", "\"\""}) {
        EXPECT_FALSE(importing::parse_microseconds_as_ns(bad, ns)) << bad;
    }
    std::int64_t value = 0;
    ASSERT_TRUE(importing::parse_decimal_scaled("1751410836000000000", 0, value));
    EXPECT_EQ(value, 1751410836000000000);
    ASSERT_TRUE(importing::parse_decimal_scaled("-9223372036854775808", 0, value));
    EXPECT_EQ(value, std::numeric_limits<std::int64_t>::min());
}

// The 64-bit path for plain decimals ([-]digits[.digits], up to 19 digits) must give
// what the general 128-bit path gives; a leading space sends the same text down the
// general path.
TEST(DecimalTime, PlainDecimalsAgreeWithTheGeneralParser) {
    import_test::XorShift64 next{88172645463325252ull};
    int compared = 0;
    for (int i = 0; i < 200000; ++i) {
        std::string text;
        if (next() % 4 == 0) text += '-';
        int integer_digits = 1 + static_cast<int>(next() % 19);
        int fraction_digits = static_cast<int>(next() % 12);
        for (int d = 0; d < integer_digits; ++d) text += static_cast<char>('0' + next() % 10);
        if (fraction_digits > 0) {
            text += '.';
            for (int d = 0; d < fraction_digits; ++d)
                text += static_cast<char>('0' + (next() % 7 == 0 ? 5 : next() % 10));
        }
        int shift = static_cast<int>(next() % 10);
        std::int64_t fast = 0, general = 0;
        bool fast_ok = importing::parse_decimal_scaled(text, shift, fast);
        bool general_ok = importing::parse_decimal_scaled(" " + text, shift, general);
        ASSERT_EQ(fast_ok, general_ok) << text << " shift " << shift;
        if (fast_ok) {
            ASSERT_EQ(fast, general) << text << " shift " << shift;
            ++compared;
        }
    }
    EXPECT_GT(compared, 100000);
    std::int64_t value = 0;
    ASSERT_TRUE(importing::parse_decimal_scaled("999999999999999999", 0, value));  // 18 digits: the plain path
    EXPECT_EQ(value, 999999999999999999);
    ASSERT_TRUE(importing::parse_decimal_scaled("1712195495519703.772", 3, value));  // 19: Kineto's ns times
    EXPECT_EQ(value, 1712195495519703772);
    ASSERT_TRUE(importing::parse_decimal_scaled("1712195495519703.7725", 3, value));  // 20: the general path
    EXPECT_EQ(value, 1712195495519703773);
    EXPECT_FALSE(importing::parse_decimal_scaled("9999999999999999999", 0, value));  // 19 digits, past int64
    ASSERT_TRUE(importing::parse_decimal_scaled("-0.0005", 3, value));
    EXPECT_EQ(value, -1);
    ASSERT_TRUE(importing::parse_decimal_scaled("9223372036854.775807", 6, value));
    EXPECT_EQ(value, std::numeric_limits<std::int64_t>::max());
    EXPECT_FALSE(importing::parse_decimal_scaled("92233720368547758.08", 2, value));
}

struct Scanned {
    std::vector<std::string> elements;
    std::vector<std::uint64_t> offsets;
    std::vector<std::pair<std::string, std::string>> values;
    bool operator==(const Scanned&) const = default;
};

template <typename Scanner>
Scanned scan_with(Scanner& scanner) {
    importing::JsonItem item;
    Scanned scanned;
    while (scanner.next(item)) {
        // The padding after every text is readable (simdjson reads past the end); the
        // sanitizer build catches a read past the buffer here.
        volatile char last_padding_byte = item.data[item.size + importing::kJsonPadding - 1];
        (void)last_padding_byte;
        if (item.kind == importing::JsonItem::Kind::trace_event) {
            scanned.elements.emplace_back(item.text());
            scanned.offsets.push_back(item.offset);
        } else {
            scanned.values.emplace_back(std::string(item.key), std::string(item.text()));
        }
    }
    return scanned;
}

// batch_bytes 0: JsonTraceScanner itself; otherwise through ScanAhead's thread with
// batches of that many bytes and a queue of two.
Scanned scan(const std::string& path, std::size_t chunk_bytes, std::vector<std::string> keys,
             std::size_t batch_bytes = 0) {
    importing::InputStream input(path, chunk_bytes);
    if (batch_bytes == 0) {
        importing::JsonTraceScanner scanner(input, std::move(keys));
        return scan_with(scanner);
    }
    importing::ScanAhead scanner(input, std::move(keys), batch_bytes, 2);
    return scan_with(scanner);
}

TEST(JsonScanner, TheSameElementsWhateverTheChunkSize) {
    TempDir dir;
    // Quotes, escapes, brackets and braces inside strings; nested arrays; scalars as values.
    const std::string json =
        "\xEF\xBB\xBF {\"metadata\": {\"a\": [1, {\"b\": \"}]\"}]},\n"
        "\"traceEvents\" : [ {\"name\": \"a \\\"}{][\\\\\", \"ph\": \"X\"},\n"
        "{\"name\": \"\\\\\\\"\", \"args\": {\"x\": [[], {}], \"y\": \"\\u007d\"}} ,{}\n"
        ", {\"name\":\"\xC3\xA9t\xC3\xA9\"}],\n"
        "\"baseTimeNanoseconds\": 1751410836000000000 , \"empty\": [], \"flag\": true,"
        " \"text\": \"x\\\"y\"}\n";
    import_test::write_file(dir.path("edge.json"), json);
    std::vector<std::string> keys = {"metadata", "baseTimeNanoseconds", "flag", "text"};
    Scanned reference = scan(dir.path("edge.json"), 1 << 20, keys);
    ASSERT_EQ(reference.elements.size(), 4u);
    EXPECT_EQ(reference.elements[0], "{\"name\": \"a \\\"}{][\\\\\", \"ph\": \"X\"}");
    EXPECT_EQ(reference.elements[2], "{}");
    EXPECT_EQ(reference.offsets[0], json.find("{\"name\": \"a"));
    ASSERT_EQ(reference.values.size(), 4u);
    EXPECT_EQ(reference.values[0].second, "{\"a\": [1, {\"b\": \"}]\"}]}");
    EXPECT_EQ(reference.values[1], (std::pair<std::string, std::string>{"baseTimeNanoseconds", "1751410836000000000"}));
    EXPECT_EQ(reference.values[2].second, "true");
    EXPECT_EQ(reference.values[3].second, "\"x\\\"y\"");
    for (std::size_t chunk = 1; chunk <= 33; ++chunk) {
        EXPECT_EQ(scan(dir.path("edge.json"), chunk, keys), reference) << "chunk " << chunk;
    }
    // Through gzip, in two members, with any chunk size.
    std::string half1 = json.substr(0, json.size() / 2), half2 = json.substr(json.size() / 2);
    import_test::write_file(dir.path("edge.json.gz"), import_test::gzip_bytes(half1) + import_test::gzip_bytes(half2));
    for (std::size_t chunk : {1, 2, 7, 64, 1 << 20}) {
        EXPECT_EQ(scan(dir.path("edge.json.gz"), chunk, keys), reference) << "gzip chunk " << chunk;
    }
    // Scanned ahead on another thread, in batches of any size: the same items.
    for (std::size_t batch : {1, 30, 100, 1 << 20}) {
        for (std::size_t chunk : {1, 7, 1 << 20}) {
            EXPECT_EQ(scan(dir.path("edge.json"), chunk, keys, batch), reference)
                << "batch " << batch << " chunk " << chunk;
            EXPECT_EQ(scan(dir.path("edge.json.gz"), chunk, keys, batch), reference) << "batch " << batch << " gzip";
        }
    }
}

// A random JSON value: strings full of quotes, runs of backslashes, brackets and
// multi-byte characters, nested objects and arrays; written as JSON, so its end is
// known without scanning.
std::string random_json_string(std::mt19937& random) {
    static const std::vector<std::string> pieces = {"a",        "bc",      "\\\"", "\\\\",     "\\\\\\\\", "{",
                                                    "}",        "[",       "]",    " ",        ",",        ":",
                                                    "\xC3\xA9", "\\u007d", "\\n",  "x\\\\\\\""};
    std::string text = "\"";
    const int length = static_cast<int>(random() % 40);
    for (int i = 0; i < length; ++i) text += pieces[random() % pieces.size()];
    return text + "\"";
}

std::string random_json_value(std::mt19937& random, int depth) {
    switch (depth <= 0 ? random() % 3 : random() % 5) {
        case 0:
            return random_json_string(random);
        case 1:
            return std::to_string(static_cast<int>(random() % 2000000) - 1000000) + ".125";
        case 2:
            return random() % 2 ? "true" : "null";
        case 3: {
            std::string array = "[";
            const int count = static_cast<int>(random() % 5);
            for (int i = 0; i < count; ++i) array += (i ? ", " : "") + random_json_value(random, depth - 1);
            return array + "]";
        }
        default: {
            std::string object = "{";
            const int count = static_cast<int>(random() % 5);
            for (int i = 0; i < count; ++i) {
                object += (i ? "," : "") + random_json_string(random) + ":" + random_json_value(random, depth - 1);
            }
            return object + "}";
        }
    }
}

// Elements of every length, cut by chunks and 64-byte blocks at every place (the
// scanner looks at 64 bytes at a time, and byte by byte where backslashes are).
TEST(JsonScanner, RandomElementsWithEscapesAndBracketsInStrings) {
    TempDir dir;
    std::mt19937 random(20261128);
    std::vector<std::string> elements;
    std::string json = "{\"traceEvents\": [";
    for (int i = 0; i < 400; ++i) {
        std::string element = "{\"name\":" + random_json_string(random) + ",\"args\":" + random_json_value(random, 4);
        // Long runs of spaces, or of backslashes (escaped in pairs), across block ends.
        if (i % 3 == 0) element += ",\"pad\":\"" + std::string(2 * (random() % 100), i % 2 ? ' ' : '\\') + "\"";
        element += "}";
        elements.push_back(element);
        json += (i ? std::string(",") + std::string(random() % 3, '\n') : std::string()) + element;
    }
    json += "], \"tail\": " + random_json_value(random, 3) + "}";
    import_test::write_file(dir.path("random.json"), json);
    for (std::size_t chunk : {1, 2, 3, 17, 63, 64, 65, 100, 127, 128, 129, 1000, 4096, 1 << 20}) {
        Scanned scanned = scan(dir.path("random.json"), chunk, {});
        ASSERT_EQ(scanned.elements, elements) << "chunk " << chunk;
    }
    import_test::write_file(dir.path("random.json.gz"), import_test::gzip_bytes(json));
    EXPECT_EQ(scan(dir.path("random.json.gz"), 100, {}, 1000).elements, elements);
}

TEST(JsonScanner, ScanAheadStopsWhenItsReaderLeavesEarly) {
    TempDir dir;
    std::string json = "[";
    for (int i = 0; i < 20000; ++i) json += "{\"ph\":\"X\",\"ts\":" + std::to_string(i) + "},";
    json += "]";
    import_test::write_file(dir.path("many.json"), json);
    for (int round = 0; round < 20; ++round) {
        importing::InputStream input(dir.path("many.json"), 64);
        importing::ScanAhead scanner(input, {}, 16, 1);  // the queue is full at once
        importing::JsonItem item;
        ASSERT_TRUE(scanner.next(item));
        EXPECT_EQ(item.text(), "{\"ph\":\"X\",\"ts\":0}");
    }  // ~ScanAhead wakes the blocked scanner thread and joins it
}

TEST(JsonScanner, ArrayFormatWithAndWithoutTheClosingBracket) {
    TempDir dir;
    import_test::write_file(dir.path("closed.json"), "[{\"ph\":\"X\"},{\"ph\":\"B\"},]");
    import_test::write_file(dir.path("open.json"), "[{\"ph\":\"X\"},\n{\"ph\":\"B\"},\n");
    EXPECT_EQ(scan(dir.path("closed.json"), 3, {}).elements.size(), 2u);
    EXPECT_EQ(scan(dir.path("open.json"), 3, {}).elements.size(), 2u);
}

TEST(JsonScanner, ErrorsNameTheByte) {
    TempDir dir;
    auto error_of = [&](const std::string& json) {
        import_test::write_file(dir.path("bad.json"), json);
        std::string message = "no error";
        try {
            scan(dir.path("bad.json"), 5, {});
        } catch (const store::TraceError& error) {
            message = error.what();
        }
        // Scanned ahead: the same error, after the same elements.
        std::string ahead = "no error";
        std::size_t delivered = 0;
        importing::InputStream input(dir.path("bad.json"), 5);
        importing::ScanAhead scanner(input, {}, 8, 2);
        importing::JsonItem item;
        try {
            while (scanner.next(item)) ++delivered;
        } catch (const store::TraceError& error) {
            ahead = error.what();
        }
        EXPECT_EQ(ahead, message) << json;
        if (json == "{\"traceEvents\": [{\"a\": 1}, @]") {
            EXPECT_EQ(delivered, 1u);
        }
        return message;
    };
    EXPECT_NE(error_of("{\"traceEvents\": {}}").find("traceEvents must be an array"), std::string::npos);
    EXPECT_NE(error_of("{\"traceEvents\": [{\"a\": 1}}").find("at byte 25: expected ',' or ']'"), std::string::npos)
        << error_of("{\"traceEvents\": [{\"a\": 1}}");
    EXPECT_NE(error_of("{\"traceEvents\": [{\"a\": \"unterminated")
                  .find("ends at byte 36 inside a value that starts at byte 17"),
              std::string::npos)
        << error_of("{\"traceEvents\": [{\"a\": \"unterminated");
    EXPECT_NE(error_of("{\"traceEvents\": []} extra").find("after the end of the JSON document"), std::string::npos);
    EXPECT_NE(error_of("nope").find("a trace starts with"), std::string::npos);
    EXPECT_NE(error_of("{\"traceEvents\" 1}").find("expected ':'"), std::string::npos);
    EXPECT_NE(error_of("").find("empty input"), std::string::npos);
    EXPECT_NE(error_of("{\"traceEvents\": [{\"a\": 1}, @]").find("expected a JSON value, found '@'"),
              std::string::npos);
}

}  // namespace
