// fashion_mnist.cpp: locating and loading the Fashion-MNIST IDX files.
#include "engine/data/fashion_mnist.h"

#include "engine/data/data_error.h"
#include "engine/data/idx_reader.h"

#include <filesystem>

namespace ember::data {

namespace {

std::string prefer_gzip(const std::string& root, const std::string& name) {
    std::filesystem::path base = std::filesystem::path(root) / name;
    std::filesystem::path gz = base;
    gz += ".gz";
    std::error_code error;
    if (std::filesystem::exists(gz, error) || !std::filesystem::exists(base, error)) return gz.string();
    return base.string();
}

const char* file_prefix(Split split) {
    return split == Split::train ? "train" : "t10k";
}

}  // namespace

const char* split_name(Split split) {
    return split == Split::train ? "train" : "test";
}

const std::array<const char*, kFashionMnistClasses>& fashion_mnist_class_names() {
    static const std::array<const char*, kFashionMnistClasses> names = {
        "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
    return names;
}

std::string fashion_mnist_images_path(const std::string& root, Split split) {
    return prefer_gzip(root, std::string(file_prefix(split)) + "-images-idx3-ubyte");
}

std::string fashion_mnist_labels_path(const std::string& root, Split split) {
    return prefer_gzip(root, std::string(file_prefix(split)) + "-labels-idx1-ubyte");
}

std::string fashion_mnist_missing(const std::string& root, Split split) {
    for (const std::string& path : {fashion_mnist_images_path(root, split), fashion_mnist_labels_path(root, split)}) {
        std::error_code error;
        if (!std::filesystem::is_regular_file(path, error))
            return "Fashion-MNIST not found: " + path +
                   " is missing. Install it with `sudo apt-get install dataset-fashion-mnist` (files land in " +
                   kFashionMnistDefaultRoot +
                   ") or pass a data root (--root, --data-root) holding the four *-ubyte.gz files.";
    }
    return {};
}

InMemoryDataset load_idx_pair(const std::string& images_path, const std::string& labels_path, int num_classes,
                              const std::string& description) {
    IdxImages images = read_idx_images(images_path);
    IdxLabels labels = read_idx_labels(labels_path);
    if (images.count != labels.count)
        throw DataError(labels_path, DataError::kNoSample,
                        "holds " + std::to_string(labels.count) + " labels but " + images_path + " holds " +
                            std::to_string(images.count) + " images (image/label count mismatch)");
    std::vector<int32_t> label_values(size_t(labels.count));
    for (int64_t i = 0; i < labels.count; ++i) {
        int value = labels.labels[size_t(i)];
        if (value >= num_classes)
            throw DataError(
                labels_path, i,
                "label " + std::to_string(value) + " out of range [0, " + std::to_string(num_classes) + ")");
        label_values[size_t(i)] = value;
    }
    ImageShape shape{1, images.rows, images.columns};
    return InMemoryDataset(shape, num_classes, std::move(images.pixels), std::move(label_values), description);
}

InMemoryDataset load_fashion_mnist(const std::string& root, Split split) {
    std::string missing = fashion_mnist_missing(root, split);
    if (!missing.empty()) throw DataError(root, DataError::kNoSample, missing);
    return load_idx_pair(fashion_mnist_images_path(root, split), fashion_mnist_labels_path(root, split),
                         kFashionMnistClasses, std::string("Fashion-MNIST ") + split_name(split) + " (IDX, in memory)");
}

}  // namespace ember::data
