// dataset.h: the Dataset interface the loader reads from: a fixed number of samples,
// each an image of uint8 pixels (channels x height x width, planar) and an int label.
// Like a torch Dataset's __getitem__, read() may do real work (open and decode a file);
// it must be safe to call from several worker threads at once.
#pragma once

#include <cstdint>
#include <string>

namespace ember::data {

struct ImageShape {
    int channels = 1;
    int height = 0;
    int width = 0;
    int64_t pixels() const { return int64_t(channels) * height * width; }
};

class Dataset {
  public:
    virtual ~Dataset() = default;
    virtual int64_t size() const = 0;
    virtual ImageShape shape() const = 0;
    virtual int num_classes() const = 0;
    // The label alone, without decoding the image (samplers weight by class).
    virtual int32_t label(int64_t index) const = 0;
    // Decodes sample `index` into `pixels` (shape().pixels() bytes) and returns its label.
    // Throws DataError naming the file and the sample index.
    virtual int32_t read(int64_t index, uint8_t* pixels) const = 0;
    // One line for logs and benchmark tables: "Fashion-MNIST train (IDX, in memory)".
    virtual std::string describe() const = 0;
};

}  // namespace ember::data
