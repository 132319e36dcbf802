// image_folder.h: a data set stored as one PNG file per sample, one subfolder per class:
//
//   root/<class name>/<anything>.png
//
// Classes are the subfolder names in sorted order (label 0 = first name), samples are
// the files sorted by class then by file name -- the layout of torchvision's ImageFolder.
// `ember data prepare fashion-mnist` names the class folders "0_t_shirt_top", "1_trouser",
// ... so that sorted order is label order. Every read() opens and decodes one file,
// which is the point: it gives the loader real I/O and decode work.
#pragma once

#include "engine/data/dataset.h"

#include <string>
#include <vector>

namespace ember::data {

struct ImageFolderOptions {
    int channels = 1;  // 1 = decode as gray, 3 = decode as RGB
    // 0 = take the size of the first image; every image must then have that size.
    int height = 0;
    int width = 0;
};

class ImageFolderDataset : public Dataset {
  public:
    // Scans root; throws DataError when root is missing, has no class folders, or has no PNG.
    explicit ImageFolderDataset(const std::string& root, ImageFolderOptions options = {});

    int64_t size() const override { return int64_t(files_.size()); }
    ImageShape shape() const override { return shape_; }
    int num_classes() const override { return int(class_names_.size()); }
    int32_t label(int64_t index) const override { return labels_.at(size_t(index)); }
    int32_t read(int64_t index, uint8_t* pixels) const override;
    std::string describe() const override;

    const std::vector<std::string>& class_names() const { return class_names_; }
    const std::string& file(int64_t index) const { return files_.at(size_t(index)); }

  private:
    std::string root_;
    ImageShape shape_;
    std::vector<std::string> class_names_;
    std::vector<std::string> files_;
    std::vector<int32_t> labels_;
};

}  // namespace ember::data
