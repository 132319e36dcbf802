// The kernel interpreter's own checks, each shown to catch a deliberately broken kernel
// (test_kernels.cu) and to stay quiet on its correct twin: the off-by-one grid-stride
// bound (bounds check), the missing __syncthreads in a block reduction (race check), the
// wrong shuffle offset (parity against the CPU), divergent barriers (divergence check),
// and the semantics of barriers, warp intrinsics, atomics, dynamic shared memory and
// launch configurations the parity tests rely on.
#include "engine/core/cuda_check.h"
#include "engine/cuda/interpreter/interpreter.h"
#include "tests/engine/cuda_interpreter/test_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace ember::interpreter_test {
namespace {

namespace interpreter = ember::cuda_interpreter;
using interpreter::FindingKind;

// A cudaMalloc'd array of exactly n elements, filled from or copied to the host.
template <class T>
struct DeviceArray {
    T* data = nullptr;
    std::size_t n = 0;
    explicit DeviceArray(std::size_t count) : n(count) {
        EMBER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data), n * sizeof(T)));
    }
    explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
        EMBER_CUDA_CHECK(cudaMemcpy(data, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    }
    ~DeviceArray() { cudaFree(data); }
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;
    std::vector<T> host() const {
        std::vector<T> out(n);
        EMBER_CUDA_CHECK(cudaMemcpy(out.data(), data, n * sizeof(T), cudaMemcpyDeviceToHost));
        return out;
    }
};

std::vector<float> random_floats(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// The findings of `kind` since the last call (all others are dropped, and counted).
std::vector<interpreter::Finding> findings_of(FindingKind kind, int* others = nullptr) {
    std::vector<interpreter::Finding> matching;
    for (auto& finding : interpreter::take_findings()) {
        if (finding.kind == kind)
            matching.push_back(std::move(finding));
        else if (others)
            ++*others;
    }
    return matching;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// Exactly one finding of `kind` since the last look, its message holding every one of
// `parts`; the finding goes to `finding` when one is given.
::testing::AssertionResult one_finding_saying(FindingKind kind, std::initializer_list<const char*> parts,
                                              interpreter::Finding* finding = nullptr) {
    const auto found = findings_of(kind);
    if (found.size() != 1) return ::testing::AssertionFailure() << found.size() << " findings of the kind, not 1";
    for (const char* part : parts)
        if (!contains(found.front().message, part))
            return ::testing::AssertionFailure() << "no \"" << part << "\" in: " << found.front().message;
    if (finding != nullptr) *finding = found.front();
    return ::testing::AssertionSuccess();
}

class InterpreterChecks : public ::testing::Test {
  protected:
    void SetUp() override { interpreter::take_findings(); }
    void TearDown() override { interpreter::set_grid_stride_cap(0); }
};

// ---- bounds ----------------------------------------------------------------------------

TEST_F(InterpreterChecks, GridStrideOffByOneIsAnOutOfBoundsAccessNamingKernelBlockThreadAndAddress) {
    const int n = 1000;
    DeviceArray<float> in(random_floats(n, 1)), out(n);
    // Correct twin first: no finding, every element written.
    ASSERT_EQ(scale_by_two(in.data, out.data, n, 2), cudaSuccess);
    EXPECT_TRUE(interpreter::take_findings().empty());
    // Two blocks of 256: element i = 1000 falls to global thread 1000 - 512 = 488, i.e.
    // block 1, thread 232, on its second trip round the grid-stride loop.
    EXPECT_EQ(scale_by_two_off_by_one(in.data, out.data, n, 2), cudaErrorIllegalAddress);
    const auto found = findings_of(FindingKind::global_out_of_bounds);
    ASSERT_EQ(found.size(), 1u);
    const auto& finding = found.front();
    EXPECT_EQ(finding.kernel, "scale_off_by_one_kernel");
    EXPECT_EQ(finding.block[0], 1u);
    EXPECT_EQ(finding.thread[0], 232u);
    EXPECT_EQ(finding.address, reinterpret_cast<uintptr_t>(in.data + n));
    EXPECT_TRUE(contains(finding.message, "0 bytes past the end of the 4000-byte cudaMalloc block")) << finding.message;
    EXPECT_TRUE(contains(finding.message, "block (1,0,0), thread (232,0,0)")) << finding.message;
}

TEST_F(InterpreterChecks, OutOfBoundsFailsTheLaunchWithTheFindingInTheErrorText) {
    const int n = 37;
    DeviceArray<float> in(random_floats(n, 2)), out(n);
    const cudaError_t error = scale_by_two_off_by_one(in.data, out.data, n, 1);
    ASSERT_EQ(error, cudaErrorIllegalAddress);
    const std::string text = cudaGetErrorString(error);
    EXPECT_TRUE(contains(text, "out-of-bounds read of 4 bytes")) << text;
    EXPECT_TRUE(contains(text, "scale_off_by_one_kernel")) << text;
    interpreter::take_findings();
    // The out-of-bounds store never happened: the thread stopped before the load.
    const auto host = out.host();
    for (int i = 0; i < n; ++i) EXPECT_EQ(host[i], 2.0f * random_floats(n, 2)[i]);
}

TEST_F(InterpreterChecks, HostMemoryIsNotDeviceMemory) {
    std::vector<float> host_in(64, 1.0f);
    DeviceArray<float> out(64);
    EXPECT_EQ(scale_by_two(host_in.data(), out.data, 64, 1), cudaErrorIllegalAddress);
    EXPECT_TRUE(one_finding_saying(FindingKind::global_out_of_bounds,
                                   {"outside every live cudaMalloc and cudaHostAlloc block"}));
}

// ---- races -------------------------------------------------------------------------------

TEST_F(InterpreterChecks, BlockReductionIsRaceFreeAndExact) {
    const auto values = random_floats(1000, 3);
    DeviceArray<float> in(values), out(1);
    ASSERT_EQ(block_sum(in.data, out.data, 1000), cudaSuccess);
    EXPECT_TRUE(interpreter::take_findings().empty());
    const double expected = std::accumulate(values.begin(), values.end(), 0.0);
    EXPECT_NEAR(out.host()[0], expected, 1e-4);
}

TEST_F(InterpreterChecks, MissingSyncthreadsInABlockReductionIsARace) {
    DeviceArray<float> in(random_floats(1000, 4)), out(1);
    EXPECT_EQ(block_sum_missing_barrier(in.data, out.data, 1000), cudaErrorLaunchFailure);
    int others = 0;
    const auto races = findings_of(FindingKind::shared_memory_race, &others);
    ASSERT_FALSE(races.empty());
    EXPECT_EQ(races.front().kernel, "block_sum_missing_barrier_kernel");
    EXPECT_TRUE(contains(races.front().message, "`partial`")) << races.front().message;
    EXPECT_TRUE(contains(races.front().message, "write-after-read")) << races.front().message;
    EXPECT_NE(races.front().address, 0u);
}

TEST_F(InterpreterChecks, MissingLeadingSyncthreadsBetweenTwoReductionsIsARace) {
    DeviceArray<float> in(random_floats(1000, 5)), out(1);
    EXPECT_EQ(block_sum_twice_missing_leading_barrier(in.data, out.data, 1000), cudaErrorLaunchFailure);
    const auto races = findings_of(FindingKind::shared_memory_race);
    ASSERT_FALSE(races.empty());
    EXPECT_TRUE(contains(races.front().message, "write-after-read")) << races.front().message;
}

TEST_F(InterpreterChecks, UninitializedAndOutOfBoundsSharedReads) {
    DeviceArray<int> out(64);
    EXPECT_EQ(uninitialized_shared_read(out.data), cudaErrorLaunchFailure);
    ASSERT_TRUE(one_finding_saying(FindingKind::uninitialized_shared_read, {"`scratch` + "}));  // one per variable

    EXPECT_EQ(shared_index_past_the_end(out.data), cudaErrorLaunchFailure);
    interpreter::Finding past_end;
    ASSERT_TRUE(
        one_finding_saying(FindingKind::shared_out_of_bounds, {"0 bytes past the end of `scratch`"}, &past_end));
    EXPECT_EQ(past_end.thread[0], 63u);
}

// ---- warps ---------------------------------------------------------------------------------

TEST_F(InterpreterChecks, WrongShuffleOffsetFailsParity) {
    const int n = 1000;
    const auto values = random_floats(n, 6);
    std::vector<double> expected((n + 31) / 32, 0.0);
    for (int i = 0; i < n; ++i) expected[i / 32] += values[i];
    auto worst_error = [&](std::vector<float> got) {
        double worst = 0.0;
        for (std::size_t w = 0; w < expected.size(); ++w) worst = std::max(worst, std::fabs(got[w] - expected[w]));
        return worst;
    };
    DeviceArray<float> in(values), out(expected.size());
    ASSERT_EQ(warp_sums(in.data, out.data, n), cudaSuccess);
    EXPECT_LT(worst_error(out.host()), 1e-4);
    // No check fires (the shuffles are legal), but the sums are wrong: parity catches it.
    ASSERT_EQ(warp_sums_wrong_offset(in.data, out.data, n), cudaSuccess);
    EXPECT_GT(worst_error(out.host()), 0.1);
    EXPECT_TRUE(interpreter::take_findings().empty());
}

TEST_F(InterpreterChecks, WarpIntrinsicsExchangeAmongTheLanesOfAWarp) {
    DeviceArray<int> out(64 * 8);
    ASSERT_EQ(warp_intrinsics(out.data), cudaSuccess);
    const auto got = out.host();
    for (int t = 0; t < 64; ++t) {
        const int lane = t % 32, warp_base = t - lane;
        const int* mine = got.data() + 8 * t;
        EXPECT_EQ(mine[0], warp_base + 3) << "shfl thread " << t;
        EXPECT_EQ(mine[1], lane == 0 ? t : t - 1) << "shfl_up thread " << t;
        EXPECT_EQ(mine[2], lane == 31 ? t : t + 1) << "shfl_down thread " << t;
        EXPECT_EQ(mine[3], t ^ 1) << "shfl_xor width 8 thread " << t;
        EXPECT_EQ(static_cast<unsigned>(mine[4]), 0xaaaaaaaau) << "ballot thread " << t;
        EXPECT_EQ(mine[5], 1) << "any thread " << t;
        EXPECT_EQ(mine[6], 1) << "all thread " << t;
        EXPECT_EQ(mine[7], 32) << "__syncthreads_count thread " << t;
    }
    EXPECT_TRUE(interpreter::take_findings().empty());
}

TEST_F(InterpreterChecks, ShuffleFromALaneOutsideTheMask) {
    DeviceArray<int> out(32);
    EXPECT_EQ(shuffle_outside_mask(out.data), cudaErrorLaunchFailure);
    EXPECT_TRUE(
        one_finding_saying(FindingKind::warp_divergence, {"reads lane 20, which is not in the mask 0x0000ffff"}));
}

// ---- barriers --------------------------------------------------------------------------------

TEST_F(InterpreterChecks, ThreadsReturningBeforeABarrierAreDivergence) {
    DeviceArray<int> out(64);
    EXPECT_EQ(divergent_barrier(out.data, Divergence::threads_return_early), cudaErrorLaunchFailure);
    interpreter::Finding found;
    ASSERT_TRUE(one_finding_saying(FindingKind::barrier_divergence,
                                   {"16 thread(s) returned without reaching the __syncthreads"}, &found));
    EXPECT_EQ(found.thread[0], 48u);  // the first thread that returned
}

TEST_F(InterpreterChecks, ThreadsMeetingAtDifferentBarriersAreDivergence) {
    DeviceArray<int> out(64);
    EXPECT_EQ(divergent_barrier(out.data, Divergence::different_call_sites), cudaErrorLaunchFailure);
    EXPECT_TRUE(one_finding_saying(FindingKind::barrier_divergence, {"32 at test_kernels.cu"}));
}

TEST_F(InterpreterChecks, ABlockThatCannotGoOnIsReportedNotHung) {
    DeviceArray<int> out(64);
    EXPECT_EQ(divergent_barrier(out.data, Divergence::barrier_against_syncwarp), cudaErrorLaunchFailure);
    EXPECT_TRUE(one_finding_saying(FindingKind::barrier_divergence,
                                   {"cannot go on", "wait in __syncthreads", "wait in a warp intrinsic"}));
    // The interpreter is usable afterwards.
    DeviceArray<float> in(random_floats(64, 7)), scaled(64);
    EXPECT_EQ(scale_by_two(in.data, scaled.data, 64, 1), cudaSuccess);
}

// ---- memory, atomics, launches -------------------------------------------------------------------

TEST_F(InterpreterChecks, DynamicSharedMemory) {
    for (int n : {1, 37, 256, 1024}) {
        std::vector<int> values(n);
        std::iota(values.begin(), values.end(), 100);
        DeviceArray<int> in(values), out(n);
        ASSERT_EQ(reverse_through_dynamic_shared(in.data, out.data, n), cudaSuccess) << n;
        const auto got = out.host();
        for (int i = 0; i < n; ++i) EXPECT_EQ(got[i], values[n - 1 - i]) << n << " " << i;
    }
    EXPECT_TRUE(interpreter::take_findings().empty());
}

TEST_F(InterpreterChecks, AtomicsAcrossBlocksOnSeveralWorkers) {
    const int n = 5000, bins = 7;
    std::vector<int> values(n);
    for (int i = 0; i < n; ++i) values[i] = (i * 7919) % 1009;
    DeviceArray<int> d_values(values), counts(std::vector<int>(bins, 0)), maximum(std::vector<int>{-1});
    DeviceArray<float> weights(std::vector<float>(bins, 0.0f));
    DeviceArray<unsigned> counter(std::vector<unsigned>{0});
    ASSERT_EQ(atomic_histogram(d_values.data, n, bins, counts.data, weights.data, maximum.data, counter.data, 9),
              cudaSuccess);
    std::vector<int> expected(bins, 0);
    for (int v : values) ++expected[v % bins];
    EXPECT_EQ(counts.host(), expected);
    const auto w = weights.host();
    for (int b = 0; b < bins; ++b) EXPECT_FLOAT_EQ(w[b], 0.5f * expected[b]);
    EXPECT_EQ(maximum.host()[0], *std::max_element(values.begin(), values.end()));
    EXPECT_EQ(counter.host()[0], unsigned(n));
}

// Each CUDA atomic, under every value type the interpreter gives it, against the same
// operations applied one value at a time on the host.
TEST_F(InterpreterChecks, EveryAtomicUnderEachValueType) {
    const int n = 3000;
    std::vector<int> values(n);
    for (int i = 0; i < n; ++i) values[i] = 1 + (i * 7919) % 100003;
    DeviceArray<int> d_values(values);
    DeviceArray<AtomicResults> results(std::vector<AtomicResults>(1));
    ASSERT_EQ(every_atomic(d_values.data, n, results.data, 7), cudaSuccess);
    const AtomicResults got = results.host()[0];

    AtomicResults expected;
    unsigned long long value_sum = 0;
    for (int v : values) {
        const unsigned u = static_cast<unsigned>(v);
        expected.sub_int -= v;
        expected.sub_unsigned -= u;
        expected.add_unsigned += u;
        expected.add_ull += static_cast<unsigned long long>(v);
        expected.add_double += 0.25 * v;  // quarters of integers: every order sums exactly
        expected.min_int = std::min(expected.min_int, v);
        expected.min_unsigned = std::min(expected.min_unsigned, u);
        expected.max_unsigned = std::max(expected.max_unsigned, u);
        expected.or_int |= 1 << (v % 31);
        expected.or_unsigned |= 1u << (v % 32);
        expected.and_int &= ~(1 << (v % 29));
        expected.and_unsigned &= ~(1u << (v % 30));
        expected.xor_int ^= v;
        expected.xor_unsigned ^= u * 2654435761u;
        value_sum += static_cast<unsigned long long>(v);
    }
    EXPECT_EQ(got.sub_int, expected.sub_int);
    EXPECT_EQ(got.sub_unsigned, expected.sub_unsigned);
    EXPECT_EQ(got.add_unsigned, expected.add_unsigned);
    EXPECT_EQ(got.add_ull, expected.add_ull);
    EXPECT_EQ(got.add_double, expected.add_double);
    EXPECT_EQ(got.min_int, expected.min_int);
    EXPECT_EQ(got.min_unsigned, expected.min_unsigned);
    EXPECT_EQ(got.max_unsigned, expected.max_unsigned);
    EXPECT_EQ(got.or_int, expected.or_int);
    EXPECT_EQ(got.or_unsigned, expected.or_unsigned);
    EXPECT_EQ(got.and_int, expected.and_int);
    EXPECT_EQ(got.and_unsigned, expected.and_unsigned);
    EXPECT_EQ(got.xor_int, expected.xor_int);
    EXPECT_EQ(got.xor_unsigned, expected.xor_unsigned);
    // Each exchange hands back the value it replaced: the returned values and the one
    // left in place are the starting 0 and every value, once each (per exchange).
    const unsigned long long left = static_cast<unsigned long long>(got.exchange_int) + got.exchange_unsigned +
                                    got.exchange_ull + static_cast<unsigned long long>(got.exchange_float);
    EXPECT_EQ(got.exchanged_sum + left, 4 * value_sum);
    EXPECT_EQ(got.cas_int, n);
    EXPECT_EQ(got.cas_ull, 2ull * n);
    EXPECT_TRUE(interpreter::take_findings().empty());
}

TEST_F(InterpreterChecks, GridStrideLoopOverManyTrips) {
    const int n = 100000;
    const auto values = random_floats(n, 8);
    DeviceArray<float> in(values), out(n);
    // 3 blocks for 100000 elements: each thread goes round the loop ~130 times.
    ASSERT_EQ(scale_by_two(in.data, out.data, n, 3), cudaSuccess);
    const auto got = out.host();
    for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], 2.0f * values[i]) << i;
}

TEST_F(InterpreterChecks, InvalidLaunchConfigurationsFailLikeOnADevice) {
    DeviceArray<float> in(random_floats(8, 9)), out(8);
    EXPECT_EQ(launch_with(dim3(1), dim3(2048), 0, in.data, out.data, 8), cudaErrorInvalidConfiguration);
    EXPECT_TRUE(contains(cudaGetErrorString(cudaErrorInvalidConfiguration), "block (2048,1,1) exceeds"));
    EXPECT_EQ(launch_with(dim3(1), dim3(32, 32, 2), 0, in.data, out.data, 8), cudaErrorInvalidConfiguration);
    EXPECT_TRUE(contains(cudaGetErrorString(cudaErrorInvalidConfiguration), "more than 1024 threads"));
    EXPECT_EQ(launch_with(dim3(0), dim3(32), 0, in.data, out.data, 8), cudaErrorInvalidConfiguration);
    EXPECT_EQ(launch_with(dim3(1, 70000), dim3(32), 0, in.data, out.data, 8), cudaErrorInvalidConfiguration);
    EXPECT_EQ(launch_with(dim3(1), dim3(32), 64 * 1024, in.data, out.data, 8), cudaErrorInvalidConfiguration);
    EXPECT_EQ(launch_with(dim3(1), dim3(8), 0, in.data, out.data, 8), cudaSuccess);
    EXPECT_EQ(launch_with(dim3(1), dim3(7, 3, 2), 0, in.data, out.data, 8), cudaSuccess);  // 42 threads, 2 warps
}

}  // namespace
}  // namespace ember::interpreter_test
