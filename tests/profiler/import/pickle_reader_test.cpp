// The pickle reader on hand-built pickles: every protocol's containers, the memo, the
// list hook and its paths, and what it refuses (classes, callables, cycles, wide ints).
#include "profiler/import/pickle_reader.h"
#include "profiler/store/trace_error.h"

#include <gtest/gtest.h>

#include <string>

namespace ember::importing::pickle {
namespace {

using namespace std::string_literals;

Value read(const std::string& bytes, const ReadOptions& options = {}) {
    return read_pickle_bytes(bytes, "test.pickle", options);
}

std::string refusal(const std::string& bytes) {
    try {
        read(bytes);
    } catch (const store::TraceError& error) {
        return error.what();
    }
    return "accepted";
}

TEST(PickleReader, Protocol0ListOfScalars) {
    // pickle.dumps([1, -2, 3.5, 'hé', None, True], protocol=0)
    Value v = read("(lp0\nI1\naI-2\naF3.5\naVh\xe9\np1\naNaI01\na."s);
    ASSERT_EQ(v.kind(), Kind::list);
    ASSERT_EQ(v.size(), 6u);
    EXPECT_EQ(v.items()[0].integer(), 1);
    EXPECT_EQ(v.items()[1].integer(), -2);
    EXPECT_DOUBLE_EQ(v.items()[2].real(), 3.5);
    EXPECT_EQ(v.items()[3].text(), "h\xc3\xa9");
    EXPECT_TRUE(v.items()[4].is_none());
    EXPECT_EQ(v.items()[5].kind(), Kind::boolean);
}

TEST(PickleReader, Protocol4DictWithMemoAndLongs) {
    // pickle.dumps({'a': [x, x], 'b': 2**40, 'c': -1, 'd': b'\x00\x01', 'e': (1, 2)}, 4) with x =
    // {'k': 'v'}
    const std::string bytes =
        "\x80\x04\x95@\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01"
        "a\x94}\x94\x8c\x01k\x94\x8c\x01v\x94sh\x02\x86\x94"
        "\x8c\x01"
        "b\x94\x8a\x06\x00\x00\x00\x00\x00\x01\x8c\x01"
        "c\x94J\xff\xff\xff\xff\x8c\x01"
        "d\x94"
        "C\x02\x00\x01\x94\x8c\x01"
        "e\x94K\x01K\x02\x86\x94u."s;
    Value v = read(bytes);
    ASSERT_EQ(v.kind(), Kind::dict);
    const Value* a = v.find("a");
    ASSERT_NE(a, nullptr);
    ASSERT_EQ(a->size(), 2u);
    EXPECT_TRUE(a->items()[0].same_container(a->items()[1]));
    EXPECT_EQ(a->items()[0].find("k")->text(), "v");
    EXPECT_EQ(v.find("b")->integer(), std::int64_t{1} << 40);
    EXPECT_EQ(v.find("c")->integer(), -1);
    EXPECT_EQ(v.find("d")->kind(), Kind::bytes);
    EXPECT_EQ(v.find("e")->kind(), Kind::tuple);
}

TEST(PickleReader, RefusesWhatWouldRunCode) {
    // class E: __reduce__ = lambda self: (os.system, ('touch pwned',)); pickle.dumps(E(), 0) and 4
    std::string message = refusal("cposix\nsystem\np0\n(Vtouch pwned\np1\ntp2\nRp3\n."s);
    EXPECT_NE(message.find("test.pickle: byte 0: opcode GLOBAL (0x63)"), std::string::npos) << message;
    message = refusal(
        "\x80\x04\x95&\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94\x8c\x06system\x94\x93\x94"
        "\x8c\x0btouch pwned\x94\x85\x94R\x94."s);
    EXPECT_NE(message.find("byte 28: opcode STACK_GLOBAL (0x93)"), std::string::npos) << message;
    message = refusal("\x80\x02N)R."s);
    EXPECT_NE(message.find("byte 4: opcode REDUCE (0x52)"), std::string::npos) << message;
    for (const char* op : {"b", "i", "o", "\x81", "\x92", "\x82", "P", "Q", "\x97"}) {
        message = refusal("\x80\x02N"s + op + "\x00\x00\x00\x00.");
        EXPECT_NE(message.find("byte 3: opcode"), std::string::npos) << message;
        EXPECT_NE(message.find("refused"), std::string::npos) << message;
    }
}

TEST(PickleReader, RefusesCyclesWideIntegersAndTruncation) {
    EXPECT_NE(refusal("]\x94h\x00"
                      "a."s)
                  .find("cycle"),
              std::string::npos);
    // d = {}; x = [d]; d['k'] = x
    EXPECT_NE(refusal("}\x94]\x94h\x00"
                      "a0\x8c\x01kh\x01s."s)
                  .find("cycle"),
              std::string::npos);
    EXPECT_NE(refusal("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01."s).find("wider than 64 bits"), std::string::npos);
    EXPECT_NE(refusal("L123456789012345678901234567890L\n."s).find("wider than 64 bits"), std::string::npos);
    EXPECT_NE(refusal("]\x94(K\x01"s).find("ends before its STOP"), std::string::npos);
    EXPECT_NE(refusal("X\xff\xff\xff\x7f"
                      "abc"s)
                  .find("ends before"),
              std::string::npos);
    EXPECT_NE(refusal("h\x05."s).find("memo entry 5 is not defined"), std::string::npos);
    EXPECT_NE(refusal("a."s).find("underflow"), std::string::npos);
}

TEST(PickleReader, DeepNestingIsFreedWithoutRecursion) {
    const int depth = 200000;
    std::string bytes = "]";
    for (int i = 0; i < depth; ++i) bytes += "]";
    for (int i = 0; i < depth; ++i) bytes += "a";
    bytes += ".";
    Value v = read(bytes);
    EXPECT_EQ(v.size(), 1u);
}

TEST(PickleReader, HookTakesListItemsWithTheirPath) {
    // pickle.dumps({'segments': [], 'device_traces': [[], [{'a': 1}, {'a': 2}]]}, 4)
    const std::string bytes =
        "\x80\x04}\x94(\x8c\x08segments\x94]\x94\x8c\x0d"
        "device_traces\x94]\x94(]\x94]\x94(}\x94\x8c\x01"
        "a\x94K\x01s}"
        "\x94h\x08K\x02see"
        "u."s;
    std::vector<std::string> seen;
    ReadOptions options;
    options.on_list_items = [&](std::span<const PathStep> path, const Value&, std::vector<Value>& items) {
        std::string where;
        for (const PathStep& step : path)
            where += step.index >= 0 ? "[" + std::to_string(step.index) + "]" : "." + step.key;
        seen.push_back(where + ":" + std::to_string(items.size()));
        return where == ".device_traces[1]";
    };
    Value v = read(bytes, options);
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[0], ".device_traces[1]:2");
    EXPECT_EQ(seen[1], ".device_traces:2");
    const Value* traces = v.find("device_traces");
    ASSERT_NE(traces, nullptr);
    ASSERT_EQ(traces->size(), 2u);
    EXPECT_EQ(traces->items()[1].size(), 0u);  // taken
}

}  // namespace
}  // namespace ember::importing::pickle
