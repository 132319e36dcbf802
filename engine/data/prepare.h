// prepare.h: writes Fashion-MNIST as an image folder (one 8-bit grayscale PNG per
// sample): out/<split>/<label>_<class name>/<index>.png, the layout ImageFolderDataset
// reads. Index is the sample's position in the IDX file, zero-padded to 5 digits.
#pragma once

#include "engine/data/fashion_mnist.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ember::data {

struct PrepareOptions {
    std::string root = kFashionMnistDefaultRoot;
    std::string out;
    std::vector<Split> splits = {Split::train, Split::test};
    int64_t limit = 0;  // 0 = every sample; otherwise the first `limit` of each split
};

// Folder name of class `label`: "0_t_shirt_top", "1_trouser", ..., "9_ankle_boot".
std::string fashion_mnist_class_folder(int label);

// Called after every written file: split, files written in this split, total in this split.
using PrepareProgress = std::function<void(Split split, int64_t written, int64_t total)>;

// Returns the number of files written. Throws DataError / std::runtime_error naming the path.
int64_t prepare_fashion_mnist_png(const PrepareOptions& options, const PrepareProgress& progress = {});

}  // namespace ember::data
