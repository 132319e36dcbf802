// synthetic_trace.cpp: the generator behind `ember synth` (see synthetic_trace.h
// for the shape of a step). All randomness comes from one seeded generator per
// rank and all times from a synthetic clock, so output is reproducible.
#include "profiler/synth/synthetic_trace.h"

#include "common/nvtx_contract.h"
#include "profiler/store/writer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace ember::synth {

using namespace ember::trace;

namespace {

// splitmix64: tiny, fast, and the same on every platform (std:: distributions are not).
class Random {
  public:
    explicit Random(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next() {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
    TimeNs between(TimeNs low, TimeNs high) {
        return low + static_cast<TimeNs>(uniform() * static_cast<double>(high - low));
    }
    bool chance(double probability) { return uniform() < probability; }

  private:
    std::uint64_t state_;
};

constexpr TimeNs kMicro = 1000;
constexpr TimeNs kMilli = 1000 * kMicro;
constexpr TimeNs kTraceStart = 1'000'000'000;                    // 1 s on the synthetic clock
constexpr std::int64_t kWallOffset = 1'767'225'600'000'000'000;  // 2026-01-01T00:00:00Z
constexpr int kBatchSize = 128;

// The engine's NVTX categories (common/nvtx_contract.h).
constexpr std::uint32_t kCategoryStep = nvtx::number(nvtx::Category::step);
constexpr std::uint32_t kCategoryCompute = nvtx::number(nvtx::Category::compute);
constexpr std::uint32_t kCategoryDataloader = nvtx::number(nvtx::Category::dataloader);
constexpr std::uint32_t kCategoryCommunication = nvtx::number(nvtx::Category::communication);

struct KernelShape {
    const char* name;
    TimeNs mean_ns;
    LaunchConfig launch;
};

// One layer of the synthetic CNN: its forward kernel and backward kernels.
struct Layer {
    const char* name;
    KernelShape forward;
    std::vector<KernelShape> backward;
    std::uint64_t parameter_bytes;  // gradients all-reduced after its backward
};

// The layers that come twice in the model, with their sizes.
Layer batch_norm_layer(const char* name, TimeNs forward_ns, TimeNs backward_ns, std::uint32_t blocks,
                       std::uint64_t parameter_bytes) {
    return {name,
            {"void at::native::batch_norm_collect_statistics_kernel<float, float, float, int>(...)",
             forward_ns,
             {blocks, 1, 1, 512, 1, 1, 32, 0, 4096}},
            {{"void at::native::batch_norm_backward_kernel<float, float, float, int>(...)",
              backward_ns,
              {blocks, 1, 1, 512, 1, 1, 40, 0, 4096}}},
            parameter_bytes};
}

Layer relu_layer(const char* name, TimeNs forward_ns, TimeNs backward_ns, std::uint32_t blocks) {
    return {name,
            {"void at::native::vectorized_elementwise_kernel<4, at::native::relu_functor<float>>(int, ...)",
             forward_ns,
             {blocks, 1, 1, 128, 1, 1, 16, 0, 0}},
            {{"void at::native::vectorized_elementwise_kernel<4, at::native::threshold_backward<float>>(int, ...)",
              backward_ns,
              {blocks, 1, 1, 128, 1, 1, 16, 0, 0}}},
            0};
}

Layer pool_layer(const char* name, TimeNs forward_ns, TimeNs backward_ns, std::uint32_t blocks) {
    return {name,
            {"void at::native::max_pool_forward_nchw<float>(int, float const*, ...)",
             forward_ns,
             {blocks, 1, 1, 256, 1, 1, 24, 0, 0}},
            {{"void at::native::max_pool_backward_nchw<float>(float const*, long const*, ...)",
              backward_ns,
              {blocks, 1, 1, 256, 1, 1, 24, 0, 0}}},
            0};
}

const std::vector<Layer>& model_layers() {
    static const std::vector<Layer> layers = {
        {"conv1",
         {"void cudnn::cnn::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, "
          "int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, "
          "int, float const*, float const*, bool, int, int)",
          180 * kMicro,
          {196, 1, 1, 128, 1, 1, 64, 8192, 0}},
         {{"void cudnn::detail::dgrad_engine<float, 128, 6, 7, 3, 3, 5, false>(int, int, int, float const*, int, float "
           "const*, int, float*, kernel_grad_params, unsigned long long, int, unsigned long long, int, float, int, int, "
           "int)",
           210 * kMicro,
           {196, 1, 1, 128, 1, 1, 72, 9216, 0}},
          {"void cudnn::detail::wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>(int, int, int, float const*, "
           "int, float*, float const*, kernel_grad_params, unsigned long long, int, float, int, int, int, int)",
           160 * kMicro,
           {32, 4, 1, 512, 1, 1, 80, 12288, 0}}},
         32 * 9 * 4},
        batch_norm_layer("bn1", 40 * kMicro, 55 * kMicro, 32, 64 * 4),
        relu_layer("relu1", 18 * kMicro, 20 * kMicro, 3136),
        pool_layer("pool1", 25 * kMicro, 30 * kMicro, 784),
        {"conv2",
         {"sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_warpgroupsize1x1x1_"
          "execute_segment_k_off_kernel__5x_cudnn",
          240 * kMicro,
          {98, 2, 1, 128, 1, 1, 168, 0, 98304}},
         {{"sm90_xmma_dgrad_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_kernel__5x_cudnn",
           260 * kMicro,
           {98, 2, 1, 128, 1, 1, 168, 0, 98304}},
          {"sm90_xmma_wgrad_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw_tilesize64x64x16_kernel__5x_cudnn",
           220 * kMicro,
           {64, 4, 1, 128, 1, 1, 128, 0, 65536}}},
         64 * 32 * 9 * 4},
        batch_norm_layer("bn2", 35 * kMicro, 45 * kMicro, 64, 128 * 4),
        relu_layer("relu2", 12 * kMicro, 14 * kMicro, 1568),
        pool_layer("pool2", 15 * kMicro, 18 * kMicro, 392),
        {"fc1",
         {"sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_"
          "kernel__5x_cublas",
          60 * kMicro,
          {8, 1, 1, 128, 1, 1, 168, 0, 131072}},
         {{"sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x128x32_kernel__5x_cublas",
           55 * kMicro,
           {8, 1, 1, 128, 1, 1, 168, 0, 98304}},
          {"sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize64x64x32_kernel__5x_cublas",
           50 * kMicro,
           {16, 1, 1, 128, 1, 1, 128, 0, 65536}}},
         3136 * 10 * 4},
        {"loss",
         {"void ember::cuda::softmax_cross_entropy_forward<float>(float const*, int const*, float*, int, int)",
          10 * kMicro,
          {1, 1, 1, 128, 1, 1, 32, 512, 0}},
         {{"void ember::cuda::softmax_cross_entropy_backward<float>(float const*, int const*, float*, int, int)",
           9 * kMicro,
           {1, 1, 1, 128, 1, 1, 32, 512, 0}}},
         0},
    };
    return layers;
}

const KernelShape kAllReduceKernel = {"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                                      0,
                                      {2, 1, 1, 640, 1, 1, 96, 0, 0}};
const KernelShape kAdamKernel = {
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4>, float*, "
    "double, double, double, double, double, bool, bool, float*, float*>(...)",
    45 * kMicro,
    {80, 1, 1, 512, 1, 1, 64, 0, 0}};
const KernelShape kNormKernel = {
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::L2NormFunctor<float, 1>>(...)",
    12 * kMicro,
    {40, 1, 1, 512, 1, 1, 32, 4096, 0}};

// One rank's generator: the main thread's clock, open NVTX ranges, stream queues.
class RankGenerator {
  public:
    RankGenerator(EventSink& sink, const SyntheticTraceOptions& options, int rank)
        : sink_(sink),
          options_(options),
          rank_(rank),
          random_(options.seed * 0x2545f4914f6cdd1dull + static_cast<std::uint64_t>(rank) * 0x9e3779b97f4a7c15ull + 1) {
    }

    SyntheticRankSummary run();

  private:
    struct OpenRange {
        RangeId id;
        TimeNs start;
        StringId name;
        std::uint32_t category;
        std::uint32_t color;
        RangeId parent;
        Payload payload;
    };

    void register_tracks();
    // One training step, phase by phase (the random draws in this order make the trace).
    struct BatchWait {
        TimeNs wait;   // in dataloader/wait
        TimeNs ready;  // when the batch was taken
    };
    void step(std::int64_t index);
    BatchWait wait_for_batch(std::int64_t index);
    void copy_batch(std::int64_t index);
    void forward();
    void backward();
    void wait_for_allreduce(std::int64_t index);
    void optimizer_step();
    void sync_for_loss(std::int64_t index);
    void finish_step(std::int64_t index, TimeNs step_start, const BatchWait& batch);
    void push_range(StringId name, std::uint32_t category, std::uint32_t color, Payload payload = {});
    void pop_range();
    // cudaLaunchKernel on the main thread, the kernel on `stream` after both the
    // launch and the stream's previous work. Returns the kernel's end.
    TimeNs launch(const KernelShape& shape, StringId name, StreamId stream, TimeNs duration);
    TimeNs api_call(StringId name, TimeNs duration, CorrelationId correlation);
    // cudaStreamWaitEvent: the compute stream waits for `stream`'s work so far (CUDA
    // event `event_id`).
    void compute_waits_for(StreamId stream, std::uint64_t event_id);
    StreamId stream_index(StreamId stream) const { return stream == compute_ ? 0 : stream == copy_ ? 1 : 2; }
    TimeNs& busy(StreamId stream) { return stream_busy_[stream_index(stream)]; }
    TimeNs jitter(TimeNs mean) {
        return std::max<TimeNs>(kMicro, static_cast<TimeNs>(mean * (0.85 + 0.3 * random_.uniform())));
    }

    // Sink calls through these count the events.
    template <typename Event, typename Record>
    void emit(const Event& event, Record record) {
        (sink_.*record)(event);
        ++events_;
    }

    EventSink& sink_;
    const SyntheticTraceOptions& options_;
    int rank_;
    Random random_;
    std::int64_t events_ = 0;
    TimeNs now_ = kTraceStart;  // the main thread's clock
    std::array<TimeNs, 3> stream_busy_{};
    CorrelationId next_correlation_ = 1;
    std::vector<OpenRange> open_ranges_;

    ThreadId main_ = 0, workers_[2] = {0, 0}, collector_ = 0;
    StreamId compute_ = 0, copy_ = 0, nccl_ = 0;
    CounterId utilization_ = 0, loss_ = 0, lr_ = 0, throughput_ = 0;
    DeviceId device_ = 0;
    StringId domain_ = 0;
    StringId step_ = 0, forward_ = 0, backward_ = 0, optimizer_ = 0, dataloader_wait_ = 0, allreduce_wait_ = 0,
             allreduce_bucket_ = 0, load_ = 0, decode_ = 0, augment_ = 0, epoch_ = 0;
    StringId launch_kernel_ = 0, memcpy_async_ = 0, memcpy_sync_ = 0, memset_async_ = 0, stream_wait_event_ = 0,
             stream_synchronize_ = 0, cupti_buffer_ = 0;
    std::vector<StringId> forward_layer_names_, backward_layer_names_, forward_kernel_names_;
    std::vector<std::vector<StringId>> backward_kernel_names_;
    StringId allreduce_kernel_ = 0, adam_kernel_ = 0, norm_kernel_ = 0;
    StackId forward_stack_ = 0, backward_stack_ = 0, wait_stack_ = 0, optimizer_stack_ = 0;
    double busy_gpu_ns_in_step_ = 0;
};

void RankGenerator::register_tracks() {
    std::int64_t pid = 10'000 + rank_;
    sink_.register_process({pid, "python train.py"});
    main_ = sink_.register_thread({0, pid, pid, "main"});
    workers_[0] = sink_.register_thread({0, pid, pid + 1, "pt_data_worker 0"});
    workers_[1] = sink_.register_thread({0, pid, pid + 2, "pt_data_worker 1"});
    collector_ = sink_.register_thread({0, pid, pid + 3, "ember collector"});
    device_ = rank_ % 8;
    sink_.register_device({device_, "NVIDIA H100 80GB HBM3",
                           "GPU-5f3c0000-0000-0000-0000-00000000000" + std::to_string(rank_ % 10), 9, 0, 132,
                           85'520'809'984, 3.35e12});
    compute_ = sink_.register_stream({0, device_, 1, 7, 0, "compute"});
    copy_ = sink_.register_stream({0, device_, 1, 13, -1, "copy"});
    nccl_ = sink_.register_stream({0, device_, 1, 21, -1, "nccl"});
    utilization_ = sink_.register_counter({0, "gpu utilization", "%", device_});
    loss_ = sink_.register_counter({0, "loss", "", kNoDevice});
    lr_ = sink_.register_counter({0, "lr", "", kNoDevice});
    throughput_ = sink_.register_counter({0, "samples/s", "samples/s", kNoDevice});

    domain_ = sink_.intern(nvtx::kDomain);
    step_ = sink_.intern(nvtx::range::kStep);
    forward_ = sink_.intern(nvtx::range::kForward);
    backward_ = sink_.intern(nvtx::range::kBackward);
    optimizer_ = sink_.intern(nvtx::range::kOptimizer);
    dataloader_wait_ = sink_.intern(nvtx::range::kDataloaderWait);
    allreduce_wait_ = sink_.intern(nvtx::range::kAllreduceWait);
    allreduce_bucket_ = sink_.intern(nvtx::range::kAllreduceBucket);
    load_ = sink_.intern(nvtx::range::kDataloaderLoad);
    decode_ = sink_.intern(nvtx::range::kDataloaderDecode);
    augment_ = sink_.intern(nvtx::range::kDataloaderAugment);
    epoch_ = sink_.intern("epoch");
    launch_kernel_ = sink_.intern("cudaLaunchKernel");
    memcpy_async_ = sink_.intern("cudaMemcpyAsync");
    memcpy_sync_ = sink_.intern("cudaMemcpy");
    memset_async_ = sink_.intern("cudaMemsetAsync");
    stream_wait_event_ = sink_.intern("cudaStreamWaitEvent");
    stream_synchronize_ = sink_.intern("cudaStreamSynchronize");
    cupti_buffer_ = sink_.intern("cupti buffer");
    for (const Layer& layer : model_layers()) {
        forward_layer_names_.push_back(sink_.intern(layer.name));
        backward_layer_names_.push_back(sink_.intern(std::string(layer.name) + ".backward"));
        forward_kernel_names_.push_back(sink_.intern(layer.forward.name));
        std::vector<StringId> names;
        for (const KernelShape& shape : layer.backward) names.push_back(sink_.intern(shape.name));
        backward_kernel_names_.push_back(names);
    }
    allreduce_kernel_ = sink_.intern(kAllReduceKernel.name);
    adam_kernel_ = sink_.intern(kAdamKernel.name);
    norm_kernel_ = sink_.intern(kNormKernel.name);

    std::string module = "/usr/lib/python3/dist-packages/torch/lib/libtorch_cpu.so";
    FrameId main_frame = sink_.intern_frame("main", "/usr/bin/python3.11", 0x4d2000);
    FrameId loop = sink_.intern_frame("train_one_epoch", "train.py", 0x10);
    FrameId forward = sink_.intern_frame("torch::autograd::Function::forward", module, 0x7f0000a10000);
    FrameId conv = sink_.intern_frame("at::native::cudnn_convolution", module, 0x7f0000a20000);
    FrameId backward = sink_.intern_frame("torch::autograd::Engine::execute", module, 0x7f0000b10000);
    FrameId next_batch = sink_.intern_frame("DataLoader.__next__", "torch/utils/data/dataloader.py", 0x20);
    FrameId wait = sink_.intern_frame("pthread_cond_wait", "/lib/x86_64-linux-gnu/libc.so.6", 0x7f0000c10000);
    FrameId step = sink_.intern_frame("torch::optim::Adam::step", module, 0x7f0000d10000);
    std::vector<FrameId> forward_frames = {main_frame, loop, forward, conv};
    std::vector<FrameId> backward_frames = {main_frame, loop, backward};
    std::vector<FrameId> wait_frames = {main_frame, loop, next_batch, wait};
    std::vector<FrameId> optimizer_frames = {main_frame, loop, step};
    forward_stack_ = sink_.intern_stack(forward_frames);
    backward_stack_ = sink_.intern_stack(backward_frames);
    wait_stack_ = sink_.intern_stack(wait_frames);
    optimizer_stack_ = sink_.intern_stack(optimizer_frames);
}

void RankGenerator::push_range(StringId name, std::uint32_t category, std::uint32_t color, Payload payload) {
    RangeId parent = open_ranges_.empty() ? 0 : open_ranges_.back().id;
    open_ranges_.push_back({sink_.next_range_id(), now_, name, category, color, parent, payload});
}

void RankGenerator::pop_range() {
    OpenRange open = open_ranges_.back();
    open_ranges_.pop_back();
    RangeEvent range;
    range.range_id = open.id;
    range.start_ns = open.start;
    range.end_ns = std::max(now_, open.start + 1);
    range.thread_id = main_;
    range.domain_id = domain_;
    range.name_id = open.name;
    range.category = open.category;
    range.color = open.color;
    range.depth = static_cast<std::int32_t>(open_ranges_.size());
    range.parent_range_id = open.parent;
    range.payload = open.payload;
    emit(range, &EventSink::record_range);
}

TimeNs RankGenerator::api_call(StringId name, TimeNs duration, CorrelationId correlation) {
    ApiEvent call{now_, now_ + duration, main_, correlation, name, 0};
    emit(call, &EventSink::record_api_call);
    now_ += duration;
    return call.start_ns;
}

TimeNs RankGenerator::launch(const KernelShape& shape, StringId name, StreamId stream, TimeNs duration) {
    CorrelationId correlation = next_correlation_++;
    now_ += random_.between(1 * kMicro, 3 * kMicro);  // framework overhead between launches
    TimeNs call_start = api_call(launch_kernel_, random_.between(3 * kMicro, 7 * kMicro), correlation);
    KernelEvent kernel;
    kernel.start_ns = std::max(call_start + random_.between(4 * kMicro, 9 * kMicro), busy(stream) + kMicro);
    kernel.end_ns = kernel.start_ns + duration;
    kernel.device_id = device_;
    kernel.stream_id = stream;
    kernel.correlation_id = correlation;
    kernel.name_id = name;
    kernel.launch = shape.launch;
    emit(kernel, &EventSink::record_kernel);
    busy(stream) = kernel.end_ns;
    busy_gpu_ns_in_step_ += static_cast<double>(duration);
    return kernel.end_ns;
}

// Waiting for the batch: usually short; sometimes a stall (more often on odd ranks,
// whose workers are slower — a straggler for the all-reduce to wait on). Then the
// worker that produced this batch: load, decode, augment, ending just before it was taken.
RankGenerator::BatchWait RankGenerator::wait_for_batch(std::int64_t index) {
    bool stall = random_.chance(rank_ % 2 == 1 ? 0.12 : 0.04);
    TimeNs wait = stall ? random_.between(2 * kMilli, 8 * kMilli) : random_.between(20 * kMicro, 80 * kMicro);
    push_range(dataloader_wait_, kCategoryDataloader, 0xffe8a04cu);
    now_ += wait;
    TimeNs batch_ready = now_;
    pop_range();
    {
        ThreadId worker = workers_[index % 2];
        TimeNs augment = random_.between(300 * kMicro, 600 * kMicro);
        TimeNs decode = random_.between(500 * kMicro, 1200 * kMicro);
        TimeNs load =
            stall ? wait + random_.between(1 * kMilli, 2 * kMilli) : random_.between(800 * kMicro, 2 * kMilli);
        TimeNs end = batch_ready - random_.between(5 * kMicro, 15 * kMicro);
        StringId names[3] = {load_, decode_, augment_};
        TimeNs durations[3] = {load, decode, augment};
        TimeNs start = end - (load + decode + augment);
        for (int i = 0; i < 3; ++i) {
            RangeEvent range;
            range.range_id = sink_.next_range_id();
            range.start_ns = start;
            range.end_ns = start + durations[i];
            range.thread_id = worker;
            range.domain_id = domain_;
            range.name_id = names[i];
            range.category = kCategoryDataloader;
            range.color = 0xffe8a04cu;
            range.payload = Payload::of_integer(kBatchSize);
            emit(range, &EventSink::record_range);
            start = range.end_ns;
        }
    }
    return {wait, batch_ready};
}

// Host-to-device copies: images from the pinned staging buffer (async, copy
// stream), labels from pageable memory (synchronous cudaMemcpy).
void RankGenerator::copy_batch(std::int64_t index) {
    CorrelationId correlation = next_correlation_++;
    std::uint64_t bytes = kBatchSize * 28 * 28 * 4;
    TimeNs call_start = api_call(memcpy_async_, random_.between(4 * kMicro, 8 * kMicro), correlation);
    MemcpyEvent copy{std::max(call_start + 6 * kMicro, busy(copy_) + kMicro),
                     0,
                     device_,
                     copy_,
                     correlation,
                     MemcpyDirection::host_to_device,
                     bytes,
                     MemoryKind::pinned,
                     MemoryKind::device,
                     kNoDevice};
    copy.end_ns = copy.start_ns + static_cast<TimeNs>(bytes / 20.0) + 2 * kMicro;  // ~20 GB/s
    emit(copy, &EventSink::record_memcpy);
    busy(copy_) = copy.end_ns;

    correlation = next_correlation_++;
    std::uint64_t label_bytes = kBatchSize * 8;
    MemcpyEvent labels{0,
                       0,
                       device_,
                       compute_,
                       correlation,
                       MemcpyDirection::host_to_device,
                       label_bytes,
                       MemoryKind::pageable,
                       MemoryKind::device,
                       kNoDevice};
    labels.start_ns = std::max(now_ + 8 * kMicro, busy(compute_) + kMicro);
    labels.end_ns = labels.start_ns + 6 * kMicro;
    // A pageable copy blocks the host until the GPU has done it.
    ApiEvent call{now_, labels.end_ns + 3 * kMicro, main_, correlation, memcpy_sync_, 0};
    emit(call, &EventSink::record_api_call);
    emit(labels, &EventSink::record_memcpy);
    now_ = call.end_ns;
    busy(compute_) = labels.end_ns;

    // The compute stream waits for the image copy.
    compute_waits_for(copy_, static_cast<std::uint64_t>(index * 4 + 1));
}

void RankGenerator::compute_waits_for(StreamId stream, std::uint64_t event_id) {
    const CorrelationId correlation = next_correlation_++;
    const TimeNs wait_start = api_call(stream_wait_event_, 2 * kMicro, correlation);
    SyncEvent sync{wait_start,  std::max(wait_start + kMicro, busy(stream)),
                   device_,     compute_,
                   correlation, SyncKind::stream_wait_event,
                   event_id};
    emit(sync, &EventSink::record_sync);
    busy(compute_) = std::max(busy(compute_), busy(stream));
}

void RankGenerator::forward() {
    const std::vector<Layer>& layers = model_layers();
    push_range(forward_, kCategoryCompute, 0xff59a14fu);
    for (std::size_t i = 0; i < layers.size(); ++i) {
        push_range(forward_layer_names_[i], kCategoryCompute, 0);
        launch(layers[i].forward, forward_kernel_names_[i], compute_, jitter(layers[i].forward.mean_ns));
        pop_range();
    }
    pop_range();
}

// Backward, layer by layer; each gradient bucket all-reduced on the nccl stream once
// its layers are done.
void RankGenerator::backward() {
    const std::vector<Layer>& layers = model_layers();
    push_range(backward_, kCategoryCompute, 0xffb07aa1u);
    std::uint64_t pending_bucket_bytes = 0;
    for (std::size_t back = layers.size(); back-- > 0;) {
        push_range(backward_layer_names_[back], kCategoryCompute, 0);
        for (std::size_t k = 0; k < layers[back].backward.size(); ++k)
            launch(layers[back].backward[k], backward_kernel_names_[back][k], compute_,
                   jitter(layers[back].backward[k].mean_ns));
        pop_range();
        pending_bucket_bytes += layers[back].parameter_bytes;
        // Buckets close after fc1 and after conv1: all-reduce them on the nccl stream.
        bool bucket_ready = (layers[back].name == std::string("fc1") || back == 0) && pending_bucket_bytes > 0;
        if (bucket_ready) {
            push_range(allreduce_bucket_, kCategoryCommunication, 0xffff9da7u,
                       Payload::of_integer(static_cast<std::int64_t>(pending_bucket_bytes)));
            // Ring all-reduce: 2 (R-1)/R of the bytes over ~100 GB/s, plus per-hop latency.
            double ranks = std::max(options_.ranks, 1);
            TimeNs duration = static_cast<TimeNs>(2.0 * (ranks - 1) / ranks * pending_bucket_bytes / 100.0) +
                              static_cast<TimeNs>(8 * kMicro * std::log2(ranks + 1));
            busy(nccl_) = std::max(busy(nccl_), busy(compute_));  // gradients must be ready
            launch(kAllReduceKernel, allreduce_kernel_, nccl_, jitter(duration + 5 * kMicro));
            pop_range();
            pending_bucket_bytes = 0;
        }
    }
    pop_range();
}

// The optimizer needs the reduced gradients: the compute stream waits for nccl.
void RankGenerator::wait_for_allreduce(std::int64_t index) {
    push_range(allreduce_wait_, kCategoryCommunication, 0xffff9da7u);
    compute_waits_for(nccl_, static_cast<std::uint64_t>(index * 4 + 2));
    pop_range();
}

void RankGenerator::optimizer_step() {
    push_range(optimizer_, kCategoryCompute, 0xff76b7b2u);
    launch(kNormKernel, norm_kernel_, compute_, jitter(kNormKernel.mean_ns));
    launch(kAdamKernel, adam_kernel_, compute_, jitter(kAdamKernel.mean_ns));
    {
        CorrelationId correlation = next_correlation_++;
        TimeNs call_start = api_call(memset_async_, random_.between(3 * kMicro, 5 * kMicro), correlation);
        MemsetEvent zero{std::max(call_start + 5 * kMicro, busy(compute_) + kMicro),
                         0,
                         device_,
                         compute_,
                         correlation,
                         1'750'000,
                         0,
                         MemoryKind::device};
        zero.end_ns = zero.start_ns + 4 * kMicro;
        emit(zero, &EventSink::record_memset);
        busy(compute_) = zero.end_ns;
    }
    pop_range();
}

// loss.item() every 10 steps: the host waits for the GPU to catch up.
void RankGenerator::sync_for_loss(std::int64_t index) {
    if (index % 10 != 9) return;
    CorrelationId correlation = next_correlation_++;
    TimeNs target = std::max(now_ + 3 * kMicro, busy(compute_) + 2 * kMicro);
    ApiEvent call{now_, target, main_, correlation, stream_synchronize_, 0};
    SyncEvent sync{now_ + kMicro, target - kMicro, device_, compute_, correlation, SyncKind::stream_synchronize, 0};
    emit(call, &EventSink::record_api_call);
    emit(sync, &EventSink::record_sync);
    now_ = target;
}

// After the step: the counters, the main thread's CPU samples (where a sampling
// profiler would find it), now and then a collector buffer flush and an epoch mark.
void RankGenerator::finish_step(std::int64_t index, TimeNs step_start, const BatchWait& batch) {
    const TimeNs wait = batch.wait;
    const TimeNs batch_ready = batch.ready;
    TimeNs step_time = std::max<TimeNs>(now_ - step_start, 1);
    double utilization = std::min(100.0, 100.0 * busy_gpu_ns_in_step_ / static_cast<double>(step_time));
    double loss = 2.3 * std::exp(-static_cast<double>(index) / 3000.0) + 0.25 + 0.05 * (random_.uniform() - 0.5);
    double lr = 1e-3 * 0.5 * (1.0 + std::cos(3.141592653589793 * static_cast<double>(index % 10000) / 10000.0));
    emit(CounterSample{utilization_, now_, utilization}, &EventSink::record_counter);
    emit(CounterSample{loss_, now_, loss}, &EventSink::record_counter);
    emit(CounterSample{lr_, now_, lr}, &EventSink::record_counter);
    emit(CounterSample{throughput_, now_, kBatchSize * 1e9 / static_cast<double>(step_time)},
         &EventSink::record_counter);

    // CPU samples of the main thread: where a sampling profiler would find it.
    emit(StackSample{batch_ready - wait / 2, main_, wait_stack_}, &EventSink::record_stack_sample);
    emit(StackSample{step_start + (now_ - step_start) / 3, main_, forward_stack_}, &EventSink::record_stack_sample);
    emit(StackSample{step_start + 2 * (now_ - step_start) / 3, main_, backward_stack_},
         &EventSink::record_stack_sample);
    emit(StackSample{now_ - 1, main_, optimizer_stack_}, &EventSink::record_stack_sample);

    if (index % 20 == 19) {
        TimeNs start = now_ - random_.between(100 * kMicro, 300 * kMicro);
        emit(OverheadEvent{start, start + random_.between(50 * kMicro, 200 * kMicro), collector_, cupti_buffer_},
             &EventSink::record_overhead);
    }
    if (index % 100 == 99) {
        emit(MarkEvent{now_, main_, domain_, epoch_, kCategoryStep, 0, Payload::of_integer(index / 100 + 1)},
             &EventSink::record_mark);
    }
}

void RankGenerator::step(std::int64_t index) {
    TimeNs step_start = now_;
    busy_gpu_ns_in_step_ = 0;
    push_range(step_, kCategoryStep, 0xff4c9be8u, Payload::of_integer(index));
    const BatchWait batch = wait_for_batch(index);
    copy_batch(index);
    forward();
    backward();
    wait_for_allreduce(index);
    optimizer_step();
    sync_for_loss(index);
    pop_range();  // step
    finish_step(index, step_start, batch);
}

SyntheticRankSummary RankGenerator::run() {
    register_tracks();
    now_ = kTraceStart + rank_ * 3 * kMicro;
    stream_busy_ = {now_, now_, now_};
    SyntheticRankSummary summary;
    summary.rank = rank_;
    summary.start_ns = now_;
    std::int64_t index = 0;
    while (events_ < options_.events) step(index++);
    summary.events = events_;
    summary.steps = index;
    summary.end_ns = std::max({now_, stream_busy_[0], stream_busy_[1], stream_busy_[2]});
    return summary;
}

}  // namespace

RunInfo synthetic_run_info(const SyntheticTraceOptions& options, int rank) {
    RunInfo run;
    run.command_line = "python train.py --model cnn --batch-size 128 (synthetic, seed " + std::to_string(options.seed) +
                       ", rank " + std::to_string(rank) + ")";
    run.host = "synthetic-node" + std::to_string(rank / 8);
    run.pid = 10'000 + rank;
    run.rank = rank;
    run.world_size = options.ranks;
    run.rank_source = "synthetic";
    run.clock_name = "synthetic";
    run.clock_offset_to_wall_ns = kWallOffset;
    run.start_ns = kTraceStart;
    return run;
}

SyntheticRankSummary generate_synthetic_rank(EventSink& sink, const SyntheticTraceOptions& options, int rank) {
    RankGenerator generator(sink, options, rank);
    return generator.run();
}

std::vector<std::string> synthetic_rank_paths(const std::string& output, int ranks) {
    if (ranks <= 1) return {output};
    std::string stem = output;
    if (stem.size() > 3 && stem.compare(stem.size() - 3, 3, ".db") == 0) stem.resize(stem.size() - 3);
    std::vector<std::string> paths;
    for (int rank = 0; rank < ranks; ++rank) paths.push_back(stem + ".rank" + std::to_string(rank) + ".db");
    return paths;
}

std::vector<SyntheticRankSummary> write_synthetic_traces(const std::string& output,
                                                         const SyntheticTraceOptions& options) {
    if (options.events < 1) throw std::invalid_argument("--events must be at least 1");
    if (options.ranks < 1 || options.ranks > 4096) throw std::invalid_argument("--ranks must be between 1 and 4096");
    std::vector<SyntheticRankSummary> summaries;
    std::vector<std::string> paths = synthetic_rank_paths(output, options.ranks);
    for (int rank = 0; rank < options.ranks; ++rank) {
        store::WriterOptions writer_options;
        writer_options.overflow = store::OverflowPolicy::block;  // a synthetic trace loses nothing
        writer_options.install_signal_handlers = true;
        store::TraceWriter writer(paths[static_cast<std::size_t>(rank)], synthetic_run_info(options, rank),
                                  writer_options);
        WriterSink sink(writer);
        SyntheticRankSummary summary = generate_synthetic_rank(sink, options, rank);
        writer.set_end_time(summary.end_ns);
        writer.close();
        summaries.push_back(summary);
    }
    return summaries;
}

}  // namespace ember::synth
