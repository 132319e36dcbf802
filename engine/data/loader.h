// loader.h: DataLoader, the threaded batch pipeline in the manner of PyTorch's DataLoader:
//
//   sampler (training thread) -> batches of indices -> N worker threads decode + augment +
//   collate into pinned staging slots -> H2D copy on the loader's own stream + event ->
//   next() in the training thread.
//
// Workers are threads, not processes: C++ decodes without a global interpreter lock, so
// there is nothing to fork around and staging memory is shared directly. workers = 0 loads
// in the training thread. At most workers * prefetch_factor batches are in flight, plus
// the one the training loop holds. Batch contents depend only on (seed, epoch, sample
// index) and batch order only on the sampler, so the batches are identical for any worker
// count. A worker's error (a DataError naming file and sample) is rethrown by next();
// shutdown never waits on anything but the batch each worker is finishing.
//
// NVTX (domain "ember", category dataloader): dataloader/wait in the training thread each
// time it waits for a batch; dataloader/load (payload: batch index), dataloader/decode,
// dataloader/augment and dataloader/h2d in whoever builds the batch.
#pragma once

#include "engine/data/augment.h"
#include "engine/data/batch.h"
#include "engine/data/dataset.h"
#include "engine/data/sampler.h"

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

struct CUstream_st;

namespace ember::data {

struct LoaderOptions {
    int64_t batch_size = 128;
    bool drop_last = false;
    int workers = 0;                  // 0 = load in the training thread
    int prefetch_factor = 2;          // batches in flight per worker
    bool persistent_workers = false;  // keep worker threads across epochs
    bool pin_memory = true;           // page-locked staging (falls back to pageable without CUDA)
    bool copy_to_device = true;       // H2D copy when a CUDA device exists (skipped otherwise)
    AugmentOptions augment;           // crop/flip/normalize; seed also used for nothing else
};

struct LoaderStats {
    int64_t batches = 0;            // batches returned by next()
    double wait_seconds = 0.0;      // time next() spent waiting (the dataloader/wait ranges)
    int64_t worker_starts = 0;      // worker threads started so far (persistent vs not)
    int64_t batches_filled = 0;     // batches decoded and augmented (by workers or next())
    double fill_cpu_seconds = 0.0;  // CPU time those took, on whichever thread filled them
};

class DataLoader {
  public:
    // Throws std::invalid_argument for bad options (batch_size <= 0, workers < 0, ...).
    DataLoader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const Sampler> sampler, LoaderOptions options);
    ~DataLoader();
    DataLoader(const DataLoader&) = delete;
    DataLoader& operator=(const DataLoader&) = delete;

    // Begins epoch `epoch` (asks the sampler, starts workers if they are not running).
    // Batches still held from an earlier epoch become invalid.
    void start_epoch(int64_t epoch);

    // The next batch of the epoch, nullptr at its end. Rethrows a worker's error. Throws
    // std::logic_error when every staging slot is held (release batches you are done with).
    const Batch* next();

    // Gives the batch's staging slot back. With device copies, an event is recorded on
    // consumer_stream (nullptr = the default stream) so the slot is overwritten only after
    // the work queued there so far has finished reading it. Releasing a batch that is not
    // held (twice, or from an epoch start_epoch() discarded) does nothing.
    void release(const Batch* batch, CUstream_st* consumer_stream = nullptr);

    int64_t batches_per_epoch() const;
    int staging_slots() const { return int(slots_.size()); }
    bool copies_to_device() const { return copy_to_device_; }
    bool pinned() const;
    LoaderStats stats() const;
    // Why a requested feature is off (no CUDA device: no pinned memory, no H2D); empty if none.
    const std::string& fallback_note() const { return fallback_note_; }

  private:
    struct Slot;
    enum class SlotState { free, filling, ready, failed, in_use };

    void start_workers();
    void stop_workers();
    void worker_main(int worker_index);
    // Builds batch `batch_number` of `epoch` into `slot` (decode, augment, collate, h2d).
    void fill(Slot& slot, int64_t epoch, int64_t batch_number, const std::vector<int64_t>& indices);
    void wait_until_no_slot_filling(std::unique_lock<std::mutex>& lock);

    std::shared_ptr<const Dataset> dataset_;
    std::shared_ptr<const Sampler> sampler_;
    LoaderOptions options_;
    ImageShape shape_;
    bool copy_to_device_ = false;
    int device_ = 0;  // the CUDA device current when the loader was made; workers use it too
    std::string fallback_note_;
    struct CopyStream;
    std::unique_ptr<CopyStream> copy_stream_;

    std::vector<std::unique_ptr<Slot>> slots_;
    std::vector<std::thread> workers_;

    mutable std::mutex mutex_;
    std::condition_variable work_available_;  // workers wait here
    std::condition_variable batch_finished_;  // next() and start_epoch wait here
    bool stopping_ = false;
    bool epoch_active_ = false;
    bool epoch_started_ = false;
    int64_t epoch_ = 0;
    std::vector<std::vector<int64_t>> batches_;
    int64_t next_dispatch_ = 0;  // next batch a worker takes
    int64_t next_consume_ = 0;   // next batch next() returns
    std::exception_ptr epoch_error_;
    LoaderStats stats_;
};

}  // namespace ember::data
