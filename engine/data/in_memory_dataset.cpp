// in_memory_dataset.cpp: InMemoryDataset; read() is a copy of one image.
#include "engine/data/in_memory_dataset.h"

#include "engine/data/data_error.h"

#include <cstring>
#include <stdexcept>

namespace ember::data {

InMemoryDataset::InMemoryDataset(ImageShape shape, int num_classes, std::vector<uint8_t> pixels,
                                 std::vector<int32_t> labels, std::string description)
    : shape_(shape),
      num_classes_(num_classes),
      pixels_(std::move(pixels)),
      labels_(std::move(labels)),
      description_(std::move(description)) {
    if (int64_t(pixels_.size()) != int64_t(labels_.size()) * shape_.pixels())
        throw std::invalid_argument("InMemoryDataset '" + description_ + "': " + std::to_string(pixels_.size()) +
                                    " pixel bytes for " + std::to_string(labels_.size()) + " labels of " +
                                    std::to_string(shape_.pixels()) + " pixels each");
    for (size_t i = 0; i < labels_.size(); ++i)
        if (labels_[i] < 0 || labels_[i] >= num_classes_)
            throw DataError(
                description_, int64_t(i),
                "label " + std::to_string(labels_[i]) + " out of range [0, " + std::to_string(num_classes_) + ")");
}

int32_t InMemoryDataset::label(int64_t index) const {
    if (index < 0 || index >= size())
        throw std::out_of_range(description_ + ": sample " + std::to_string(index) + " out of range [0, " +
                                std::to_string(size()) + ")");
    return labels_[size_t(index)];
}

int32_t InMemoryDataset::read(int64_t index, uint8_t* pixels) const {
    int32_t result = label(index);
    std::memcpy(pixels, image(index), size_t(shape_.pixels()));
    return result;
}

}  // namespace ember::data
