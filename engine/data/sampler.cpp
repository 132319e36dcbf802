// sampler.cpp: the samplers; shuffles draw from counter_random(seed, epoch, stream tag, n).
#include "engine/data/sampler.h"

#include "engine/data/counter_random.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace ember::data {

namespace {

// Stream tags keep the samplers' random words apart from augmentation's.
constexpr uint64_t kShuffleStream = 0x53485546464C45ull;  // "SHUFFLE"
constexpr uint64_t kWeightedStream = 0x574549474854ull;   // "WEIGHT"

void shuffle_in_place(std::vector<int64_t>& values, uint64_t seed, int64_t epoch) {
    for (size_t i = values.size(); i > 1; --i) {
        uint64_t word = counter_random(seed, uint64_t(epoch), kShuffleStream, i);
        size_t j = size_t(word % i);  // modulo bias < i / 2^64: negligible
        std::swap(values[i - 1], values[j]);
    }
}

std::vector<int64_t> iota(int64_t size) {
    std::vector<int64_t> values(static_cast<size_t>(size));
    std::iota(values.begin(), values.end(), int64_t(0));
    return values;
}

}  // namespace

std::vector<int64_t> SequentialSampler::epoch_indices(int64_t) const {
    return iota(size_);
}

std::vector<int64_t> RandomSampler::epoch_indices(int64_t epoch) const {
    std::vector<int64_t> values = iota(size_);
    shuffle_in_place(values, seed_, epoch);
    return values;
}

std::vector<int64_t> SubsetRandomSampler::epoch_indices(int64_t epoch) const {
    std::vector<int64_t> values = indices_;
    shuffle_in_place(values, seed_, epoch);
    return values;
}

WeightedRandomSampler::WeightedRandomSampler(std::vector<double> weights, int64_t num_samples, bool replacement,
                                             uint64_t seed)
    : weights_(std::move(weights)), num_samples_(num_samples), replacement_(replacement), seed_(seed) {
    double total = 0.0;
    int64_t positive = 0;
    cumulative_.reserve(weights_.size());
    for (size_t i = 0; i < weights_.size(); ++i) {
        double w = weights_[i];
        if (!(w >= 0.0) || !std::isfinite(w))
            throw std::invalid_argument("WeightedRandomSampler: weight " + std::to_string(i) + " is " +
                                        std::to_string(w) + " (must be finite and >= 0)");
        if (w > 0.0) ++positive;
        total += w;
        cumulative_.push_back(total);
    }
    if (total <= 0.0) throw std::invalid_argument("WeightedRandomSampler: all weights are zero");
    if (num_samples_ < 0) throw std::invalid_argument("WeightedRandomSampler: num_samples < 0");
    if (!replacement_ && num_samples_ > positive)
        throw std::invalid_argument("WeightedRandomSampler: " + std::to_string(num_samples_) +
                                    " samples without replacement but only " + std::to_string(positive) +
                                    " positive weights");
}

std::vector<int64_t> WeightedRandomSampler::epoch_indices(int64_t epoch) const {
    std::vector<int64_t> result;
    result.reserve(size_t(num_samples_));
    if (replacement_) {
        double total = cumulative_.back();
        for (int64_t n = 0; n < num_samples_; ++n) {
            double target = random_unit(counter_random(seed_, uint64_t(epoch), kWeightedStream, uint64_t(n))) * total;
            auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), target);
            size_t index = std::min(size_t(it - cumulative_.begin()), cumulative_.size() - 1);
            while (weights_[index] == 0.0 && index > 0) --index;  // target landed exactly on an edge
            result.push_back(int64_t(index));
        }
        return result;
    }
    // Efraimidis-Spirakis: key = u^(1/w); the largest keys form a weighted sample
    // without replacement, in draw order when sorted descending. Compared in log form.
    std::vector<std::pair<double, int64_t>> keyed;
    for (size_t i = 0; i < weights_.size(); ++i) {
        if (weights_[i] <= 0.0) continue;
        double u = random_unit(counter_random(seed_, uint64_t(epoch), kWeightedStream, i));
        double key = std::log(std::max(u, 1e-300)) / weights_[i];
        keyed.emplace_back(key, int64_t(i));
    }
    std::partial_sort(keyed.begin(), keyed.begin() + num_samples_, keyed.end(),
                      [](const auto& a, const auto& b) { return a.first > b.first; });
    for (int64_t n = 0; n < num_samples_; ++n) result.push_back(keyed[size_t(n)].second);
    return result;
}

DistributedSampler::DistributedSampler(int64_t size, int rank, int world_size, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : size_(size), rank_(rank), world_size_(world_size), shuffle_(shuffle), seed_(seed), drop_last_(drop_last) {
    if (world_size_ <= 0 || rank_ < 0 || rank_ >= world_size_)
        throw std::invalid_argument("DistributedSampler: rank " + std::to_string(rank_) + " not in world of size " +
                                    std::to_string(world_size_));
    per_rank_ = drop_last_ ? size_ / world_size_ : (size_ + world_size_ - 1) / world_size_;
}

std::vector<int64_t> DistributedSampler::epoch_indices(int64_t epoch) const {
    std::vector<int64_t> order = iota(size_);
    if (shuffle_) shuffle_in_place(order, seed_, epoch);
    int64_t total = per_rank_ * world_size_;
    if (total > size_ && size_ > 0) {
        // Pad by repeating the order's start (several times if the world exceeds the data).
        for (int64_t i = size_; i < total; ++i) order.push_back(order[size_t((i - size_) % size_)]);
    }
    std::vector<int64_t> mine;
    mine.reserve(size_t(per_rank_));
    for (int64_t position = rank_; position < total; position += world_size_) mine.push_back(order[size_t(position)]);
    return mine;
}

std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& indices, int64_t batch_size,
                                               bool drop_last) {
    if (batch_size <= 0) throw std::invalid_argument("batch_size must be > 0");
    std::vector<std::vector<int64_t>> batches;
    for (size_t start = 0; start < indices.size(); start += size_t(batch_size)) {
        size_t end = std::min(indices.size(), start + size_t(batch_size));
        if (drop_last && int64_t(end - start) < batch_size) break;
        batches.emplace_back(indices.begin() + int64_t(start), indices.begin() + int64_t(end));
    }
    return batches;
}

}  // namespace ember::data
