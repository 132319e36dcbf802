// Samplers: each one's distribution checked against what it promises -- permutations
// are permutations, seeds reproduce, epochs differ, weighted draws follow their weights
// (chi-square bound), distributed shards partition the data set like PyTorch's.
#include "engine/data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>

namespace ember::data {
namespace {

bool is_permutation_of_range(std::vector<int64_t> values, int64_t size) {
    std::sort(values.begin(), values.end());
    std::vector<int64_t> expected(static_cast<size_t>(size));
    std::iota(expected.begin(), expected.end(), int64_t(0));
    return values == expected;
}

TEST(Sampler, SequentialVisitsInOrder) {
    SequentialSampler sampler(5);
    EXPECT_EQ(sampler.epoch_indices(3), (std::vector<int64_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(sampler.length(), 5);
}

TEST(Sampler, RandomIsSeededPermutationNewEachEpoch) {
    RandomSampler sampler(1000, 7);
    std::vector<int64_t> epoch0 = sampler.epoch_indices(0);
    EXPECT_TRUE(is_permutation_of_range(epoch0, 1000));
    EXPECT_EQ(epoch0, RandomSampler(1000, 7).epoch_indices(0));  // same seed, same order
    EXPECT_NE(epoch0, sampler.epoch_indices(1));
    EXPECT_NE(epoch0, RandomSampler(1000, 8).epoch_indices(0));
    std::vector<int64_t> identity(1000);
    std::iota(identity.begin(), identity.end(), int64_t(0));
    EXPECT_NE(epoch0, identity);
}

TEST(Sampler, RandomPositionsAreUniform) {
    // Over many epochs, element 0 lands in each of 10 positions about equally often.
    const int size = 10, epochs = 20000;
    std::vector<int> position_counts(size, 0);
    RandomSampler sampler(size, 3);
    for (int e = 0; e < epochs; ++e) {
        std::vector<int64_t> order = sampler.epoch_indices(e);
        ++position_counts[size_t(std::find(order.begin(), order.end(), 0) - order.begin())];
    }
    double expected = double(epochs) / size, chi_square = 0;
    for (int count : position_counts) chi_square += (count - expected) * (count - expected) / expected;
    EXPECT_LT(chi_square, 27.88);  // chi-square, 9 degrees of freedom, p = 0.001
}

TEST(Sampler, SubsetRandomStaysInSubset) {
    std::vector<int64_t> subset = {3, 9, 12, 40, 41};
    SubsetRandomSampler sampler(subset, 1);
    std::vector<int64_t> order = sampler.epoch_indices(0);
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, subset);
    bool some_epoch_differs = false;
    for (int e = 1; e < 10; ++e) some_epoch_differs |= sampler.epoch_indices(e) != order;
    EXPECT_TRUE(some_epoch_differs);
}

TEST(Sampler, WeightedWithReplacementFollowsWeights) {
    std::vector<double> weights = {1, 2, 3, 4, 0};
    const int draws = 100000;
    WeightedRandomSampler sampler(weights, draws, true, 11);
    std::vector<int64_t> indices = sampler.epoch_indices(0);
    ASSERT_EQ(int64_t(indices.size()), draws);
    std::vector<int> counts(5, 0);
    for (int64_t i : indices) ++counts[size_t(i)];
    EXPECT_EQ(counts[4], 0);  // zero weight is never drawn
    double chi_square = 0;
    for (int i = 0; i < 4; ++i) {
        double expected = draws * weights[size_t(i)] / 10.0;
        chi_square += (counts[size_t(i)] - expected) * (counts[size_t(i)] - expected) / expected;
    }
    EXPECT_LT(chi_square, 16.27);  // 3 degrees of freedom, p = 0.001
}

TEST(Sampler, WeightedWithoutReplacementIsDistinctAndFavorsHeavy) {
    std::vector<double> weights(100, 1.0);
    weights[0] = 1000.0;  // almost always drawn first
    WeightedRandomSampler sampler(weights, 50, false, 5);
    int first_is_heavy = 0;
    for (int e = 0; e < 200; ++e) {
        std::vector<int64_t> indices = sampler.epoch_indices(e);
        ASSERT_EQ(indices.size(), 50u);
        EXPECT_EQ(std::set<int64_t>(indices.begin(), indices.end()).size(), 50u);
        first_is_heavy += indices[0] == 0;
    }
    // P(heavy first) = 1000 / 1099 = 0.91.
    EXPECT_GT(first_is_heavy, 160);
    EXPECT_THROW(WeightedRandomSampler({1, 0, 0}, 2, false, 0), std::invalid_argument);
    EXPECT_THROW(WeightedRandomSampler({1, -1}, 2, true, 0), std::invalid_argument);
    EXPECT_THROW(WeightedRandomSampler({0, 0}, 2, true, 0), std::invalid_argument);
}

TEST(Sampler, DistributedShardsPartitionTheDataSet) {
    const int64_t size = 103;
    const int world = 4;
    std::vector<int64_t> all;
    for (int rank = 0; rank < world; ++rank) {
        DistributedSampler sampler(size, rank, world, true, 9, false);
        std::vector<int64_t> mine = sampler.epoch_indices(2);
        EXPECT_EQ(int64_t(mine.size()), 26);  // ceil(103 / 4)
        EXPECT_EQ(sampler.length(), 26);
        all.insert(all.end(), mine.begin(), mine.end());
    }
    // 104 slots: every sample once plus one padded repeat.
    std::set<int64_t> distinct(all.begin(), all.end());
    EXPECT_EQ(distinct.size(), size_t(size));
    EXPECT_EQ(all.size(), 104u);

    std::vector<int64_t> dropped;
    for (int rank = 0; rank < world; ++rank) {
        std::vector<int64_t> mine = DistributedSampler(size, rank, world, true, 9, true).epoch_indices(2);
        EXPECT_EQ(mine.size(), 25u);  // floor(103 / 4)
        dropped.insert(dropped.end(), mine.begin(), mine.end());
    }
    EXPECT_EQ(std::set<int64_t>(dropped.begin(), dropped.end()).size(), 100u);  // disjoint

    // Without shuffle, rank r takes r, r+W, ...
    EXPECT_EQ(DistributedSampler(10, 1, 3, false, 0, false).epoch_indices(0), (std::vector<int64_t>{1, 4, 7, 0}));
    EXPECT_THROW(DistributedSampler(10, 3, 3, false, 0, false), std::invalid_argument);
}

TEST(Sampler, BatchesKeepOrEndShortBatch) {
    std::vector<int64_t> indices = {5, 4, 3, 2, 1, 0, 9};
    auto kept = make_batches(indices, 3, false);
    ASSERT_EQ(kept.size(), 3u);
    EXPECT_EQ(kept[2], (std::vector<int64_t>{9}));
    auto dropped = make_batches(indices, 3, true);
    ASSERT_EQ(dropped.size(), 2u);
    EXPECT_EQ(dropped[1], (std::vector<int64_t>{2, 1, 0}));
    EXPECT_THROW(make_batches(indices, 0, false), std::invalid_argument);
}

}  // namespace
}  // namespace ember::data
