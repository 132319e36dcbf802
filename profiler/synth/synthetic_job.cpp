// synthetic_job.cpp: see synthetic_job.h. Every random draw is a hash of (seed, rank,
// step, what), so any rank's step can be worked out without the others' generators:
// a plan pass works out, step by step, when each collective ends on every rank (the
// last arrival plus its transfer) and when the next step starts; then each rank's file
// is written alone, in bounded memory, from its own draws and the plan.
#include "profiler/synth/synthetic_job.h"

#include "common/nvtx_contract.h"
#include "profiler/store/writer.h"
#include "profiler/synth/synthetic_trace.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace ember::synth {

using namespace ember::trace;

namespace {

constexpr TimeNs kMicro = 1000;
constexpr TimeNs kMilli = 1000 * kMicro;
constexpr TimeNs kJobStart = 2'000'000'000;                      // true time of step 0
constexpr std::int64_t kWallOffset = 1'767'225'600'000'000'000;  // 2026-01-01T00:00:00Z
constexpr TimeNs kUnknown = std::numeric_limits<TimeNs>::min();

std::uint64_t mix(std::uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// A draw in [0, 1) for (seed, rank, step, what): the same wherever it is asked for.
double draw(std::uint64_t seed, int rank, std::int64_t step, int what) {
    std::uint64_t z = mix(seed);
    z = mix(z ^ static_cast<std::uint64_t>(rank + 1));
    z = mix(z ^ static_cast<std::uint64_t>(step + 1) * 0x100000001b3ull);
    z = mix(z ^ static_cast<std::uint64_t>(what + 1) * 0xc2b2ae3d27d4eb4full);
    return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

struct KernelSpec {
    const char* name;
    TimeNs mean_ns;
};

struct LayerSpec {
    const char* name;
    KernelSpec forward;
    std::vector<KernelSpec> backward;
};

const std::vector<LayerSpec>& layers() {
    static const std::vector<LayerSpec> list = {
        {"conv1",
         {"implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>", 180 * kMicro},
         {{"dgrad_engine<float, 128, 6, 7, 3, 3, 5, false>", 210 * kMicro},
          {"wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>", 160 * kMicro}}},
        {"bn1",
         {"batch_norm_collect_statistics_kernel<float, float, float, int>", 40 * kMicro},
         {{"batch_norm_backward_kernel<float, float, float, int>", 55 * kMicro}}},
        {"relu1",
         {"vectorized_elementwise_kernel<4, relu_functor<float>>", 18 * kMicro},
         {{"vectorized_elementwise_kernel<4, threshold_backward<float>>", 20 * kMicro}}},
        {"conv2",
         {"sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw_kernel__5x_cudnn", 240 * kMicro},
         {{"sm90_xmma_dgrad_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw_kernel__5x_cudnn", 260 * kMicro},
          {"sm90_xmma_wgrad_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw_kernel__5x_cudnn", 220 * kMicro}}},
        {"bn2",
         {"batch_norm_collect_statistics_kernel<float, float, float, int>", 35 * kMicro},
         {{"batch_norm_backward_kernel<float, float, float, int>", 45 * kMicro}}},
        {"fc",
         {"sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_kernel__5x_cublas", 60 * kMicro},
         {{"sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_kernel__5x_cublas", 55 * kMicro},
          {"sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_kernel__5x_cublas", 50 * kMicro}}},
    };
    return list;
}

constexpr const char* kAllReduceKernel =
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
constexpr const char* kOptimizerKernel = "multi_tensor_apply_kernel<FusedSgdMathFunctor<float, 3>>";
constexpr int kBuckets = 2;
constexpr std::size_t kConv2 = 3;         // the straggler's longer kernel: conv2's forward
constexpr std::size_t kBucket0After = 5;  // the first bucket closes after fc's backward

// Draw slots (the `what` of draw()).
enum Slot : int {
    kLoaderWait = 0,
    kEndJitter = 1,  // + bucket
    kTransfer = 3,   // + bucket (job-wide: rank -1)
    kOptimizer = 5,
    kForwardKernel = 100,   // + layer
    kBackwardKernel = 200,  // + 10 * layer + kernel
};

// Receives one rank's events (the plan pass passes none).
struct Emitter {
    virtual ~Emitter() = default;
    virtual RangeId reserve() = 0;  // the id of a range that closes later
    virtual void range(RangeId id, RangeId parent, const char* name, std::uint32_t category, TimeNs start, TimeNs end,
                       int depth, std::int64_t payload) = 0;
    virtual CorrelationId call(TimeNs start, TimeNs end) = 0;
    virtual void kernel(const char* name, bool nccl, TimeNs start, TimeNs end, CorrelationId correlation) = 0;
    // The collective the NCCL kernel just given ran: bucket `bucket` of step `step`.
    virtual void collective(int bucket, std::int64_t step, TimeNs start) = 0;
};

// The job-level times of one step.
struct StepPlan {
    TimeNs start = 0;
    std::vector<TimeNs> collective_end[kBuckets];  // per group of the bucket: last arrival + transfer; empty: unknown
};

// Which ranks all-reduce each bucket together. One dimension: every rank, both buckets.
// Two (tensor_parallel T > 1): bucket 0 within the tensor-parallel group (ranks
// [g*T, g*T+T)), bucket 1 within the data-parallel group (ranks equal modulo T).
struct Groups {
    int ranks = 1, tp = 1;
    int count(int bucket) const { return tp == 1 ? 1 : bucket == 0 ? ranks / tp : tp; }
    int of(int rank, int bucket) const { return tp == 1 ? 0 : bucket == 0 ? rank / tp : rank % tp; }
    std::vector<int> members(int group, int bucket) const {
        std::vector<int> list;
        if (tp == 1) {
            for (int r = 0; r < ranks; ++r) list.push_back(r);
        } else if (bucket == 0) {
            for (int r = group * tp; r < group * tp + tp; ++r) list.push_back(r);
        } else {
            for (int r = group; r < ranks; r += tp) list.push_back(r);
        }
        return list;
    }
};

// One rank's step, on the true clock, as far as the plan knows.
struct RankStep {
    TimeNs arrival[kBuckets] = {kUnknown, kUnknown};
    TimeNs end = kUnknown;
};

class JobModel {
  public:
    explicit JobModel(const SyntheticJobOptions& options)
        : options_(options), groups_{options.ranks, std::max(1, options.tensor_parallel)} {}
    const Groups& groups() const { return groups_; }

    TimeNs jitter(TimeNs mean, int rank, std::int64_t step, int what) const {
        return static_cast<TimeNs>(static_cast<double>(mean) * (0.95 + 0.1 * draw(options_.seed, rank, step, what)));
    }
    TimeNs transfer(std::int64_t step, int bucket) const {
        return 120 * kMicro + static_cast<TimeNs>(80'000.0 * draw(options_.seed, -1, step, kTransfer + bucket));
    }
    TimeNs end_jitter(int rank, std::int64_t step, int bucket) const {
        return static_cast<TimeNs>(2000.0 * draw(options_.seed, rank, step, kEndJitter + bucket));
    }

    // Rank `rank`'s step under `plan`: what the plan already fixes is used, the rest is
    // left kUnknown. With an emitter, every event of the step goes to it (full plan only).
    RankStep step(int rank, std::int64_t index, const StepPlan& plan, Emitter* out) const {
        RankStep result;
        const std::vector<LayerSpec>& list = layers();
        TimeNs host = plan.start;
        TimeNs gpu = plan.start;  // the compute stream
        TimeNs nccl = plan.start;
        auto launch = [&](const char* name, TimeNs duration) {
            const TimeNs call_start = host + 1 * kMicro;
            const TimeNs call_end = call_start + 5 * kMicro;
            const TimeNs start = std::max(call_end + 4 * kMicro, gpu);
            gpu = start + duration;
            if (out) out->kernel(name, false, start, gpu, out->call(call_start, call_end));
            host = call_end + 1 * kMicro;
        };
        const RangeId step_id = out ? out->reserve() : 0;
        RangeId parent = step_id;  // the phase open now
        auto range = [&](const char* name, std::uint32_t category, TimeNs start, int depth, RangeId id = 0) {
            if (out)
                out->range(id ? id : out->reserve(), depth == 1 ? step_id : parent, name, category, start,
                           std::max(host, start + 1), depth, -1);
        };
        const TimeNs step_start = host;
        const TimeNs wait = 20 * kMicro + static_cast<TimeNs>(40'000.0 * draw(options_.seed, rank, index, kLoaderWait));
        host += wait;
        range(nvtx::range::kDataloaderWait.data(), nvtx::number(nvtx::Category::dataloader), step_start, 1);

        const TimeNs forward_start = host;
        const RangeId forward_id = parent = out ? out->reserve() : 0;
        for (std::size_t l = 0; l < list.size(); ++l) {
            const TimeNs layer_start = host;
            TimeNs duration = jitter(list[l].forward.mean_ns, rank, index, kForwardKernel + static_cast<int>(l));
            if (rank == options_.straggler && l == kConv2) duration += options_.straggler_extra_ns;
            launch(list[l].forward.name, duration);
            range(list[l].name, nvtx::number(nvtx::Category::compute), layer_start, 2);
        }
        range(nvtx::range::kForward.data(), nvtx::number(nvtx::Category::compute), forward_start, 1, forward_id);

        const TimeNs backward_start = host;
        const RangeId backward_id = parent = out ? out->reserve() : 0;
        int bucket = 0;
        for (std::size_t back = list.size(); back-- > 0;) {
            const TimeNs layer_start = host;
            for (std::size_t k = 0; k < list[back].backward.size(); ++k)
                launch(list[back].backward[k].name,
                       jitter(list[back].backward[k].mean_ns, rank, index,
                              kBackwardKernel + 10 * static_cast<int>(back) + static_cast<int>(k)));
            range((std::string(list[back].name) + ".backward").c_str(), nvtx::number(nvtx::Category::compute),
                  layer_start, 2);
            if (back != kBucket0After && back != 0) continue;
            // The bucket's all-reduce: its kernel starts once the gradients are ready and
            // the nccl stream is free (its arrival); it ends a transfer after the last arrival.
            const TimeNs bucket_start = host;
            const TimeNs call_start = host + 1 * kMicro, call_end = call_start + 6 * kMicro;
            host = call_end + 1 * kMicro;
            const TimeNs arrival = std::max({gpu, call_end + 4 * kMicro, nccl});
            result.arrival[bucket] = arrival;
            if (plan.collective_end[bucket].empty()) return result;
            const TimeNs collective_end =
                plan.collective_end[bucket][static_cast<std::size_t>(groups_.of(rank, bucket))];
            nccl = collective_end + end_jitter(rank, index, bucket);
            if (out) {
                out->kernel(kAllReduceKernel, true, arrival, nccl, out->call(call_start, call_end));
                out->collective(bucket, index, arrival);
                out->range(out->reserve(), backward_id, nvtx::range::kAllreduceBucket.data(),
                           nvtx::number(nvtx::Category::communication), bucket_start, host, 2,
                           bucket == 0 ? 125'440 : 4'736);
            }
            ++bucket;
        }
        range(nvtx::range::kBackward.data(), nvtx::number(nvtx::Category::compute), backward_start, 1, backward_id);

        // The optimizer waits for the reduced gradients.
        const TimeNs wait_start = host;
        host = std::max(host, nccl) + 3 * kMicro;
        range(nvtx::range::kAllreduceWait.data(), nvtx::number(nvtx::Category::communication), wait_start, 1);
        gpu = std::max(gpu, nccl);
        const TimeNs optimizer_start = host;
        launch(kOptimizerKernel, jitter(45 * kMicro, rank, index, kOptimizer));
        range(nvtx::range::kOptimizer.data(), nvtx::number(nvtx::Category::compute), optimizer_start, 1);
        host = std::max(host, gpu) + 5 * kMicro;  // loss.item(): the host waits for the GPU
        result.end = host;
        if (out)
            out->range(step_id, 0, nvtx::range::kStep.data(), nvtx::number(nvtx::Category::step), step_start, host, 0,
                       index);
        return result;
    }

    // Rank `rank`'s clock: recorded = true + offset. Rank 0 too is off the true time.
    TimeNs clock_offset(int rank) const {
        if (options_.clock_skew_ns == 0) return 0;
        return static_cast<TimeNs>((2.0 * draw(options_.seed, rank, -7, 11) - 1.0) *
                                   static_cast<double>(options_.clock_skew_ns));
    }
    // Its host's wall clock is right to within a millisecond.
    TimeNs wall_error(int rank) const {
        return static_cast<TimeNs>((2.0 * draw(options_.seed, rank, -7, 12) - 1.0) * static_cast<double>(kMilli));
    }

  private:
    const SyntheticJobOptions& options_;
    Groups groups_;
};

// Writes one rank's events through a TraceWriter, shifted onto its own clock.
class WriterEmitter : public Emitter {
  public:
    WriterEmitter(store::TraceWriter& writer, int rank, TimeNs offset, const Groups& groups)
        : writer_(writer), offset_(offset), rank_(rank), groups_(groups) {
        const std::int64_t pid = 20'000 + rank;
        writer_.register_process({pid, "python train.py"});
        main_ = writer_.register_thread({0, pid, pid, "main"});
        const DeviceId device = rank % 8;
        writer_.register_device({device, "NVIDIA H100 80GB HBM3", "", 9, 0, 132, 85'520'809'984, 3.35e12});
        compute_ = writer_.register_stream({0, device, 1, 7, 0, "compute"});
        nccl_ = writer_.register_stream({0, device, 1, 21, -1, "nccl"});
        device_ = device;
        domain_ = writer_.intern(nvtx::kDomain);
        launch_ = writer_.intern("cudaLaunchKernel");
    }
    RangeId reserve() override { return writer_.next_range_id(); }
    void range(RangeId id, RangeId parent, const char* name, std::uint32_t category, TimeNs start, TimeNs end,
               int depth, std::int64_t payload) override {
        RangeEvent event;
        event.range_id = id;
        event.parent_range_id = parent;
        event.start_ns = start + offset_;
        event.end_ns = end + offset_;
        event.thread_id = main_;
        event.domain_id = domain_;
        event.name_id = writer_.intern(name);
        event.category = category;
        event.depth = depth;
        if (payload >= 0) event.payload = Payload::of_integer(payload);
        writer_.record_range(event);
        ++events;
    }
    CorrelationId call(TimeNs start, TimeNs end) override {
        ApiEvent event{start + offset_, end + offset_, main_, next_correlation_++, launch_, 0};
        writer_.record_api_call(event);
        ++events;
        return event.correlation_id;
    }
    void kernel(const char* name, bool nccl, TimeNs start, TimeNs end, CorrelationId correlation) override {
        KernelEvent event;
        event.start_ns = start + offset_;
        event.end_ns = end + offset_;
        event.device_id = device_;
        event.stream_id = nccl ? nccl_ : compute_;
        event.correlation_id = correlation;
        event.name_id = writer_.intern(name);
        writer_.record_kernel(event);
        ++events;
    }
    // Kineto's collective metadata, as PyTorch writes it on the NCCL kernel, for a
    // two-dimensional job: the process groups of a DeviceMesh ("1".."G" tensor-parallel,
    // then the data-parallel ones), the step as the group's sequence number.
    void collective(int bucket, std::int64_t step, TimeNs start) override {
        if (groups_.tp == 1) return;
        const int group = groups_.of(rank_, bucket);
        const std::vector<int> members = groups_.members(group, bucket);
        std::string ranks = "[";
        for (std::size_t i = 0; i < members.size(); ++i) ranks += (i ? ", " : "") + std::to_string(members[i]);
        ranks += "]";
        CollectiveCall call;
        call.start_ns = start + offset_;
        call.track_id = nccl_;
        call.on_stream = true;
        call.name_id = writer_.intern("allreduce");
        call.group_name_id = writer_.intern(std::to_string(1 + group + (bucket == 1 ? groups_.count(0) : 0)));
        call.group_desc_id = writer_.intern(bucket == 0 ? "mesh_tp" : "mesh_dp");
        call.group_ranks_id = writer_.intern(ranks);
        call.group_size = static_cast<std::int32_t>(members.size());
        call.sequence = step + 1;
        call.in_elements = call.out_elements = bucket == 0 ? 125'440 : 4'736;
        call.dtype_id = writer_.intern("Float");
        writer_.record_collective_call(call);
    }
    std::int64_t events = 0;

  private:
    store::TraceWriter& writer_;
    TimeNs offset_;
    ThreadId main_ = 0;
    StreamId compute_ = 0, nccl_ = 0;
    DeviceId device_ = 0;
    StringId domain_ = 0, launch_ = 0;
    CorrelationId next_correlation_ = 1;
    int rank_ = 0;
    Groups groups_;
};

}  // namespace

std::vector<SyntheticJobTruth> write_synthetic_job(const std::string& output, const SyntheticJobOptions& options) {
    if (options.ranks < 2 || options.ranks > 4096) throw std::invalid_argument("a synthetic job needs 2 to 4096 ranks");
    if (options.steps < 1) throw std::invalid_argument("a synthetic job needs at least one step");
    if (options.straggler >= options.ranks)
        throw std::invalid_argument("--straggler " + std::to_string(options.straggler) + " is not a rank of " +
                                    std::to_string(options.ranks));
    if (options.straggler_extra_ns < 0 || options.clock_skew_ns < 0)
        throw std::invalid_argument("--straggler-ms and --clock-skew-ms must not be negative");
    if (options.tensor_parallel < 1 || options.ranks % options.tensor_parallel != 0 ||
        (options.tensor_parallel > 1 && options.tensor_parallel == options.ranks))
        throw std::invalid_argument("--tensor-parallel " + std::to_string(options.tensor_parallel) +
                                    " must divide the " + std::to_string(options.ranks) +
                                    " ranks into two or more groups");
    const JobModel model(options);
    std::vector<SyntheticJobTruth> truth(static_cast<std::size_t>(options.ranks));
    for (int r = 0; r < options.ranks; ++r) {
        truth[static_cast<std::size_t>(r)].rank = r;
        truth[static_cast<std::size_t>(r)].clock_offset_ns = model.clock_offset(r);
    }

    // The plan: step by step, each collective's last arrival, then the next step's start.
    std::vector<StepPlan> plan(static_cast<std::size_t>(options.steps));
    TimeNs start = kJobStart;
    std::vector<TimeNs> arrivals(static_cast<std::size_t>(options.ranks));
    for (std::int64_t k = 0; k < options.steps; ++k) {
        StepPlan& step = plan[static_cast<std::size_t>(k)];
        step.start = start;
        const Groups& groups = model.groups();
        for (int bucket = 0; bucket < kBuckets; ++bucket) {
            for (int r = 0; r < options.ranks; ++r)
                arrivals[static_cast<std::size_t>(r)] = model.step(r, k, step, nullptr).arrival[bucket];
            std::vector<TimeNs> ends;
            for (int group = 0; group < groups.count(bucket); ++group) {
                const std::vector<int> members = groups.members(group, bucket);
                TimeNs last = std::numeric_limits<TimeNs>::min();
                for (int r : members) last = std::max(last, arrivals[static_cast<std::size_t>(r)]);
                std::int64_t at_last = 0;
                TimeNs runner_up = std::numeric_limits<TimeNs>::min();
                for (int r : members) {
                    const TimeNs arrival = arrivals[static_cast<std::size_t>(r)];
                    at_last += arrival == last;
                    if (arrival < last) runner_up = std::max(runner_up, arrival);
                }
                for (int r : members) {
                    SyntheticJobTruth& t = truth[static_cast<std::size_t>(r)];
                    t.wait_ns += last - arrivals[static_cast<std::size_t>(r)];
                    t.collectives += 1;
                    const bool is_last = at_last == 1 && arrivals[static_cast<std::size_t>(r)] == last;
                    t.arrived_last += is_last;
                    t.arrived_last_by_10us += is_last && last - runner_up > 10 * kMicro;
                }
                ends.push_back(last + model.transfer(k, bucket));
            }
            step.collective_end[bucket] = std::move(ends);
        }
        TimeNs next = std::numeric_limits<TimeNs>::min();
        for (int r = 0; r < options.ranks; ++r) next = std::max(next, model.step(r, k, step, nullptr).end);
        start = next + 20 * kMicro;
    }

    // Each rank's file, alone.
    const std::vector<std::string> paths = synthetic_rank_paths(output, options.ranks);
    for (int r = 0; r < options.ranks; ++r) {
        SyntheticJobTruth& t = truth[static_cast<std::size_t>(r)];
        RunInfo run;
        run.command_line = "torchrun train.py (synthetic job, seed " + std::to_string(options.seed) + ")";
        run.host = "synthetic-node" + std::to_string(r / 8);
        run.pid = 20'000 + r;
        run.rank = r;
        run.world_size = options.ranks;
        run.rank_source = "synthetic";
        run.clock_name = "synthetic (skewed per rank)";
        run.clock_offset_to_wall_ns = kWallOffset - t.clock_offset_ns + model.wall_error(r);
        run.start_ns = kJobStart + t.clock_offset_ns;
        store::WriterOptions writer_options;
        writer_options.overflow = store::OverflowPolicy::block;
        store::TraceWriter writer(paths[static_cast<std::size_t>(r)], run, writer_options);
        WriterEmitter emitter(writer, r, t.clock_offset_ns, model.groups());
        TimeNs end = run.start_ns;
        for (std::int64_t k = 0; k < options.steps; ++k)
            end = std::max(end, model.step(r, k, plan[static_cast<std::size_t>(k)], &emitter).end + t.clock_offset_ns);
        writer.set_end_time(end);
        writer.close();
        t.events = emitter.events;
    }
    return truth;
}

}  // namespace ember::synth
