// loader.cpp: DataLoader's slots, workers and the hand-off to the training thread.
//
// Batch k of an epoch is built in staging slot k % slots, so the slot ring bounds how far
// the workers run ahead. Workers take batch numbers from a shared counter in order; any
// worker may build any batch, and next() hands them out strictly in order.
#include "engine/data/loader.h"
#include "common/os.h"

#include "engine/core/cuda_check.h"
#include "engine/core/device.h"
#include "engine/core/nvtx.h"
#include "engine/core/stream.h"
#include "engine/data/data_error.h"
#include "engine/data/staging_buffer.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>

namespace ember::data {

namespace {

constexpr auto kCategory = nvtx::Category::dataloader;

}  // namespace

struct DataLoader::CopyStream {
    Stream stream;  // non-blocking
};

struct DataLoader::Slot {
    HostBuffer images;             // float [batch_size, C, H, W]
    HostBuffer labels;             // int32 [batch_size]
    std::vector<int64_t> indices;  // data set indices of the batch
    std::vector<uint8_t> decoded;  // uint8 [batch_size, C, H, W] before augmentation
    DeviceBuffer device_images;
    DeviceBuffer device_labels;
    std::unique_ptr<Event> copied;    // recorded after the H2D copy
    std::unique_ptr<Event> released;  // recorded on the consumer's stream by release()
    bool copy_pending = false;
    bool release_recorded = false;
    int index = 0;  // position in slots_, reported as Batch::slot

    SlotState state = SlotState::free;
    int64_t batch_number = -1;
    std::exception_ptr error;
    Batch batch;
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const Sampler> sampler,
                       LoaderOptions options)
    : dataset_(std::move(dataset)), sampler_(std::move(sampler)), options_(options) {
    if (!dataset_ || !sampler_) throw std::invalid_argument("DataLoader: dataset and sampler are required");
    if (options_.batch_size <= 0) throw std::invalid_argument("DataLoader: batch_size must be > 0");
    if (options_.workers < 0) throw std::invalid_argument("DataLoader: workers must be >= 0");
    if (options_.prefetch_factor < 1) throw std::invalid_argument("DataLoader: prefetch_factor must be >= 1");
    if (!(options_.augment.std > 0.0f)) throw std::invalid_argument("DataLoader: normalization std must be > 0");
    shape_ = dataset_->shape();

    if ((options_.pin_memory || options_.copy_to_device) && !cuda_usable()) {
        fallback_note_ = "dataloader: no CUDA device (" + cuda_runtime_status().reason +
                         "): staging buffers are pageable and the host-to-device copy is skipped";
        static std::once_flag said_once;
        std::call_once(said_once, [this] { std::fprintf(stderr, "%s\n", fallback_note_.c_str()); });
    }
    copy_to_device_ = options_.copy_to_device && cuda_usable();
    if (copy_to_device_) {
        EMBER_CUDA_CHECK(cudaGetDevice(&device_));
        copy_stream_ = std::make_unique<CopyStream>();
    }

    // workers * prefetch_factor batches in flight plus the one the training loop holds;
    // two when loading in the training thread (hold one, build the next).
    int slot_count = options_.workers == 0 ? 2 : options_.workers * options_.prefetch_factor + 1;
    size_t pixels = size_t(options_.batch_size * shape_.pixels());
    for (int s = 0; s < slot_count; ++s) {
        auto slot = std::make_unique<Slot>();
        slot->index = s;
        slot->images = HostBuffer(pixels * sizeof(float), options_.pin_memory);
        slot->labels = HostBuffer(size_t(options_.batch_size) * sizeof(int32_t), options_.pin_memory);
        slot->decoded.resize(pixels);
        if (copy_to_device_) {
            slot->device_images = DeviceBuffer(pixels * sizeof(float));
            slot->device_labels = DeviceBuffer(size_t(options_.batch_size) * sizeof(int32_t));
            slot->copied = std::make_unique<Event>(false);
            slot->released = std::make_unique<Event>(false);
        }
        slots_.push_back(std::move(slot));
    }
}

DataLoader::~DataLoader() {
    stop_workers();
    if (copy_stream_) cudaStreamSynchronize(copy_stream_->stream.get());  // copies may still read staging memory
}

bool DataLoader::pinned() const {
    return slots_.front()->images.pinned();
}

int64_t DataLoader::batches_per_epoch() const {
    int64_t length = sampler_->length();
    return options_.drop_last ? length / options_.batch_size : (length + options_.batch_size - 1) / options_.batch_size;
}

LoaderStats DataLoader::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
}

void DataLoader::start_workers() {
    for (int w = 0; w < options_.workers; ++w) workers_.emplace_back(&DataLoader::worker_main, this, w);
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.worker_starts += options_.workers;
}

void DataLoader::stop_workers() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    work_available_.notify_all();
    for (std::thread& worker : workers_) worker.join();
    workers_.clear();
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = false;
}

void DataLoader::wait_until_no_slot_filling(std::unique_lock<std::mutex>& lock) {
    batch_finished_.wait(lock, [this] {
        for (const auto& slot : slots_)
            if (slot->state == SlotState::filling) return false;
        return true;
    });
}

void DataLoader::start_epoch(int64_t epoch) {
    std::vector<std::vector<int64_t>> batches =
        make_batches(sampler_->epoch_indices(epoch), options_.batch_size, options_.drop_last);
    if (!options_.persistent_workers && !workers_.empty()) stop_workers();  // a fresh set per epoch
    {
        std::unique_lock<std::mutex> lock(mutex_);
        epoch_active_ = false;
        wait_until_no_slot_filling(lock);
        for (auto& slot : slots_) {
            slot->state = SlotState::free;
            slot->batch_number = -1;
            slot->error = nullptr;
        }
        batches_ = std::move(batches);
        epoch_ = epoch;
        next_dispatch_ = 0;
        next_consume_ = 0;
        epoch_error_ = nullptr;
        epoch_active_ = true;
        epoch_started_ = true;
    }
    if (options_.workers > 0 && workers_.empty()) start_workers();
    work_available_.notify_all();
}

void DataLoader::worker_main(int worker_index) {
    std::string thread_name = "dataloader worker " + std::to_string(worker_index);
    nvtx::name_thread(thread_name.c_str());
    // A new thread starts on device 0; copies must go to the device the loader was made on.
    cudaError_t device_status = copy_to_device_ ? cudaSetDevice(device_) : cudaSuccess;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
        work_available_.wait(lock, [this] {
            return stopping_ || (epoch_active_ && next_dispatch_ < int64_t(batches_.size()) &&
                                 slots_[size_t(next_dispatch_ % int64_t(slots_.size()))]->state == SlotState::free);
        });
        if (stopping_) return;
        int64_t batch_number = next_dispatch_++;
        Slot& slot = *slots_[size_t(batch_number % int64_t(slots_.size()))];
        slot.state = SlotState::filling;
        slot.batch_number = batch_number;
        int64_t epoch = epoch_;
        std::vector<int64_t> indices = batches_[size_t(batch_number)];
        lock.unlock();

        std::exception_ptr error;
        const double cpu_before = os::thread_cpu_seconds();
        try {
            if (device_status != cudaSuccess)
                throw_cuda_error(device_status, "cudaSetDevice(device_)", __FILE__, __LINE__);
            fill(slot, epoch, batch_number, indices);
        } catch (...) {
            error = std::current_exception();
        }
        const double cpu_seconds = os::thread_cpu_seconds() - cpu_before;

        lock.lock();
        stats_.fill_cpu_seconds += cpu_seconds;
        stats_.batches_filled += 1;
        slot.error = error;
        slot.state = error ? SlotState::failed : SlotState::ready;
        batch_finished_.notify_all();
    }
}

void DataLoader::fill(Slot& slot, int64_t epoch, int64_t batch_number, const std::vector<int64_t>& indices) {
    nvtx::ScopedRange load(nvtx::range::kDataloaderLoad, kCategory, uint64_t(batch_number));
    const int64_t count = int64_t(indices.size());
    const int64_t pixels = shape_.pixels();
    // The previous copy out of this slot's host memory must be done before we overwrite it.
    if (slot.copy_pending) {
        EMBER_CUDA_CHECK(cudaEventSynchronize(slot.copied->get()));
        slot.copy_pending = false;
    }
    slot.indices = indices;
    auto* labels = static_cast<int32_t*>(slot.labels.data());
    auto* images = static_cast<float*>(slot.images.data());
    {
        nvtx::ScopedRange decode(nvtx::range::kDataloaderDecode, kCategory);
        const int num_classes = dataset_->num_classes();
        for (int64_t i = 0; i < count; ++i) {
            int32_t label = dataset_->read(indices[size_t(i)], slot.decoded.data() + i * pixels);
            if (label < 0 || label >= num_classes)
                throw DataError(
                    dataset_->describe(), indices[size_t(i)],
                    "label " + std::to_string(label) + " out of range [0, " + std::to_string(num_classes) + ")");
            labels[i] = label;
        }
    }
    {
        nvtx::ScopedRange augment(nvtx::range::kDataloaderAugment, kCategory);
        for (int64_t i = 0; i < count; ++i)
            augment_sample_cpu(slot.decoded.data() + i * pixels, shape_.channels, shape_.height, shape_.width,
                               options_.augment, epoch, indices[size_t(i)], images + i * pixels);
    }
    Batch& batch = slot.batch;
    batch = Batch{.epoch = epoch,
                  .index = batch_number,
                  .size = count,
                  .shape = shape_,
                  .images = images,
                  .labels = labels,
                  .sample_indices = slot.indices.data(),
                  .pinned = slot.images.pinned(),
                  .slot = slot.index};
    if (copy_to_device_) {
        nvtx::ScopedRange h2d(nvtx::range::kDataloaderH2d, kCategory);
        cudaStream_t stream = copy_stream_->stream.get();
        // Do not overwrite device memory the consumer's stream may still be reading.
        if (slot.release_recorded) EMBER_CUDA_CHECK(cudaStreamWaitEvent(stream, slot.released->get(), 0));
        EMBER_CUDA_CHECK(cudaMemcpyAsync(slot.device_images.data(), images, size_t(count * pixels) * sizeof(float),
                                         cudaMemcpyHostToDevice, stream));
        EMBER_CUDA_CHECK(cudaMemcpyAsync(slot.device_labels.data(), labels, size_t(count) * sizeof(int32_t),
                                         cudaMemcpyHostToDevice, stream));
        EMBER_CUDA_CHECK(cudaEventRecord(slot.copied->get(), stream));
        slot.copy_pending = true;
        batch.device_images = static_cast<const float*>(slot.device_images.data());
        batch.device_labels = static_cast<const int32_t*>(slot.device_labels.data());
        batch.ready = slot.copied->get();
    }
}

const Batch* DataLoader::next() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (epoch_error_) std::rethrow_exception(epoch_error_);
    if (!epoch_started_) throw std::logic_error("DataLoader::next() before start_epoch()");
    if (next_consume_ >= int64_t(batches_.size())) {
        epoch_active_ = false;
        lock.unlock();
        if (!options_.persistent_workers) stop_workers();
        return nullptr;
    }
    const int64_t batch_number = next_consume_;
    Slot& slot = *slots_[size_t(batch_number % int64_t(slots_.size()))];
    if (slot.state == SlotState::in_use)
        throw std::logic_error("DataLoader::next(): all " + std::to_string(slots_.size()) +
                               " staging slots are held; release() batches you are done with");

    if (options_.workers == 0) {
        slot.state = SlotState::filling;
        slot.batch_number = batch_number;
        std::vector<int64_t> indices = batches_[size_t(batch_number)];
        int64_t epoch = epoch_;
        lock.unlock();
        std::exception_ptr error;
        auto start = std::chrono::steady_clock::now();
        const double cpu_before = os::thread_cpu_seconds();
        {
            // Loading in the training thread: all of it is time the loop waits.
            nvtx::ScopedRange wait(nvtx::range::kDataloaderWait, kCategory);
            try {
                fill(slot, epoch, batch_number, indices);
            } catch (...) {
                error = std::current_exception();
            }
        }
        lock.lock();
        stats_.wait_seconds += os::seconds_since(start);
        stats_.fill_cpu_seconds += os::thread_cpu_seconds() - cpu_before;
        stats_.batches_filled += 1;
        if (error) {
            slot.state = SlotState::free;
            epoch_error_ = error;
            epoch_active_ = false;
            std::rethrow_exception(error);
        }
    } else {
        auto is_done = [&] {
            return slot.batch_number == batch_number &&
                   (slot.state == SlotState::ready || slot.state == SlotState::failed);
        };
        if (!is_done()) {
            auto start = std::chrono::steady_clock::now();
            {
                nvtx::ScopedRange wait(nvtx::range::kDataloaderWait, kCategory);
                batch_finished_.wait(lock, is_done);
            }
            stats_.wait_seconds += os::seconds_since(start);
        }
        if (slot.state == SlotState::failed) {
            epoch_error_ = slot.error;
            slot.error = nullptr;
            slot.state = SlotState::free;
            epoch_active_ = false;  // workers finish what they hold and take nothing new
            std::rethrow_exception(epoch_error_);
        }
    }
    slot.state = SlotState::in_use;
    ++next_consume_;
    ++stats_.batches;
    return &slot.batch;
}

void DataLoader::release(const Batch* batch, CUstream_st* consumer_stream) {
    if (batch == nullptr) return;
    if (batch->slot < 0 || batch->slot >= int(slots_.size()))
        throw std::logic_error("DataLoader::release(): batch does not belong to this loader");
    Slot& slot = *slots_[size_t(batch->slot)];
    if (copy_to_device_) {
        EMBER_CUDA_CHECK(cudaEventRecord(slot.released->get(), consumer_stream));
        slot.release_recorded = true;
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        // Not held: released twice, or a batch of an epoch start_epoch() already discarded.
        if (slot.state != SlotState::in_use || &slot.batch != batch) return;
        slot.state = SlotState::free;
    }
    // One freed slot is one batch of work: waking every worker would only have them
    // crowd the training thread off its core to find nothing to do.
    work_available_.notify_one();
}

}  // namespace ember::data
