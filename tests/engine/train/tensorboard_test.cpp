// tensorboard_test.cpp: TensorBoard event files (engine/train/tensorboard.h) read back
// record by record: the CRC-32C against its published check value and a bit-by-bit
// reference, the TFRecord framing (length, masked CRC of the length, data, masked CRC of
// the data) and the Event protobufs inside.
#include "engine/train/tensorboard.h"
#include "engine/train/tensorboard_event.pb.h"
#include "tests/support/read_file.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace ember;

// CRC-32C one bit at a time, straight from the definition (reflected, polynomial
// 0x82F63B78, initial and final XOR 0xFFFFFFFF).
std::uint32_t reference_crc32c(const std::string& data) {
    std::uint32_t crc = 0xFFFFFFFFu;
    for (unsigned char byte : data) {
        crc ^= byte;
        for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return crc ^ 0xFFFFFFFFu;
}

std::uint32_t reference_mask(std::uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::uint64_t little_endian(const std::string& bytes, std::size_t at, int width) {
    std::uint64_t value = 0;
    for (int i = width - 1; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[at + i]);
    return value;
}

TEST(Crc32c, MatchesItsCheckValueAndTheBitwiseDefinition) {
    EXPECT_EQ(train::crc32c("123456789"), 0xE3069283u);  // the CRC catalogue's check value
    EXPECT_EQ(train::crc32c(""), 0u);
    std::string bytes;
    for (int i = 0; i < 1000; ++i) bytes += static_cast<char>((i * 131 + 7) & 0xFF);
    for (std::size_t length : {1u, 7u, 8u, 63u, 1000u}) {
        const std::string part = bytes.substr(0, length);
        EXPECT_EQ(train::crc32c(part), reference_crc32c(part)) << length;
        EXPECT_EQ(train::masked_crc32c(part), reference_mask(reference_crc32c(part))) << length;
    }
}

// Every record of an event file, its CRCs checked; fails the test on a broken frame.
std::vector<std::string> read_records(const std::string& path) {
    const std::string bytes = test_support::read_file(path);
    std::vector<std::string> records;
    std::size_t at = 0;
    while (at < bytes.size()) {
        EXPECT_LE(at + 12, bytes.size()) << "a record header cut short at byte " << at;
        if (at + 12 > bytes.size()) break;
        const std::uint64_t length = little_endian(bytes, at, 8);
        EXPECT_EQ(little_endian(bytes, at + 8, 4), reference_mask(reference_crc32c(bytes.substr(at, 8)))) << at;
        EXPECT_LE(at + 12 + length + 4, bytes.size()) << "a record cut short at byte " << at;
        if (at + 12 + length + 4 > bytes.size()) break;
        std::string data = bytes.substr(at + 12, length);
        EXPECT_EQ(little_endian(bytes, at + 12 + length, 4), reference_mask(reference_crc32c(data))) << at;
        records.push_back(std::move(data));
        at += 12 + length + 4;
    }
    return records;
}

TEST(TensorBoardWriter, WritesFramedEventsTensorBoardReads) {
    test_support::TempDir folder("ember-tensorboard-test");
    const std::string directory = folder.path("runs/mlp");  // made with its parents
    std::string path;
    {
        train::TensorBoardWriter writer(directory);
        path = writer.path();
        writer.scalars(1, {{"train/loss", 2.25}, {"train/learning_rate", 0.05}});
        writer.scalars(2, {{"train/loss", 1.5}});
        // Flushed record by record: readable before the writer closes.
        EXPECT_EQ(read_records(path).size(), 3u);
    }
    EXPECT_TRUE(std::regex_match(std::filesystem::path(path).filename().string(),
                                 std::regex(R"(events\.out\.tfevents\.\d{10}\..+\.\d+\.0)")))
        << path;
    EXPECT_EQ(std::filesystem::path(path).parent_path(), std::filesystem::path(directory));
    const std::vector<std::string> records = read_records(path);
    ASSERT_EQ(records.size(), 3u);
    ember::tensorboard::Event first;
    ASSERT_TRUE(first.ParseFromString(records[0]));
    EXPECT_EQ(first.file_version(), "brain.Event:2");
    EXPECT_GT(first.wall_time(), 1.5e9);  // Unix seconds
    ember::tensorboard::Event step1, step2;
    ASSERT_TRUE(step1.ParseFromString(records[1]));
    ASSERT_TRUE(step2.ParseFromString(records[2]));
    EXPECT_EQ(step1.step(), 1);
    ASSERT_EQ(step1.summary().value_size(), 2);
    EXPECT_EQ(step1.summary().value(0).tag(), "train/loss");
    EXPECT_FLOAT_EQ(step1.summary().value(0).simple_value(), 2.25f);
    EXPECT_EQ(step1.summary().value(1).tag(), "train/learning_rate");
    EXPECT_FLOAT_EQ(step1.summary().value(1).simple_value(), 0.05f);
    EXPECT_EQ(step2.step(), 2);
    EXPECT_GE(step2.wall_time(), step1.wall_time());
}

TEST(TensorBoardWriter, NamesTheDirectoryItCannotCreate) {
    test_support::TempDir folder("ember-tensorboard-test");
    const std::string blocker = folder.path("file");
    std::ofstream(blocker) << "not a directory";
    try {
        train::TensorBoardWriter writer(blocker + "/runs");
        FAIL() << "a directory under a file was accepted";
    } catch (const std::runtime_error& error) {
        EXPECT_NE(std::string(error.what()).find(blocker), std::string::npos) << error.what();
    }
}

}  // namespace
