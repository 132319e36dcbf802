// gpu_resident.cu: the gather + augment kernel, its CPU twin, and GpuResidentLoader.
#include "engine/data/gpu_resident.h"

#include "engine/core/cuda_check.h"
#include "engine/core/device.h"
#include "engine/core/launch.h"
#include "engine/core/nvtx.h"
#include "engine/core/stream.h"
#include "engine/data/staging_buffer.h"

#include <cuda_runtime.h>

#include <chrono>
#include <stdexcept>
#include <string>

namespace ember::data {

namespace {

// One thread per output pixel; grid-stride so any batch size fits any grid.
__global__ void gather_augment_kernel(const uint8_t* pixels, const int32_t* labels, int channels, int height, int width,
                                      const int64_t* indices, int64_t count, AugmentOptions options, int64_t epoch,
                                      float* out_images, int32_t* out_labels) {
    const int64_t per_sample = int64_t(channels) * height * width;
    const int64_t total = count * per_sample;
    const float inv_std = 1.0f / options.std;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
        int64_t sample = i / per_sample;
        int64_t within = i - sample * per_sample;
        int c = int(within / (int64_t(height) * width));
        int y = int((within / width) % height);
        int x = int(within % width);
        int64_t source_index = indices[sample];
        SampleTransform t = sample_transform(options, epoch, source_index);
        out_images[i] = augmented_pixel(pixels + source_index * per_sample, height, width, c, y, x, t,
                                        options.crop_padding, options.mean, inv_std);
        if (within == 0) out_labels[sample] = labels[source_index];
    }
}

}  // namespace

void gather_augment_cpu(const uint8_t* pixels, const int32_t* labels, ImageShape shape, const int64_t* indices,
                        int64_t count, const AugmentOptions& options, int64_t epoch, float* out_images,
                        int32_t* out_labels) {
    const int64_t per_sample = shape.pixels();
    for (int64_t s = 0; s < count; ++s) {
        augment_sample_cpu(pixels + indices[s] * per_sample, shape.channels, shape.height, shape.width, options, epoch,
                           indices[s], out_images + s * per_sample);
        out_labels[s] = labels[indices[s]];
    }
}

void gather_augment_cuda(const uint8_t* pixels, const int32_t* labels, ImageShape shape, const int64_t* indices,
                         int64_t count, const AugmentOptions& options, int64_t epoch, float* out_images,
                         int32_t* out_labels, CUstream_st* stream) {
    int64_t total = count * shape.pixels();
    if (total == 0) return;
    const int threads = 256;
    const unsigned blocks = cuda::grid_stride_blocks((total + threads - 1) / threads, 65535 * 8);
    EMBER_LAUNCH(gather_augment_kernel, blocks, threads, 0, stream)(pixels, labels, shape.channels, shape.height,
                                                                    shape.width, indices, count, options, epoch,
                                                                    out_images, out_labels);
    EMBER_CUDA_CHECK_LAUNCH();
}

// Two slots: the training loop holds one batch while the next is built.
struct GpuResidentLoader::State {
    struct Slot {
        HostBuffer host_indices;  // pinned, source of the index copy
        DeviceBuffer indices;
        DeviceBuffer images;
        DeviceBuffer labels;
        Event ready{false};  // timing-free: ordering only
        Event released{false};
        bool ready_pending = false;
        bool release_recorded = false;
        bool in_use = false;
        Batch batch;
    };
    DeviceBuffer pixels;
    DeviceBuffer labels;
    Stream stream;  // non-blocking
    Slot slots[2];
};

GpuResidentLoader::GpuResidentLoader(const InMemoryDataset& dataset, std::shared_ptr<const Sampler> sampler,
                                     int64_t batch_size, bool drop_last, AugmentOptions augment)
    : sampler_(std::move(sampler)),
      batch_size_(batch_size),
      drop_last_(drop_last),
      augment_(augment),
      shape_(dataset.shape()) {
    if (!cuda_usable())
        throw std::runtime_error("GPU-resident data: no CUDA device (" + cuda_runtime_status().reason + ")");
    if (batch_size_ <= 0) throw std::invalid_argument("GpuResidentLoader: batch_size must be > 0");
    state_ = std::make_unique<State>();
    size_t pixel_bytes = size_t(dataset.size() * shape_.pixels());
    state_->pixels = DeviceBuffer(pixel_bytes);
    state_->labels = DeviceBuffer(size_t(dataset.size()) * sizeof(int32_t));
    EMBER_CUDA_CHECK(cudaMemcpy(state_->pixels.data(), dataset.pixels(), pixel_bytes, cudaMemcpyHostToDevice));
    EMBER_CUDA_CHECK(cudaMemcpy(state_->labels.data(), dataset.labels().data(),
                                size_t(dataset.size()) * sizeof(int32_t), cudaMemcpyHostToDevice));
    for (State::Slot& slot : state_->slots) {
        slot.host_indices = HostBuffer(size_t(batch_size_) * sizeof(int64_t), true);
        slot.indices = DeviceBuffer(size_t(batch_size_) * sizeof(int64_t));
        slot.images = DeviceBuffer(size_t(batch_size_ * shape_.pixels()) * sizeof(float));
        slot.labels = DeviceBuffer(size_t(batch_size_) * sizeof(int32_t));
    }
}

GpuResidentLoader::~GpuResidentLoader() {
    if (state_) cudaStreamSynchronize(state_->stream.get());
}

size_t GpuResidentLoader::resident_bytes() const {
    return state_->pixels.bytes() + state_->labels.bytes();
}

int64_t GpuResidentLoader::batches_per_epoch() const {
    const int64_t length = sampler_->length();
    return drop_last_ ? length / batch_size_ : (length + batch_size_ - 1) / batch_size_;
}

void GpuResidentLoader::start_epoch(int64_t epoch) {
    batches_ = make_batches(sampler_->epoch_indices(epoch), batch_size_, drop_last_);
    epoch_ = epoch;
    next_batch_ = 0;
    for (State::Slot& slot : state_->slots) slot.in_use = false;
}

const Batch* GpuResidentLoader::next() {
    if (next_batch_ >= int64_t(batches_.size())) return nullptr;
    const int64_t batch_number = next_batch_;
    State::Slot& slot = state_->slots[batch_number % 2];
    if (slot.in_use)
        throw std::logic_error("GpuResidentLoader::next(): both slots are held; release() the older batch");
    auto start = std::chrono::steady_clock::now();
    {
        // The host only enqueues work here; the wait the GPU sees is the kernel itself.
        nvtx::ScopedRange wait(nvtx::range::kDataloaderWait, nvtx::Category::dataloader);
        nvtx::ScopedRange load(nvtx::range::kDataloaderLoad, nvtx::Category::dataloader, uint64_t(batch_number));
        const std::vector<int64_t>& indices = batches_[size_t(batch_number)];
        int64_t count = int64_t(indices.size());
        cudaStream_t stream = state_->stream.get();
        if (slot.ready_pending) EMBER_CUDA_CHECK(cudaEventSynchronize(slot.ready.get()));  // host_indices reusable
        auto* host_indices = static_cast<int64_t*>(slot.host_indices.data());
        for (int64_t i = 0; i < count; ++i) host_indices[i] = indices[size_t(i)];
        if (slot.release_recorded) EMBER_CUDA_CHECK(cudaStreamWaitEvent(stream, slot.released.get(), 0));
        {
            nvtx::ScopedRange h2d(nvtx::range::kDataloaderH2d, nvtx::Category::dataloader);
            EMBER_CUDA_CHECK(cudaMemcpyAsync(slot.indices.data(), host_indices, size_t(count) * sizeof(int64_t),
                                             cudaMemcpyHostToDevice, stream));
        }
        {
            nvtx::ScopedRange augment(nvtx::range::kDataloaderAugment, nvtx::Category::dataloader);
            gather_augment_cuda(
                static_cast<const uint8_t*>(state_->pixels.data()), static_cast<const int32_t*>(state_->labels.data()),
                shape_, static_cast<const int64_t*>(slot.indices.data()), count, augment_, epoch_,
                static_cast<float*>(slot.images.data()), static_cast<int32_t*>(slot.labels.data()), stream);
        }
        EMBER_CUDA_CHECK(cudaEventRecord(slot.ready.get(), stream));
        slot.ready_pending = true;
        Batch& batch = slot.batch;
        batch = Batch{};
        batch.epoch = epoch_;
        batch.index = batch_number;
        batch.size = count;
        batch.shape = shape_;
        batch.sample_indices = host_indices;
        batch.pinned = slot.host_indices.pinned();
        batch.device_images = static_cast<const float*>(slot.images.data());
        batch.device_labels = static_cast<const int32_t*>(slot.labels.data());
        batch.ready = slot.ready.get();
        batch.slot = int(batch_number % 2);
    }
    stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++stats_.batches;
    slot.in_use = true;
    ++next_batch_;
    return &slot.batch;
}

void GpuResidentLoader::release(const Batch* batch, CUstream_st* consumer_stream) {
    if (batch == nullptr || batch->slot < 0 || batch->slot > 1) return;
    State::Slot& slot = state_->slots[batch->slot];
    if (!slot.in_use) return;
    EMBER_CUDA_CHECK(cudaEventRecord(slot.released.get(), consumer_stream));
    slot.release_recorded = true;
    slot.in_use = false;
}

}  // namespace ember::data
