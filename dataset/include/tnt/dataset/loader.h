#pragma once
// Loader: turns a Source and a BatchPlan into this rank's micro-batches, step by step, with
// transforms applied, loading ahead on one background worker into a bounded queue; the samples
// of one batch may be read (decoded) by several threads at once (`workers`).
//
// Concurrency contract: a Loader is used by one consumer thread (next(), recycle(), seek(),
// stop(), position()). The worker thread is owned by the Loader; it only reads the Source and
// writes batches it then hands over through the queue. An exception in the worker (bad file,
// failing source) is stored and re-thrown by the consumer's next call to next(), after the
// batches completed before it; the worker then stops. stop() and the destructor wake and join
// the worker; they wait at most for the sample it is reading.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tnt/dataset/batch_plan.h"
#include "tnt/dataset/source.h"
#include "tnt/dataset/transform.h"

namespace tnt::data {

struct MicroBatch {
  std::vector<float> data;           // local_count × C × H × W, NCHW, contiguous
  std::vector<std::int32_t> labels;  // local_count
  std::vector<std::size_t> indices;  // source index of each sample
  SampleShape shape;
  std::size_t local_count = 0;    // may be 0 on some ranks for a small last batch
  std::size_t global_count = 0;   // weight this rank's gradient by local_count / global_count
  std::size_t global_offset = 0;  // position of the first sample in the global batch (StepShare)
  std::size_t epoch = 0;
  std::size_t step = 0;
};

struct LoaderPosition {
  std::size_t epoch = 0;
  std::size_t step = 0;
  friend bool operator==(const LoaderPosition&, const LoaderPosition&) = default;
};

struct LoaderOptions {
  BatchPlanOptions plan;  // plan.num_samples is taken from the source
  TransformOptions transform;
  LoaderPosition start;       // first (epoch, step) produced: resume here from a checkpoint
  std::size_t end_epoch = 0;  // first epoch not produced; 0 = no end
  // Batches loaded ahead (the queue bound). 0 = no worker: next() loads in the caller's thread.
  std::size_t prefetch = 2;
  // Threads that read and transform the samples of one batch at once (sources that decode, such
  // as the image folder, gain): 1 = the producing thread alone; more add helper threads per batch.
  std::size_t workers = 1;
};

class Loader {
 public:
  Loader(std::shared_ptr<const Source> source, LoaderOptions options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next micro-batch in (epoch, step) order; nullopt after the last step of end_epoch - 1,
  // or after stop(). Re-throws the worker's error.
  std::optional<MicroBatch> next();
  // Hands a consumed batch's memory back for reuse (optional; saves allocation per step).
  void recycle(MicroBatch&& batch);
  // Drops what was loaded ahead and continues from `position` (stop, then restart).
  void seek(LoaderPosition position);
  // Stops and joins the worker; next() then returns nullopt. Idempotent.
  void stop();
  // The (epoch, step) the next call to next() returns: save it in a checkpoint.
  LoaderPosition position() const;

  const BatchPlan& plan() const;
  const Source& source() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tnt::data
