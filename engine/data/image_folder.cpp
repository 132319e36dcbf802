// image_folder.cpp: scanning the class folders and decoding one PNG per read().
#include "engine/data/image_folder.h"

#include "engine/data/data_error.h"
#include "engine/data/png_io.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace ember::data {

namespace fs = std::filesystem;

ImageFolderDataset::ImageFolderDataset(const std::string& root, ImageFolderOptions options) : root_(root) {
    if (options.channels != 1 && options.channels != 3)
        throw DataError(root, DataError::kNoSample, "channels must be 1 (gray) or 3 (RGB)");
    std::error_code error;
    if (!fs::is_directory(root, error))
        throw DataError(root, DataError::kNoSample, "image folder does not exist or is not a directory");
    for (const fs::directory_entry& entry : fs::directory_iterator(root, error))
        if (entry.is_directory()) class_names_.push_back(entry.path().filename().string());
    if (error) throw DataError(root, DataError::kNoSample, "cannot list: " + error.message());
    std::sort(class_names_.begin(), class_names_.end());
    if (class_names_.empty())
        throw DataError(root, DataError::kNoSample, "no class subfolders (expected root/<class>/<file>.png)");

    for (size_t label = 0; label < class_names_.size(); ++label) {
        fs::path class_dir = fs::path(root) / class_names_[label];
        std::vector<std::string> class_files;
        for (const fs::directory_entry& entry : fs::directory_iterator(class_dir, error)) {
            if (!entry.is_regular_file()) continue;
            std::string extension = entry.path().extension().string();
            std::transform(extension.begin(), extension.end(), extension.begin(),
                           [](unsigned char c) { return char(std::tolower(c)); });
            if (extension == ".png") class_files.push_back(entry.path().string());
        }
        if (error) throw DataError(class_dir.string(), DataError::kNoSample, "cannot list: " + error.message());
        std::sort(class_files.begin(), class_files.end());
        for (std::string& path : class_files) {
            files_.push_back(std::move(path));
            labels_.push_back(int32_t(label));
        }
    }
    if (files_.empty()) throw DataError(root, DataError::kNoSample, "no .png files in any class folder");

    shape_.channels = options.channels;
    shape_.height = options.height;
    shape_.width = options.width;
    if (shape_.height == 0 || shape_.width == 0) {
        PngHeader header = read_png_header(files_[0], 0);
        shape_.height = header.height;
        shape_.width = header.width;
    }
}

int32_t ImageFolderDataset::read(int64_t index, uint8_t* pixels) const {
    if (index < 0 || index >= size())
        throw DataError(root_, index, "sample index out of range [0, " + std::to_string(size()) + ")");
    const std::string& path = files_[size_t(index)];
    if (shape_.channels == 1) {
        read_png(path, index, shape_.width, shape_.height, 1, pixels);
    } else {
        // PNG stores RGB interleaved; the loader wants planar CHW.
        std::vector<uint8_t> interleaved(size_t(shape_.pixels()));
        read_png(path, index, shape_.width, shape_.height, 3, interleaved.data());
        int64_t plane = int64_t(shape_.height) * shape_.width;
        for (int64_t p = 0; p < plane; ++p)
            for (int c = 0; c < 3; ++c) pixels[c * plane + p] = interleaved[size_t(p * 3 + c)];
    }
    return labels_[size_t(index)];
}

std::string ImageFolderDataset::describe() const {
    return "image folder " + root_ + " (PNG, " + std::to_string(files_.size()) + " files, " +
           std::to_string(class_names_.size()) + " classes)";
}

}  // namespace ember::data
