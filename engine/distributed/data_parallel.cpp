// data_parallel.cpp: bucket planning, launching from backward's layer hook, waiting
// and averaging (data_parallel.h).
#include "engine/distributed/data_parallel.h"

#include "engine/distributed/collective_wait.h"

#include "engine/core/cuda_check.h"
#include "engine/core/nvtx.h"
#include "engine/cuda/context.h"
#include "engine/ops/dispatch.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace ember::distributed {

std::vector<GradientBucket> plan_gradient_buckets(const std::vector<nn::ParameterEntry>& entries,
                                                  std::size_t flat_length, std::size_t first_bucket_bytes,
                                                  std::size_t bucket_bytes) {
    std::vector<GradientBucket> buckets;
    if (entries.empty()) return buckets;
    GradientBucket current;
    current.end = flat_length;
    std::size_t current_bytes = 0;
    for (std::size_t i = entries.size(); i-- > 0;) {
        current.first_entry = i;
        current.begin = entries[i].offset;
        ++current.entry_count;
        current_bytes += entries[i].length * sizeof(float);
        const std::size_t limit = buckets.empty() ? first_bucket_bytes : bucket_bytes;
        if (current_bytes >= limit && i > 0) {
            buckets.push_back(current);
            current = GradientBucket{};
            current.end = buckets.back().begin;
            current_bytes = 0;
        }
    }
    current.begin = 0;  // the last bucket reaches down to the buffer's start
    buckets.push_back(current);
    return buckets;
}

Shard shard_of(std::size_t flat_length, int rank, int world_size) {
    Shard shard;
    const std::size_t size =
        (flat_length + static_cast<std::size_t>(world_size) - 1) / static_cast<std::size_t>(world_size);
    shard.padded_size = size;
    shard.begin = std::min(flat_length, size * static_cast<std::size_t>(rank));
    shard.end = std::min(flat_length, shard.begin + size);
    return shard;
}

DataParallel::DataParallel(nn::Model& model, Communicator& communicator, const DataParallelOptions& options)
    : model_(model), communicator_(communicator), options_(options) {
    if (!model.built()) throw std::logic_error("data parallel: model " + model.name() + " is not built");
    nn::ParameterStore& store = model.parameters();
    if (store.master_dtype() != DType::f32) throw std::invalid_argument("data parallel: needs f32 gradients");
    if (options.bucket_bytes == 0 || options.first_bucket_bytes == 0)
        throw std::invalid_argument("data parallel: bucket sizes must be positive");
    buckets_ = plan_gradient_buckets(store.parameters(), store.flat_length(), options.first_bucket_bytes,
                                     options.bucket_bytes);
    if (options.reduction == GradientReduction::reduce_scatter) {
        const Shard shard = shard_of(store.flat_length(), communicator.rank(), communicator.world_size());
        const std::size_t padded = shard.padded_size * static_cast<std::size_t>(communicator.world_size());
        padded_gradients_ = nn::FlatBuffer(store.backend(), padded * sizeof(float), "zero-1 padded gradients");
        padded_gradients_.zero();  // the tail past flat_length stays zero
        shard_gradients_ = nn::FlatBuffer(store.backend(), shard.padded_size * sizeof(float), "zero-1 gradient shard");
    }
}

DataParallel::~DataParallel() {
    for (auto& pending : pending_)
        if (pending) pending->wait();
}

void* DataParallel::stream() const {
    return model_.context().cuda ? model_.context().cuda->stream : nullptr;
}

void DataParallel::broadcast_parameters() {
    nn::ParameterStore& store = model_.parameters();
    if (model_.backend() == Device::cuda) EMBER_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream())));
    communicator_.broadcast(store.master().data(), store.master().bytes(), 0, stream());
    if (store.state_buffer().data() && store.state_buffer().bytes() > 0)
        communicator_.broadcast(store.state_buffer().data(), store.state_buffer().bytes(), 0, stream());
    if (store.low_precision().data()) store.refresh_low_precision(stream());
}

void DataParallel::begin_backward(bool synchronize) {
    synchronizing_ = synchronize;
    next_bucket_ = 0;
    pending_.clear();
    pending_.resize(buckets_.size());
}

void DataParallel::launch_bucket(std::size_t index) {
    const GradientBucket& bucket = buckets_[index];
    nvtx::ScopedRange range(nvtx::range::kAllreduceBucket, nvtx::Category::communication, bucket.bytes());
    float* gradients = model_.parameters().gradients_f32();
    pending_[index] = communicator_.allreduce_sum_async(gradients + bucket.begin, bucket.end - bucket.begin, stream());
    ++collectives_launched_;
}

void DataParallel::layer_gradients_ready(std::size_t layer_index) {
    if (!synchronizing_ || !options_.overlap || options_.reduction != GradientReduction::all_reduce) return;
    const std::size_t final_from = model_.layer_parameter_begin(layer_index);
    while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].first_entry >= final_from) {
        launch_bucket(next_bucket_);
        ++next_bucket_;
    }
    // MPI progresses nonblocking collectives only inside MPI calls: poke the ones in flight.
    for (std::size_t i = 0; i < next_bucket_; ++i)
        if (pending_[i]) pending_[i]->test();
}

void DataParallel::scale_gradients(std::size_t begin, std::size_t end, float factor) {
    float* gradients = model_.parameters().gradients_f32();
    Tensor view = make_tensor(gradients + begin, DType::f32, {static_cast<int64_t>(end - begin)}, model_.backend());
    ops::scale(model_.context(), view, factor);
}

void DataParallel::finish_gradients() {
    if (!synchronizing_) throw std::logic_error("data parallel: finish_gradients without a synchronizing backward");
    synchronizing_ = false;
    const float inverse_world = 1.0f / static_cast<float>(communicator_.world_size());
    nn::ParameterStore& store = model_.parameters();
    if (options_.reduction == GradientReduction::reduce_scatter) {
        const Shard shard = shard_of(store.flat_length(), communicator_.rank(), communicator_.world_size());
        const std::size_t flat_bytes = store.flat_length() * sizeof(float);
        const bool cuda = model_.backend() == Device::cuda;
        cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream());
        if (cuda)
            EMBER_CUDA_CHECK(cudaMemcpyAsync(padded_gradients_.data(), store.gradients_f32(), flat_bytes,
                                             cudaMemcpyDeviceToDevice, cuda_stream));
        else
            std::memcpy(padded_gradients_.data(), store.gradients_f32(), flat_bytes);
        std::unique_ptr<PendingCollective> pending;
        {
            nvtx::ScopedRange range(nvtx::range::kAllreduceBucket, nvtx::Category::communication, flat_bytes);
            pending = communicator_.reduce_scatter_sum_async(static_cast<const float*>(padded_gradients_.data()),
                                                             static_cast<float*>(shard_gradients_.data()),
                                                             shard.padded_size, stream());
            ++collectives_launched_;
        }
        {
            CollectiveWait wait(wait_seconds_);
            pending->wait();
        }
        const std::size_t shard_bytes = (shard.end - shard.begin) * sizeof(float);
        if (shard_bytes > 0) {
            if (cuda)
                EMBER_CUDA_CHECK(cudaMemcpyAsync(store.gradients_f32() + shard.begin, shard_gradients_.data(),
                                                 shard_bytes, cudaMemcpyDeviceToDevice, cuda_stream));
            else
                std::memcpy(store.gradients_f32() + shard.begin, shard_gradients_.data(), shard_bytes);
            scale_gradients(shard.begin, shard.end, inverse_world);
        }
        return;
    }
    while (next_bucket_ < buckets_.size()) {  // overlap off, or a layer the hook never reported
        launch_bucket(next_bucket_);
        ++next_bucket_;
    }
    for (std::size_t i = 0; i < buckets_.size(); ++i) {
        {
            CollectiveWait wait(wait_seconds_, buckets_[i].bytes());
            pending_[i]->wait();
        }
        pending_[i].reset();
        scale_gradients(buckets_[i].begin, buckets_[i].end, inverse_world);
    }
}

nn::GradientRange DataParallel::final_gradients(std::size_t flat_length) const {
    if (options_.reduction != GradientReduction::reduce_scatter) return {0, flat_length};
    const Shard shard = shard_of(flat_length, communicator_.rank(), communicator_.world_size());
    return {shard.begin, shard.end};
}

void DataParallel::sum_over_ranks(float* values, std::size_t count, void* stream) {
    nvtx::ScopedRange range("allreduce/gradient_norm", nvtx::Category::communication, count * sizeof(float));
    communicator_.allreduce_sum(values, count, stream);
}

}  // namespace ember::distributed
