// in_memory_dataset.h: a data set held as one contiguous uint8 pixel array plus labels
// (Fashion-MNIST from IDX files, or synthetic data in tests). Also the source that the
// GPU-resident mode uploads in one copy.
#pragma once

#include "engine/data/dataset.h"

#include <string>
#include <vector>

namespace ember::data {

class InMemoryDataset : public Dataset {
  public:
    InMemoryDataset() = default;
    // pixels.size() must be labels.size() * shape.pixels(); every label in [0, num_classes).
    InMemoryDataset(ImageShape shape, int num_classes, std::vector<uint8_t> pixels, std::vector<int32_t> labels,
                    std::string description);

    int64_t size() const override { return int64_t(labels_.size()); }
    ImageShape shape() const override { return shape_; }
    int num_classes() const override { return num_classes_; }
    int32_t label(int64_t index) const override;
    int32_t read(int64_t index, uint8_t* pixels) const override;
    std::string describe() const override { return description_; }

    const uint8_t* pixels() const { return pixels_.data(); }
    const std::vector<int32_t>& labels() const { return labels_; }
    const uint8_t* image(int64_t index) const { return pixels_.data() + index * shape_.pixels(); }

  private:
    ImageShape shape_;
    int num_classes_ = 0;
    std::vector<uint8_t> pixels_;
    std::vector<int32_t> labels_;
    std::string description_;
};

}  // namespace ember::data
