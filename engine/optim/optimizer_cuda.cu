// optimizer_cuda.cu: the multi-tensor optimizer kernels (a per-chunk sum-of-squares
// reduction and the update) and CudaMultiTensorUpdater, which launches them fused or
// once per segment. The arithmetic is update_rules.h's, shared with the cpu path.
#include "engine/optim/optimizer_cuda.h"

#include "engine/core/allocator.h"
#include "engine/core/cuda_check.h"
#include "engine/core/launch.h"
#include "engine/optim/low_precision.h"

#include <cuda_runtime.h>

#include <algorithm>

namespace ember::optim {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 65535;

struct OptimizerChunk {
    unsigned long long start;  // element offset in the flat buffers
    unsigned int length;
    int segment;
};

struct OptimizerSegmentEntry {
    unsigned int flags;
    int first_chunk;
    int chunk_count;
};

// Sum over the block; every thread gets the result. `shared` holds one value per warp.
template <typename T>
__device__ T block_sum(T value, T* shared) {
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
    __syncthreads();  // earlier readers of `shared` are done
    if (lane == 0) shared[warp] = value;
    __syncthreads();
    T total = 0;
    for (int w = 0; w < (int)(blockDim.x / 32); ++w) total += shared[w];
    return total;
}

// partials[3c] = sum of grad^2, partials[3c+1] = sum of param^2 over chunk c.
// NovoGrad (norms_latest non-null): the block of a segment's first chunk also copies
// the segment's latest norm into norms_previous, which the update launch then reads
// while it writes norms_latest — fixed buffers, so a captured CUDA graph replays
// correctly, and no block reads a value another block of the same launch writes.
__global__ void optimizer_reduce_kernel(const OptimizerChunk* __restrict__ chunks,
                                        const OptimizerSegmentEntry* __restrict__ segments, int chunk_begin,
                                        int chunk_end, const float* __restrict__ params,
                                        const float* __restrict__ grads, float* __restrict__ partials,
                                        const float* __restrict__ norms_latest, float* __restrict__ norms_previous) {
    EMBER_SHARED(float, shared, [kThreads / 32]);
    for (int c = chunk_begin + blockIdx.x; c < chunk_end; c += gridDim.x) {
        const OptimizerChunk chunk = chunks[c];
        if (norms_latest && threadIdx.x == 0 && segments[chunk.segment].first_chunk == c)
            norms_previous[chunk.segment] = norms_latest[chunk.segment];
        float grad_squares = 0.0f, param_squares = 0.0f;
        for (unsigned int i = threadIdx.x; i < chunk.length; i += blockDim.x) {
            const float g = grads[chunk.start + i];
            const float p = params[chunk.start + i];
            grad_squares += g * g;
            param_squares += p * p;
        }
        grad_squares = block_sum(grad_squares, shared);
        param_squares = block_sum(param_squares, shared);
        if (threadIdx.x == 0) {
            partials[3 * c] = grad_squares;
            partials[3 * c + 1] = param_squares;
        }
    }
}

struct UpdateBuffers {
    float* params;
    const float* grads;
    float* state0;
    float* state1;
    float* state2;
    float* partials;
    const float* norms_previous;  // NovoGrad per-segment norms of the last step
    float* norms_latest;          // ... and of this one
    const int32_t* skip_flag;
    void* low_precision_params;
    int low_precision;
    int needs_norms;
    int total_chunks;
};

__global__ void optimizer_update_kernel(UpdateParameters u, const OptimizerChunk* __restrict__ chunks,
                                        const OptimizerSegmentEntry* __restrict__ segments, int chunk_begin,
                                        int chunk_end, UpdateBuffers b) {
    EMBER_SHARED(double, shared_double, [kThreads / 32]);
    EMBER_SHARED(float, shared_float, [kThreads / 32]);
    EMBER_SHARED(SegmentFactors, factors);

    if (b.skip_flag && *b.skip_flag != 0) return;  // overflow: nothing changes
    const bool lamb_phase1 = u.kind == OptimizerKind::lamb && u.phase == 1;

    for (int c = chunk_begin + blockIdx.x; c < chunk_end; c += gridDim.x) {
        const OptimizerChunk chunk = chunks[c];
        const OptimizerSegmentEntry segment = segments[chunk.segment];
        double grad_squares = 0.0, param_squares = 0.0, update_squares = 0.0, global_squares = 0.0;
        if (b.needs_norms) {
            for (int k = segment.first_chunk + threadIdx.x; k < segment.first_chunk + segment.chunk_count;
                 k += blockDim.x) {
                grad_squares += b.partials[3 * k];
                param_squares += b.partials[3 * k + 1];
                if (u.kind == OptimizerKind::lamb && u.phase == 2) update_squares += b.partials[3 * k + 2];
            }
            if (lamb_phase1)
                for (int k = threadIdx.x; k < b.total_chunks; k += blockDim.x) global_squares += b.partials[3 * k];
            grad_squares = block_sum(grad_squares, shared_double);
            param_squares = block_sum(param_squares, shared_double);
            update_squares = block_sum(update_squares, shared_double);
            global_squares = block_sum(global_squares, shared_double);
        }
        if (threadIdx.x == 0) {
            const float previous = b.norms_previous ? b.norms_previous[chunk.segment] : 0.0f;
            factors = segment_factors(u, segment.flags, grad_squares, param_squares, update_squares, global_squares,
                                      previous);
        }
        __syncthreads();
        const SegmentFactors f = factors;

        float chunk_update_squares = 0.0f;
        for (unsigned int i = threadIdx.x; i < chunk.length; i += blockDim.x) {
            const std::size_t index = chunk.start + i;
            update_element(u, f, index, b.params, b.grads, b.state0, b.state1, b.state2);
            if (lamb_phase1) {
                const float update = b.state2[index];
                chunk_update_squares += update * update;
            } else if (b.low_precision) {
                store_low_precision(b.low_precision_params, index, b.params[index], b.low_precision);
            }
        }
        if (lamb_phase1) {
            chunk_update_squares = block_sum(chunk_update_squares, shared_float);
            if (threadIdx.x == 0) b.partials[3 * c + 2] = chunk_update_squares;
        }
        if (u.kind == OptimizerKind::novograd && c == segment.first_chunk && threadIdx.x == 0)
            b.norms_latest[chunk.segment] = f.novograd_norm;
        __syncthreads();  // `factors` is rewritten for the next chunk
    }
}

unsigned blocks_for(int chunks) {
    return cuda::grid_stride_blocks(chunks, kMaxBlocks);
}

}  // namespace

CudaMultiTensorUpdater::CudaMultiTensorUpdater(const std::vector<ParameterSegment>& segments,
                                               std::size_t parameter_count, int state_buffers, float initial_state0)
    : parameter_count_(parameter_count), state_buffers_(state_buffers) {
    std::vector<OptimizerChunk> chunks;
    std::vector<OptimizerSegmentEntry> entries;
    for (std::size_t s = 0; s < segments.size(); ++s) {
        OptimizerSegmentEntry entry;
        entry.flags = segments[s].flags;
        entry.first_chunk = (int)chunks.size();
        for (std::size_t start = 0; start < segments[s].length; start += kOptimizerChunkElements) {
            OptimizerChunk chunk;
            chunk.start = segments[s].offset + start;
            chunk.length = (unsigned)std::min(kOptimizerChunkElements, segments[s].length - start);
            chunk.segment = (int)s;
            chunks.push_back(chunk);
        }
        entry.chunk_count = (int)chunks.size() - entry.first_chunk;
        entries.push_back(entry);
        segment_first_chunk_.push_back(entry.first_chunk);
        segment_chunk_count_.push_back(entry.chunk_count);
    }
    chunk_count_ = (int)chunks.size();
    segment_count_ = segments.size();

    const std::size_t bytes = parameter_count_ * sizeof(float);
    for (int b = 0; b < state_buffers_; ++b) {
        // From the device allocator: its peaks, and NVTX memory tools, see the state.
        state_[b] = bytes ? static_cast<float*>(device_allocator().allocate(bytes)) : nullptr;
        if (b == 0 && initial_state0 != 0.0f) {
            std::vector<float> initial(parameter_count_, initial_state0);
            EMBER_CUDA_CHECK(cudaMemcpy(state_[b], initial.data(), bytes, cudaMemcpyHostToDevice));
        } else {
            EMBER_CUDA_CHECK(cudaMemset(state_[b], 0, bytes));
        }
    }
    EMBER_CUDA_CHECK(cudaMalloc(&device_chunks_, chunks.size() * sizeof(OptimizerChunk)));
    EMBER_CUDA_CHECK(
        cudaMemcpy(device_chunks_, chunks.data(), chunks.size() * sizeof(OptimizerChunk), cudaMemcpyHostToDevice));
    EMBER_CUDA_CHECK(cudaMalloc(&device_segments_, entries.size() * sizeof(OptimizerSegmentEntry)));
    EMBER_CUDA_CHECK(cudaMemcpy(device_segments_, entries.data(), entries.size() * sizeof(OptimizerSegmentEntry),
                                cudaMemcpyHostToDevice));
    EMBER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&partials_), chunks.size() * 3 * sizeof(float)));
    EMBER_CUDA_CHECK(cudaMemset(partials_, 0, chunks.size() * 3 * sizeof(float)));
    for (auto& norms : segment_norms_) {
        EMBER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&norms), segments.size() * sizeof(float)));
        EMBER_CUDA_CHECK(cudaMemset(norms, 0, segments.size() * sizeof(float)));
    }
}

CudaMultiTensorUpdater::~CudaMultiTensorUpdater() {
    // No throwing from a destructor: a failed free here has nothing left to protect.
    for (float* buffer : state_)
        if (buffer) device_allocator().free(buffer);
    cudaFree(device_chunks_);
    cudaFree(device_segments_);
    cudaFree(partials_);
    for (float* norms : segment_norms_) cudaFree(norms);
}

void CudaMultiTensorUpdater::download(std::vector<std::vector<float>>& buffers,
                                      std::vector<float>& segment_norms) const {
    buffers.assign(state_buffers_, std::vector<float>(parameter_count_));
    for (int b = 0; b < state_buffers_; ++b)
        EMBER_CUDA_CHECK(
            cudaMemcpy(buffers[b].data(), state_[b], parameter_count_ * sizeof(float), cudaMemcpyDeviceToHost));
    segment_norms.resize(segment_count_);
    EMBER_CUDA_CHECK(cudaMemcpy(segment_norms.data(), segment_norms_[kNormsLatest], segment_count_ * sizeof(float),
                                cudaMemcpyDeviceToHost));
}

void CudaMultiTensorUpdater::upload(const std::vector<std::vector<float>>& buffers,
                                    const std::vector<float>& segment_norms) {
    for (int b = 0; b < state_buffers_; ++b)
        EMBER_CUDA_CHECK(
            cudaMemcpy(state_[b], buffers[b].data(), parameter_count_ * sizeof(float), cudaMemcpyHostToDevice));
    EMBER_CUDA_CHECK(cudaMemcpy(segment_norms_[kNormsLatest], segment_norms.data(), segment_count_ * sizeof(float),
                                cudaMemcpyHostToDevice));
}

int CudaMultiTensorUpdater::step(const UpdateParameters& u, bool fused, float* params, const float* grads,
                                 const StepOptions& options) {
    cudaStream_t stream = static_cast<cudaStream_t>(options.stream);
    const auto* chunks = static_cast<const OptimizerChunk*>(device_chunks_);
    const auto* segments = static_cast<const OptimizerSegmentEntry*>(device_segments_);
    const bool needs_norms =
        u.kind == OptimizerKind::lars || u.kind == OptimizerKind::lamb || u.kind == OptimizerKind::novograd;

    UpdateBuffers b;
    b.params = params;
    b.grads = grads;
    b.state0 = state_[0];
    b.state1 = state_[1];
    b.state2 = state_[2];
    b.partials = partials_;
    b.norms_previous = segment_norms_[kNormsPrevious];
    b.norms_latest = segment_norms_[kNormsLatest];
    b.skip_flag = options.skip_flag;
    b.low_precision_params = options.low_precision_params;
    b.low_precision = (int)options.low_precision;
    b.needs_norms = needs_norms;
    b.total_chunks = chunk_count_;

    int launches = 0;
    auto reduce = [&](int begin, int end) {
        const bool novograd = u.kind == OptimizerKind::novograd;
        EMBER_LAUNCH(optimizer_reduce_kernel, blocks_for(end - begin), kThreads, 0, stream)(
                                                  chunks, segments, begin, end, params, grads, partials_,
                                                  novograd ? segment_norms_[kNormsLatest] : nullptr,
                                                  segment_norms_[kNormsPrevious]);
        EMBER_CUDA_CHECK_LAUNCH();
        ++launches;
    };
    auto update = [&](const UpdateParameters& phase, int begin, int end) {
        EMBER_LAUNCH(optimizer_update_kernel, blocks_for(end - begin), kThreads, 0, stream)(phase, chunks, segments,
                                                                                            begin, end, b);
        EMBER_CUDA_CHECK_LAUNCH();
        ++launches;
    };

    // Ranges: one covering every chunk (fused) or one per segment (per tensor).
    std::vector<std::pair<int, int>> ranges;
    if (fused) {
        ranges.push_back({0, chunk_count_});
    } else {
        for (std::size_t s = 0; s < segment_first_chunk_.size(); ++s)
            ranges.push_back({segment_first_chunk_[s], segment_first_chunk_[s] + segment_chunk_count_[s]});
    }
    if (needs_norms)
        for (const auto& [begin, end] : ranges) reduce(begin, end);
    if (u.kind == OptimizerKind::lamb) {
        UpdateParameters phase = u;
        phase.phase = 1;
        for (const auto& [begin, end] : ranges) update(phase, begin, end);
        phase.phase = 2;
        for (const auto& [begin, end] : ranges) update(phase, begin, end);
    } else {
        for (const auto& [begin, end] : ranges) update(u, begin, end);
    }
    return launches;
}

}  // namespace ember::optim
