#include "engine/train/batch_source.h"

#include "engine/data/fashion_mnist.h"
#include "engine/data/gpu_resident.h"
#include "engine/data/image_folder.h"
#include "engine/data/loader.h"

#include <fmt/format.h>

#include <numeric>
#include <utility>

namespace ember::train {
namespace {

// A BatchSource over one of the loaders, which answer the same calls (data::DataLoader,
// data::GpuResidentLoader); each source adds its description.
template <class Loader>
class LoaderSource : public BatchSource {
  public:
    template <class... LoaderArgs>
    explicit LoaderSource(int64_t samples, LoaderArgs&&... args)
        : samples_(samples), loader_(std::forward<LoaderArgs>(args)...) {}
    void start_epoch(int64_t epoch) override { loader_.start_epoch(epoch); }
    const data::Batch* next() override { return loader_.next(); }
    void release(const data::Batch* batch, CUstream_st* stream) override { loader_.release(batch, stream); }
    int64_t batches_per_epoch() const override { return loader_.batches_per_epoch(); }
    int64_t samples() const override { return samples_; }
    double wait_seconds() const override { return loader_.stats().wait_seconds; }
    data::LoaderStats loader_stats() const override { return loader_.stats(); }

  protected:
    int64_t samples_;
    Loader loader_;
};

class ThreadedSource : public LoaderSource<data::DataLoader> {
  public:
    ThreadedSource(std::shared_ptr<const data::Dataset> dataset, std::shared_ptr<const data::Sampler> sampler,
                   data::LoaderOptions options, std::string description)
        : LoaderSource(sampler->length(), std::move(dataset), sampler, options), description_(std::move(description)) {}
    std::string describe() const override {
        return description_ + (loader_.pinned() ? ", pinned" : ", pageable") +
               (loader_.copies_to_device() ? ", copied to the device on its own stream" : "");
    }
    const std::string& fallback_note() const { return loader_.fallback_note(); }

  private:
    std::string description_;
};

class ResidentSource : public LoaderSource<data::GpuResidentLoader> {
  public:
    ResidentSource(const data::InMemoryDataset& dataset, std::shared_ptr<const data::Sampler> sampler,
                   int64_t batch_size, bool drop_last, data::AugmentOptions augment)
        : LoaderSource(sampler->length(), dataset, sampler, batch_size, drop_last, augment) {}
    std::string describe() const override {
        return fmt::format("GPU-resident ({:.1f} MiB on the device, gathered and augmented there)",
                           loader_.resident_bytes() / 1048576.0);
    }
};

data::InMemoryDataset load_split(const TrainConfig& config, data::Split split) {
    std::string missing = data::fashion_mnist_missing(config.data_root, split);
    if (!missing.empty()) throw ConfigError(missing);
    return data::load_fashion_mnist(config.data_root, split);
}

std::vector<int64_t> first_n(int64_t n) {
    std::vector<int64_t> indices(n);
    std::iota(indices.begin(), indices.end(), 0);
    return indices;
}

}  // namespace

DataSources make_data_sources(const TrainConfig& config, int64_t batch_size, bool on_device, int rank, int world_size) {
    DataSources sources;
    data::AugmentOptions normalize;
    normalize.mean = data::kFashionMnistMean;
    normalize.std = data::kFashionMnistStd;
    normalize.seed = config.seed;
    data::AugmentOptions train_augment = normalize;
    if (config.augment) {
        train_augment.crop_padding = 2;
        train_augment.horizontal_flip = true;
    }
    int64_t eval_batch = std::max<int64_t>(batch_size, 500);

    auto train_sampler_for = [&](int64_t size) -> std::shared_ptr<const data::Sampler> {
        int64_t n = config.train_limit > 0 ? std::min(config.train_limit, size) : size;
        if (world_size > 1)
            return std::make_shared<data::DistributedSampler>(n, rank, world_size, /*shuffle=*/true, config.seed,
                                                              config.drop_last);
        if (n == size) return std::make_shared<data::RandomSampler>(size, config.seed);
        return std::make_shared<data::SubsetRandomSampler>(first_n(n), config.seed);
    };
    auto test_sampler_for = [&](int64_t size) -> std::shared_ptr<const data::Sampler> {
        int64_t n = config.test_limit > 0 ? std::min(config.test_limit, size) : size;
        return std::make_shared<data::SequentialSampler>(n);
    };

    if (config.data_source == "gpu") {
        if (!on_device)
            throw ConfigError("data.source = \"gpu\" keeps the data set on the GPU and needs a CUDA device");
        auto train_set = load_split(config, data::Split::train);
        auto test_set = load_split(config, data::Split::test);
        sources.train = std::make_unique<ResidentSource>(train_set, train_sampler_for(train_set.size()), batch_size,
                                                         config.drop_last, train_augment);
        sources.test =
            std::make_unique<ResidentSource>(test_set, test_sampler_for(test_set.size()), eval_batch, false, normalize);
        return sources;
    }

    std::shared_ptr<const data::Dataset> train_set, test_set;
    std::string what;
    if (config.data_source == "png") {
        train_set = std::make_shared<data::ImageFolderDataset>(config.png_dir + "/train");
        test_set = std::make_shared<data::ImageFolderDataset>(config.png_dir + "/test");
        what = "PNG folder " + config.png_dir;
    } else {
        train_set = std::make_shared<data::InMemoryDataset>(load_split(config, data::Split::train));
        test_set = std::make_shared<data::InMemoryDataset>(load_split(config, data::Split::test));
        what = "IDX in memory";
    }
    sources.classes = train_set->num_classes();

    data::LoaderOptions options;
    options.batch_size = batch_size;
    options.drop_last = config.drop_last;
    options.workers = config.workers;
    options.prefetch_factor = config.prefetch_factor;
    options.persistent_workers = config.persistent_workers;
    // Pinned staging buffers serve the host-to-device copy; the CPU backend has none.
    options.pin_memory = config.pin_memory && on_device;
    options.copy_to_device = on_device;
    options.augment = train_augment;
    auto train = std::make_unique<ThreadedSource>(
        train_set, train_sampler_for(train_set->size()), options,
        fmt::format("{}, {} workers, prefetch {}", what, config.workers, config.prefetch_factor));
    if (!train->fallback_note().empty()) sources.note = train->fallback_note();
    sources.train = std::move(train);

    data::LoaderOptions test_options = options;
    test_options.batch_size = eval_batch;
    test_options.drop_last = false;
    test_options.augment = normalize;
    test_options.persistent_workers = false;
    sources.test = std::make_unique<ThreadedSource>(test_set, test_sampler_for(test_set->size()), test_options, what);
    return sources;
}

}  // namespace ember::train
