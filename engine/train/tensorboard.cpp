// tensorboard.cpp: TFRecord framing of Event protobufs.
#include "engine/train/tensorboard.h"

#include "engine/train/tensorboard_event.pb.h"

#include "common/os.h"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include <unistd.h>

namespace ember::train {

namespace {

constexpr std::array<std::uint32_t, 256> make_crc32c_table() {
    std::array<std::uint32_t, 256> table{};
    for (std::uint32_t byte = 0; byte < 256; ++byte) {
        std::uint32_t crc = byte;
        for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (crc & 1 ? 0x82F63B78u : 0u);
        table[byte] = crc;
    }
    return table;
}
constexpr std::array<std::uint32_t, 256> kCrc32cTable = make_crc32c_table();

double unix_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The event file's name carries the host, as TensorFlow's writer names it.
std::string host_name() {
    const std::string name = os::host_name();
    return name.empty() ? "localhost" : name;
}

}  // namespace

std::uint32_t crc32c(std::string_view data) {
    std::uint32_t crc = 0xFFFFFFFFu;
    for (unsigned char byte : data) crc = kCrc32cTable[(crc ^ byte) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

std::uint32_t masked_crc32c(std::string_view data) {
    const std::uint32_t crc = crc32c(data);
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& directory) {
    std::error_code error;
    std::filesystem::create_directories(directory, error);
    if (error) throw std::runtime_error("output.tensorboard: cannot create " + directory + ": " + error.message());
    path_ = (std::filesystem::path(directory) / fmt::format("events.out.tfevents.{}.{}.{}.0",
                                                            static_cast<std::int64_t>(unix_seconds()), host_name(),
                                                            static_cast<long>(getpid())))
                .string();
    file_ = std::fopen(path_.c_str(), "wb");
    if (file_ == nullptr)
        throw std::runtime_error("output.tensorboard: cannot write " + path_ + ": " + std::strerror(errno));
    tensorboard::Event first;
    first.set_wall_time(unix_seconds());
    first.set_file_version("brain.Event:2");
    write_record(first.SerializeAsString());
}

TensorBoardWriter::~TensorBoardWriter() {
    if (file_ != nullptr) std::fclose(file_);
}

void TensorBoardWriter::scalars(std::int64_t step, const std::vector<std::pair<std::string, double>>& values) {
    tensorboard::Event event;
    event.set_wall_time(unix_seconds());
    event.set_step(step);
    for (const auto& [tag, value] : values) {
        tensorboard::Summary::Value& entry = *event.mutable_summary()->add_value();
        entry.set_tag(tag);
        entry.set_simple_value(static_cast<float>(value));
    }
    write_record(event.SerializeAsString());
}

void TensorBoardWriter::write_record(const std::string& data) {
    std::string record;
    record.reserve(data.size() + 16);
    const std::uint64_t length = data.size();
    char header[8];
    for (int i = 0; i < 8; ++i) header[i] = static_cast<char>((length >> (8 * i)) & 0xFF);
    auto append_u32 = [&record](std::uint32_t value) {
        for (int i = 0; i < 4; ++i) record += static_cast<char>((value >> (8 * i)) & 0xFF);
    };
    record.append(header, sizeof header);
    append_u32(masked_crc32c(std::string_view(header, sizeof header)));
    record += data;
    append_u32(masked_crc32c(data));
    if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() || std::fflush(file_) != 0)
        throw std::runtime_error("writing TensorBoard events to " + path_ + " failed: " + std::strerror(errno));
}

}  // namespace ember::train
