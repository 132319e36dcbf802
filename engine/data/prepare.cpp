// prepare.cpp: IDX -> PNG folder conversion for `ember data prepare`.
#include "engine/data/prepare.h"

#include "engine/data/png_io.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

namespace ember::data {

namespace fs = std::filesystem;

std::string fashion_mnist_class_folder(int label) {
    std::string name = std::to_string(label) + "_";
    for (const char* c = fashion_mnist_class_names().at(size_t(label)); *c != '\0'; ++c)
        name += std::isalnum(static_cast<unsigned char>(*c)) ? char(std::tolower(static_cast<unsigned char>(*c))) : '_';
    return name;
}

int64_t prepare_fashion_mnist_png(const PrepareOptions& options, const PrepareProgress& progress) {
    if (options.out.empty()) throw std::invalid_argument("prepare: no output folder given");
    int64_t written_total = 0;
    for (Split split : options.splits) {
        InMemoryDataset dataset = load_fashion_mnist(options.root, split);
        int64_t count = dataset.size();
        if (options.limit > 0 && options.limit < count) count = options.limit;
        fs::path split_dir = fs::path(options.out) / split_name(split);
        for (int label = 0; label < kFashionMnistClasses; ++label) {
            fs::path class_dir = split_dir / fashion_mnist_class_folder(label);
            std::error_code error;
            fs::create_directories(class_dir, error);
            if (error) throw std::runtime_error(class_dir.string() + ": cannot create folder: " + error.message());
        }
        ImageShape shape = dataset.shape();
        for (int64_t i = 0; i < count; ++i) {
            char file_name[32];
            std::snprintf(file_name, sizeof file_name, "%05lld.png", static_cast<long long>(i));
            fs::path path = split_dir / fashion_mnist_class_folder(dataset.labels()[size_t(i)]) / file_name;
            write_png(path.string(), dataset.image(i), shape.width, shape.height, 1);
            ++written_total;
            if (progress) progress(split, i + 1, count);
        }
    }
    return written_total;
}

}  // namespace ember::data
