// fashion_mnist.h: the Fashion-MNIST data set (60,000 train / 10,000 test 28x28 grayscale
// images, 10 classes) from its four IDX files, as Debian's dataset-fashion-mnist package
// installs them under /usr/share/datasets/fashion-mnist. The root is configurable;
// files may be gzip-compressed (".gz") or plain.
#pragma once

#include "engine/data/in_memory_dataset.h"

#include <array>
#include <string>

namespace ember::data {

constexpr const char* kFashionMnistDefaultRoot = "/usr/share/datasets/fashion-mnist";
constexpr int kFashionMnistClasses = 10;
constexpr float kFashionMnistMean = 0.2860f;  // of pixel/255 over the training set
constexpr float kFashionMnistStd = 0.3530f;

enum class Split { train, test };
const char* split_name(Split split);

// Class names in label order (0 = T-shirt/top ... 9 = Ankle boot).
const std::array<const char*, kFashionMnistClasses>& fashion_mnist_class_names();

// Path of one IDX file under root: prefers "<name>.gz", falls back to plain "<name>".
std::string fashion_mnist_images_path(const std::string& root, Split split);
std::string fashion_mnist_labels_path(const std::string& root, Split split);

// Empty when both files of `split` exist under root; otherwise a message naming the missing
// file and how to install the data set (apt-get install dataset-fashion-mnist, or --data-root).
std::string fashion_mnist_missing(const std::string& root, Split split);

// Loads one split, checking magic numbers, truncation, that the image and label counts
// agree and that every label is in [0, 10). Throws DataError naming file and sample.
InMemoryDataset load_fashion_mnist(const std::string& root, Split split);

// The same checks for any IDX image/label pair (tests feed it broken files).
InMemoryDataset load_idx_pair(const std::string& images_path, const std::string& labels_path, int num_classes,
                              const std::string& description);

}  // namespace ember::data
