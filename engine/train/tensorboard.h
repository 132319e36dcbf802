// tensorboard.h: TensorBoard event files, the format TensorFlow's event writer and
// PyTorch's SummaryWriter write and `tensorboard --logdir DIR` reads.
//
// A file `events.out.tfevents.<unix seconds>.<host>.<pid>.0` in the directory holds
// records, each: the length of the data (uint64, little-endian), the masked CRC32C of
// those 8 bytes (uint32), the data (one Event protobuf, schema tensorboard_event.proto),
// the masked CRC32C of the data. The first Event carries file_version "brain.Event:2";
// each later one the scalars of one step. Every record is flushed as it is written, so
// a killed run leaves a readable file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::train {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `data`.
std::uint32_t crc32c(std::string_view data);
// The CRC as TFRecord files store it: rotated right by 15 bits plus 0xa282ead8.
std::uint32_t masked_crc32c(std::string_view data);

class TensorBoardWriter {
  public:
    // Creates `directory` (and its parents) and a new event file in it; throws
    // std::runtime_error naming the path when either cannot be made.
    explicit TensorBoardWriter(const std::string& directory);
    ~TensorBoardWriter();
    TensorBoardWriter(const TensorBoardWriter&) = delete;
    TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

    // One Event at `step` holding a scalar per (tag, value); wall time now.
    void scalars(std::int64_t step, const std::vector<std::pair<std::string, double>>& values);

    const std::string& path() const { return path_; }

  private:
    void write_record(const std::string& data);

    std::string path_;
    std::FILE* file_ = nullptr;
};

}  // namespace ember::train
