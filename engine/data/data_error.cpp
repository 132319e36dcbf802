// data_error.cpp: formats DataError's message from the file, sample and problem.
#include "engine/data/data_error.h"

namespace ember::data {

namespace {

std::string format_message(const std::string& path, int64_t sample_index, const std::string& problem) {
    std::string message = path;
    if (sample_index != DataError::kNoSample) message += ": sample " + std::to_string(sample_index);
    message += ": " + problem;
    return message;
}

}  // namespace

DataError::DataError(const std::string& path, int64_t sample_index, const std::string& problem)
    : std::runtime_error(format_message(path, sample_index, problem)),
      path_(path),
      sample_index_(sample_index),
      problem_(problem) {}

}  // namespace ember::data
