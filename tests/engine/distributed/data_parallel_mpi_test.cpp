// data_parallel_mpi_test.cpp: runs under `mpirun -np N` (N = 1, 2, 4). Checks the MPI
// collectives against their definitions, and that data parallel training equals one
// process training on the union of every rank's batch:
//   - DDP gradients after all-reduce == the single-process gradient of the union batch
//   - overlap on and off give bit-identical parameters; accumulation micro-batches
//     communicate nothing
//   - ZeRO-1 (reduce-scatter, sharded AdamW, all-gather) parameters == DDP's after k steps
#include "engine/distributed/communicator.h"
#include "engine/distributed/data_parallel.h"
#include "engine/distributed/sharded_optimizer.h"
#include "engine/nn/training_step.h"
#include "tests/engine/distributed/test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace ember::distributed {
namespace {

using test::Batch;

Communicator& world() {
    static std::unique_ptr<Communicator> communicator = make_mpi_communicator();
    return *communicator;
}

// Largest |a - b| relative to the largest |b|.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
    double largest = 1e-30, difference = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        largest = std::max(largest, static_cast<double>(std::fabs(b[i])));
        difference = std::max(difference, static_cast<double>(std::fabs(a[i] - b[i])));
    }
    return difference / largest;
}

TEST(MpiCommunicator, CollectivesMatchTheirDefinitions) {
    Communicator& comm = world();
    const int n = comm.world_size(), r = comm.rank();
    const std::size_t count = 1000;
    std::vector<float> data(count);
    for (std::size_t i = 0; i < count; ++i) data[i] = static_cast<float>(r + 1) + static_cast<float>(i);
    comm.allreduce_sum(data.data(), count);
    for (std::size_t i = 0; i < count; ++i)
        ASSERT_EQ(data[i], static_cast<float>(n * (n + 1) / 2) + static_cast<float>(n) * static_cast<float>(i));

    // reduce-scatter: block b of every rank holds (rank + 1) * (b + 1); rank r gets block r's sum.
    std::vector<float> send(count * static_cast<std::size_t>(n)), receive(count);
    for (int b = 0; b < n; ++b)
        std::fill_n(send.begin() + b * static_cast<std::ptrdiff_t>(count), count,
                    static_cast<float>((r + 1) * (b + 1)));
    comm.reduce_scatter_sum(send.data(), receive.data(), count);
    for (float value : receive) ASSERT_EQ(value, static_cast<float>(n * (n + 1) / 2 * (r + 1)));

    // all-gather, out of place and in place.
    std::vector<float> mine(count, static_cast<float>(r)), gathered(count * static_cast<std::size_t>(n), -1.0f);
    comm.all_gather(mine.data(), gathered.data(), count);
    for (std::size_t i = 0; i < gathered.size(); ++i) ASSERT_EQ(gathered[i], static_cast<float>(i / count));
    std::vector<float> in_place(count * static_cast<std::size_t>(n), -1.0f);
    std::fill_n(in_place.begin() + r * static_cast<std::ptrdiff_t>(count), count, static_cast<float>(r) + 0.5f);
    comm.all_gather(in_place.data() + r * count, in_place.data(), count);
    for (std::size_t i = 0; i < in_place.size(); ++i) ASSERT_EQ(in_place[i], static_cast<float>(i / count) + 0.5f);

    int64_t token = r == 0 ? 424242 : 0;
    comm.broadcast(&token, sizeof(token), 0, nullptr);
    EXPECT_EQ(token, 424242);
    comm.barrier();
}

TEST(DataParallel, GradientsEqualTheUnionBatchGradient) {
    Communicator& comm = world();
    const int64_t local = 6, total = local * comm.world_size();
    Batch batch = test::make_union_batch(total, 11);

    // Reference: one process, the union batch, gradient of the mean loss.
    auto reference = test::built_model("mlp");
    {
        Tensor logits = reference->forward(batch.images_tensor(0, total), true);
        nn::LossOutput out = reference->loss(logits, batch.labels_tensor(0, total), 1.0f / static_cast<float>(total));
        reference->backward(out.dlogits, ops::GradWrite::store);
    }
    const std::size_t n = reference->parameters().flat_length();
    std::vector<float> expected = test::copy_of(reference->parameters().gradients(), n);

    for (bool overlap : {true, false}) {
        auto model = test::built_model("mlp");
        DataParallelOptions options;
        options.first_bucket_bytes = 1u << 10;  // small buckets: several all-reduces in flight
        options.bucket_bytes = 4u << 10;
        options.overlap = overlap;
        DataParallel ddp(*model, comm, options);
        ASSERT_GE(ddp.buckets().size(), 3u);
        model->set_gradients_ready_callback([&](std::size_t layer) { ddp.layer_gradients_ready(layer); });
        const int64_t first = local * comm.rank();
        Tensor logits = model->forward(batch.images_tensor(first, local), true);
        nn::LossOutput out = model->loss(logits, batch.labels_tensor(first, local), 1.0f / static_cast<float>(local));
        ddp.begin_backward(true);
        model->backward(out.dlogits, ops::GradWrite::store);
        ddp.finish_gradients();
        std::vector<float> actual = test::copy_of(model->parameters().gradients(), n);
        EXPECT_LT(relative_difference(actual, expected), 1e-5) << "overlap " << overlap;
        EXPECT_EQ(ddp.collectives_launched(), static_cast<int64_t>(ddp.buckets().size()));
    }
}

TEST(DataParallel, BucketsTileTheBufferInReverseOrder) {
    auto model = test::built_model("mlp");
    const auto& entries = model->parameters().parameters();
    auto buckets = plan_gradient_buckets(entries, model->parameters().flat_length(), 1024, 8192);
    ASSERT_FALSE(buckets.empty());
    EXPECT_EQ(buckets.front().end, model->parameters().flat_length());
    EXPECT_EQ(buckets.back().begin, 0u);
    EXPECT_EQ(buckets.front().first_entry + buckets.front().entry_count, entries.size());  // last tensors first
    for (std::size_t i = 1; i < buckets.size(); ++i) EXPECT_EQ(buckets[i].end, buckets[i - 1].begin);
}

struct TrainedParameters {
    std::vector<float> parameters;
    int64_t collectives = 0;
    optim::OptimizerState state;  // full optimizer state (gathered from the shards under ZeRO-1)
};

// k steps with accumulation 2: single process on the union batch of `union_ranks`
// ranks (comm null), or data parallel on this rank's slice. AdamW by default; SGD with
// momentum where parameters are compared with a single process (Adam divides by the
// gradient's magnitude, so rounding differences of near-zero gradients grow to ~lr).
TrainedParameters train(Communicator* comm, bool overlap, bool zero1, int steps, int union_ranks = 1,
                        const std::string& optimizer_name = "adamw", double clip_grad_norm = 0.0) {
    const int world_size = comm ? comm->world_size() : union_ranks;
    const int rank = comm ? comm->rank() : 0;
    const int64_t local = comm ? 8 : 8 * union_ranks;
    const int64_t union_size = 8 * world_size;
    auto model = test::built_model("mlp");
    nn::ParameterStore& store = model->parameters();
    optim::Hyperparameters hyper = {{"lr", 1e-2}, {"weight_decay", 0.01}};
    if (optimizer_name == "sgd") hyper = {{"lr", 0.1}, {"momentum", 0.9}};
    std::unique_ptr<optim::Optimizer> optimizer;
    if (zero1)
        optimizer = std::make_unique<ShardedOptimizer>(optimizer_name, hyper, store.segments(), store.flat_length(),
                                                       optim::OptimizerBackend::cpu, *comm);
    else
        optimizer = optim::make_optimizer(optimizer_name, hyper, store.segments(), optim::OptimizerBackend::cpu);
    std::unique_ptr<DataParallel> ddp;
    nn::TrainerOptions options;
    options.accumulation_steps = 2;
    options.clip_grad_norm = clip_grad_norm;
    if (comm) {
        DataParallelOptions dp;
        dp.first_bucket_bytes = 1u << 10;
        dp.bucket_bytes = 4u << 10;
        dp.overlap = overlap;
        dp.reduction = zero1 ? GradientReduction::reduce_scatter : GradientReduction::all_reduce;
        ddp = std::make_unique<DataParallel>(*model, *comm, dp);
        ddp->broadcast_parameters();
        options.gradient_sync = ddp.get();
    }
    {
        nn::Trainer trainer(*model, *optimizer, options);
        for (int step = 0; step < steps; ++step) {
            Batch batch = test::make_union_batch(union_size, 100 + static_cast<uint64_t>(step));
            trainer.step(batch.images_tensor(local * rank, local), batch.labels_tensor(local * rank, local));
        }
    }
    if (zero1) static_cast<ShardedOptimizer&>(*optimizer).gather_state();
    return {test::copy_of(store.master(), store.flat_length()), ddp ? ddp->collectives_launched() : 0,
            optimizer->export_state()};
}

TEST(DataParallel, TrainingEqualsUnionBatchAndOverlapIsBitIdentical) {
    Communicator& comm = world();
    const int steps = 3;
    TrainedParameters single = train(nullptr, false, false, steps, comm.world_size(), "sgd");
    TrainedParameters overlapped = train(&comm, true, false, steps, 1, "sgd");
    TrainedParameters serial = train(&comm, false, false, steps, 1, "sgd");
    EXPECT_EQ(overlapped.parameters, serial.parameters) << "overlap on and off must give identical parameters";
    EXPECT_LT(relative_difference(overlapped.parameters, single.parameters), 1e-5);
    // Accumulation 2: only the last micro-batch of a step communicates.
    DataParallelOptions dp;
    dp.first_bucket_bytes = 1u << 10;
    dp.bucket_bytes = 4u << 10;
    auto model = test::built_model("mlp");
    const auto buckets = plan_gradient_buckets(model->parameters().parameters(), model->parameters().flat_length(),
                                               dp.first_bucket_bytes, dp.bucket_bytes);
    EXPECT_EQ(overlapped.collectives, steps * static_cast<int64_t>(buckets.size()));
}

TEST(ZeroOne, ParametersEqualDataParallelAfterSteps) {
    Communicator& comm = world();
    TrainedParameters ddp = train(&comm, true, false, 3);
    TrainedParameters zero = train(&comm, true, true, 3);
    EXPECT_LT(relative_difference(zero.parameters, ddp.parameters), 1e-6);
    EXPECT_EQ(zero.collectives, 3);  // one reduce-scatter per step, none on accumulation micro-batches
    // Every rank ends with the same full parameters.
    std::vector<float> mine = zero.parameters, rank0 = zero.parameters;
    comm.broadcast(rank0.data(), rank0.size() * sizeof(float), 0, nullptr);
    EXPECT_EQ(mine, rank0);
}

// Gradient clipping under ZeRO-1 uses the norm over every rank's shard: the same
// parameters as clipping the whole all-reduced gradient (SGD: parameters follow the
// gradients linearly, so a wrong norm would show).
TEST(ZeroOne, ClippingUsesTheNormOverAllShards) {
    Communicator& comm = world();
    const double max_norm = 0.05;  // far below the gradients' norm: every step clips
    TrainedParameters ddp = train(&comm, true, false, 3, 1, "sgd", max_norm);
    TrainedParameters zero = train(&comm, true, true, 3, 1, "sgd", max_norm);
    TrainedParameters unclipped = train(&comm, true, true, 3, 1, "sgd");
    EXPECT_LT(relative_difference(zero.parameters, ddp.parameters), 1e-6);
    EXPECT_GT(relative_difference(unclipped.parameters, ddp.parameters), 1e-3) << "the clip must have bitten";
}

// The gathered ZeRO-1 state is the unsharded optimizer's state (so checkpoints
// interchange), and importing it gives every rank back its own slice.
TEST(ZeroOne, GatheredStateEqualsDataParallelStateAndImportsBack) {
    Communicator& comm = world();
    TrainedParameters ddp = train(&comm, true, false, 3);
    TrainedParameters zero = train(&comm, true, true, 3);
    ASSERT_EQ(zero.state.buffers.size(), 2u);  // AdamW: m and v
    ASSERT_EQ(zero.state.buffers.size(), ddp.state.buffers.size());
    EXPECT_EQ(zero.state.step_count, ddp.state.step_count);
    for (std::size_t i = 0; i < zero.state.buffers.size(); ++i) {
        ASSERT_EQ(zero.state.buffers[i].size(), ddp.state.buffers[i].size());
        EXPECT_LT(relative_difference(zero.state.buffers[i], ddp.state.buffers[i]), 1e-6) << "buffer " << i;
    }
    auto model = test::built_model("mlp");
    ShardedOptimizer restored("adamw", {{"lr", 1e-2}, {"weight_decay", 0.01}}, model->parameters().segments(),
                              model->parameters().flat_length(), optim::OptimizerBackend::cpu, comm);
    EXPECT_EQ(restored.name(), "adamw");
    EXPECT_THROW(restored.export_state(), std::logic_error);  // never gathered
    restored.import_state(ddp.state);
    EXPECT_EQ(restored.step_count(), 3);
    // This rank's inner optimizer holds exactly its slice.
    ASSERT_NE(restored.shard_optimizer(), nullptr);
    optim::OptimizerState slice = restored.shard_optimizer()->export_state();
    for (std::size_t i = 0; i < slice.buffers.size(); ++i)
        for (std::size_t j = 0; j < slice.buffers[i].size(); ++j)
            ASSERT_EQ(slice.buffers[i][j], ddp.state.buffers[i][restored.shard_begin() + j]) << i << "," << j;
    restored.gather_state();
    optim::OptimizerState again = restored.export_state();
    for (std::size_t i = 0; i < again.buffers.size(); ++i) EXPECT_EQ(again.buffers[i], ddp.state.buffers[i]);
    EXPECT_THROW(restored.import_state(optim::OptimizerState{3, 1.0, {{1.0f}}, {}}), std::invalid_argument);
}

// AMP's bf16 parameter copy under ZeRO-1: after the step every rank holds the copy an
// unsharded optimizer writes, bit for bit, and the same fp32 parameters.
TEST(ZeroOne, LowPrecisionCopyEqualsTheUnshardedOne) {
    Communicator& comm = world();
    auto model = test::built_model("mlp");
    nn::ParameterStore& store = model->parameters();
    const std::size_t n = store.flat_length();
    const optim::Hyperparameters hyper = {{"lr", 1e-2}, {"weight_decay", 0.01}};
    std::vector<float> gradients(n);
    nn::SplitMix64 rng(77);
    for (float& g : gradients) g = static_cast<float>(rng.uniform01() - 0.5);
    std::vector<float> plain_params = test::copy_of(store.master(), n), sharded_params = plain_params;
    std::vector<uint16_t> plain_copy(n, 0), sharded_copy(n, 0);
    auto plain = optim::make_optimizer("adamw", hyper, store.segments(), optim::OptimizerBackend::cpu);
    ShardedOptimizer sharded("adamw", hyper, store.segments(), n, optim::OptimizerBackend::cpu, comm);
    for (int step = 0; step < 2; ++step) {
        optim::StepOptions options;
        options.low_precision = optim::LowPrecision::bf16;
        options.low_precision_params = plain_copy.data();
        plain->step(plain_params.data(), gradients.data(), options);
        options.low_precision_params = sharded_copy.data();
        sharded.step(sharded_params.data(), gradients.data(), options);
    }
    EXPECT_EQ(sharded_params, plain_params);
    EXPECT_EQ(sharded_copy, plain_copy);
    EXPECT_NE(plain_copy, std::vector<uint16_t>(n, 0));
}

TEST(ZeroOne, RefusesOptimizersWithPerTensorNorms) {
    auto model = test::built_model("mlp");
    EXPECT_THROW(ShardedOptimizer("lamb", {{"lr", 1e-3}}, model->parameters().segments(),
                                  model->parameters().flat_length(), optim::OptimizerBackend::cpu, world()),
                 std::invalid_argument);
}

}  // namespace
}  // namespace ember::distributed
