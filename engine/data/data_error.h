// data_error.h: DataError, the one exception type the data pipeline throws for bad
// input. It carries the file and, where one applies, the sample index, so a message
// that reaches the training loop from a worker thread still says where the bad data is.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace ember::data {

class DataError : public std::runtime_error {
  public:
    static constexpr int64_t kNoSample = -1;

    // what() reads "<path>: sample <index>: <problem>" (or "<path>: <problem>").
    DataError(const std::string& path, int64_t sample_index, const std::string& problem);

    const std::string& path() const { return path_; }
    int64_t sample_index() const { return sample_index_; }
    const std::string& problem() const { return problem_; }

  private:
    std::string path_;
    int64_t sample_index_;
    std::string problem_;
};

}  // namespace ember::data
