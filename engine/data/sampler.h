// sampler.h: which sample indices an epoch visits, in which order. Samplers run in the
// training thread (the loader asks once per epoch), so batch order never depends on the
// number of workers. Shuffles are seeded by (seed, epoch): reproducible run to run,
// different epoch to epoch. Mirrors torch.utils.data's samplers.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace ember::data {

class Sampler {
  public:
    virtual ~Sampler() = default;
    // The indices of one epoch, in visiting order.
    virtual std::vector<int64_t> epoch_indices(int64_t epoch) const = 0;
    // How many indices epoch_indices returns.
    virtual int64_t length() const = 0;
};

// 0, 1, ..., size-1.
class SequentialSampler : public Sampler {
  public:
    explicit SequentialSampler(int64_t size) : size_(size) {}
    std::vector<int64_t> epoch_indices(int64_t epoch) const override;
    int64_t length() const override { return size_; }

  private:
    int64_t size_;
};

// A permutation of 0..size-1 (Fisher-Yates), a new one each epoch.
class RandomSampler : public Sampler {
  public:
    RandomSampler(int64_t size, uint64_t seed) : size_(size), seed_(seed) {}
    std::vector<int64_t> epoch_indices(int64_t epoch) const override;
    int64_t length() const override { return size_; }

  private:
    int64_t size_;
    uint64_t seed_;
};

// A permutation of the given indices (e.g. a validation split).
class SubsetRandomSampler : public Sampler {
  public:
    SubsetRandomSampler(std::vector<int64_t> indices, uint64_t seed) : indices_(std::move(indices)), seed_(seed) {}
    std::vector<int64_t> epoch_indices(int64_t epoch) const override;
    int64_t length() const override { return int64_t(indices_.size()); }

  private:
    std::vector<int64_t> indices_;
    uint64_t seed_;
};

// num_samples indices drawn with probability weight[i] / sum(weights). With replacement:
// independent draws (inverse CDF); without: a weighted permutation prefix (keys u^(1/w)).
class WeightedRandomSampler : public Sampler {
  public:
    // Throws std::invalid_argument for negative/non-finite weights, all zero, or
    // num_samples > number of positive weights without replacement.
    WeightedRandomSampler(std::vector<double> weights, int64_t num_samples, bool replacement, uint64_t seed);
    std::vector<int64_t> epoch_indices(int64_t epoch) const override;
    int64_t length() const override { return num_samples_; }

  private:
    std::vector<double> weights_;
    std::vector<double> cumulative_;
    int64_t num_samples_;
    bool replacement_;
    uint64_t seed_;
};

// One rank's share of the data set for data-parallel training (rank r of world_size takes
// positions r, r+W, r+2W, ... of the epoch's order, the same order on every rank). Without
// drop_last the order is padded by repeating its start so every rank gets ceil(N/W)
// samples; with drop_last the tail is cut to floor(N/W) per rank.
class DistributedSampler : public Sampler {
  public:
    DistributedSampler(int64_t size, int rank, int world_size, bool shuffle, uint64_t seed, bool drop_last);
    std::vector<int64_t> epoch_indices(int64_t epoch) const override;
    int64_t length() const override { return per_rank_; }

  private:
    int64_t size_;
    int rank_;
    int world_size_;
    bool shuffle_;
    uint64_t seed_;
    bool drop_last_;
    int64_t per_rank_;
};

// Cuts an epoch's indices into batches of batch_size; the last short batch is kept
// unless drop_last.
std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& indices, int64_t batch_size, bool drop_last);

}  // namespace ember::data
