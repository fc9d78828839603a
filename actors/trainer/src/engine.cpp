#include "engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>

#include "tnt/actors/actor_system.h"
#include "tnt/collectives/communicator.h"
#include "tnt/compute/runtime.h"
#include "tnt/core/error.h"

namespace tnt::trainer {

BucketLayout make_bucket_layout(const compute::Model& model, std::size_t threshold_bytes) {
  BucketLayout layout;
  const std::size_t n = model.parameter_count();
  layout.bucket_of.assign(n, 0);
  std::size_t offset = 0;
  for (std::size_t k = n; k-- > 0;) {
    if (layout.buckets.empty() || layout.buckets.back().count * sizeof(float) >= threshold_bytes) {
      layout.buckets.push_back({offset, 0, {}});
    }
    auto& bucket = layout.buckets.back();
    const auto size = static_cast<std::size_t>(model.parameter(k).size);
    bucket.parameters.push_back(k);
    bucket.count += size;
    offset += size;
    layout.bucket_of[k] = layout.buckets.size() - 1;
  }
  layout.memory.assign(offset, 0.0f);
  return layout;
}

void bind_gradients(compute::Model& model, BucketLayout& layout) {
  for (const auto& bucket : layout.buckets) {
    std::size_t at = bucket.offset;
    for (std::size_t p : bucket.parameters) {
      model.bind_gradient(p, layout.memory.data() + at);
      at += static_cast<std::size_t>(model.parameter(p).size);
    }
  }
}

namespace {

using actors::Actor;
using actors::ActorRef;

// --- messages ---------------------------------------------------------------------------------
struct NextBatch {
  using reply_type = data::MicroBatch;
};
struct Recycle {
  data::MicroBatch batch;
};
struct Go {};
struct GradReady {
  std::size_t parameter;
  int64_t time_us;
};
struct StepEnd {
  StepFigures figures;
};
struct SegmentEnd {};
struct BucketFull {
  std::size_t bucket;
  int64_t first_ready_us, full_us;
  std::size_t step;
};
struct AllreduceDone {
  std::size_t bucket;
  int64_t begin_us, end_us;
  std::size_t step;
  std::string error;
};
struct Reduced {
  std::size_t bucket;
};
struct FiguresDone {
  std::shared_ptr<std::array<double, 3>> sums;
  StepFigures figures;
  std::string error;
};
struct ReducedFigures {
  StepFigures figures;
};

struct Refs {
  ActorRef data, backprop, bucketer, comm, metrics;
};

// Note [Completion relay]: a collective's completion callback runs on tnt's event loop and is
// destroyed there whenever the Communicator is done with it, possibly after this segment's
// actor system is gone. Releasing the last ActorRef after its system's pools are destroyed is
// not safe (measured: the strand's disposal then blocks forever on the destroyed pool's
// strand-service mutex). So callbacks hold only this relay, which the segment disconnects,
// under its mutex, while the system is still alive.
struct CompletionRelay {
  std::mutex mutex;
  ActorRef comm;

  template <class Msg>
  void send(Msg msg) {
    std::lock_guard lock(mutex);
    if (!comm) return;  // the segment is over (after a failure): nobody left to tell
    try {
      comm.send(std::move(msg));
    } catch (const std::exception& e) {
      spdlog::debug("completion after the trainer's actors stopped: {}", e.what());
    }
  }
  void disconnect() {
    std::lock_guard lock(mutex);
    comm = ActorRef();
  }
};

// --- actors -----------------------------------------------------------------------------------
class DataActor : public Actor {
 public:
  explicit DataActor(EngineContext& context) {
    on<NextBatch>([&context](NextBatch&) {
      auto batch = context.loader->next();  // the loader's worker has loaded it ahead
      if (!batch) throw LogicError("the data loader ended before the epoch did");
      return std::move(*batch);
    });
    on<Recycle>([&context](Recycle& m) { context.loader->recycle(std::move(m.batch)); });
  }
};

class BackpropActor : public Actor {
 public:
  BackpropActor(EngineContext& context, Refs* refs, std::size_t epoch, std::size_t step_begin, std::size_t step_end)
      : c_(context), refs_(refs), epoch_(epoch), step_(step_begin), end_(step_end) {
    on<Go>([this](Go&) { next(); });
    on<Reduced>([this](Reduced&) {
      if (++reduced_ == c_.layout->buckets.size()) finish_step();
    });
  }

 protected:
  void on_start() override { compute::set_num_threads(c_.threads); }

 private:
  void next() {
    if (step_ == end_) {
      refs_->bucketer.send(SegmentEnd{});
      return;
    }
    request(refs_->data, NextBatch{}, [this](data::MicroBatch& batch) { run(std::move(batch)); });
  }

  void run(data::MicroBatch batch) {
    if (batch.epoch != epoch_ || batch.step != step_) {
      throw LogicError("data actor delivered epoch " + std::to_string(batch.epoch) + " step " +
                       std::to_string(batch.step) + ", expected epoch " + std::to_string(epoch_) + " step " +
                       std::to_string(step_));
    }
    batch_ = std::move(batch);
    reduced_ = 0;
    StepFigures figures{epoch_, step_, 0.0, 0.0, 0.0};
    step_begin_us_ = now_us();
    auto& model = *c_.model;
    const auto n = model.parameter_count();
    if (batch_.local_count > 0) {
      const auto& s = batch_.shape;
      input_.resize({static_cast<int64_t>(batch_.local_count), static_cast<int64_t>(s.channels),
                     static_cast<int64_t>(s.height), static_cast<int64_t>(s.width)});
      std::memcpy(input_.data(), batch_.data.data(), batch_.data.size() * sizeof(float));
      const auto& output = model.forward(input_, compute::Mode::training);
      const auto result = loss_.forward(output, batch_.labels);
      figures.loss_sum = result.sum;
      figures.correct = static_cast<double>(result.correct);
      figures.count = static_cast<double>(result.count);
      forward_end_us_ = now_us();
      // Every rank scales by 1/global so that the allreduce-SUM is the global batch's mean
      // gradient, whatever each rank's share (compute/loss.h).
      const auto& d_out = loss_.backward(1.0f / static_cast<float>(batch_.global_count));
      model.backward(d_out, [this](std::size_t i) { refs_->bucketer.send(GradReady{i, now_us()}); });
    } else {
      // No samples in this step's share: contribute zeros to every allreduce.
      forward_end_us_ = now_us();
      std::fill(c_.layout->memory.begin(), c_.layout->memory.end(), 0.0f);
      for (std::size_t i = n; i-- > 0;) refs_->bucketer.send(GradReady{i, now_us()});
    }
    backward_end_us_ = now_us();
    refs_->bucketer.send(StepEnd{figures});
    if (c_.timeline->enabled()) {
      const auto s = static_cast<int64_t>(c_.optimizer->steps());
      c_.timeline->add("forward", "compute", Timeline::compute, step_begin_us_, forward_end_us_, s);
      c_.timeline->add("backward", "compute", Timeline::compute, forward_end_us_, backward_end_us_, s);
    }
  }

  void finish_step() {
    const int64_t reduced_us = now_us();
    auto& optimizer = *c_.optimizer;
    const auto rate = static_cast<float>(c_.schedule->rate(optimizer.steps()));
    optimizer.step(*c_.model, rate);
    const int64_t end_us = now_us();
    if (c_.timeline->enabled()) {
      const auto s = static_cast<int64_t>(optimizer.steps()) - 1;  // the step just taken
      if (reduced_us > backward_end_us_)
        c_.timeline->add("wait for allreduce", "exposed", Timeline::compute, backward_end_us_, reduced_us, s);
      c_.timeline->add("optimizer", "compute", Timeline::compute, reduced_us, end_us, s);
      c_.timeline->add("step", "step", Timeline::metrics, step_begin_us_, end_us, s);
    }
    if (c_.step_times) {
      c_.step_times->push_back({(backward_end_us_ - step_begin_us_) + (end_us - reduced_us),
                                std::max<int64_t>(0, reduced_us - backward_end_us_)});
    }
    refs_->data.send(Recycle{std::move(batch_)});
    batch_ = {};
    ++step_;
    next();
  }

  EngineContext& c_;
  Refs* refs_;
  std::size_t epoch_, step_, end_;
  std::size_t reduced_ = 0;
  data::MicroBatch batch_;
  compute::Tensor input_;
  compute::SoftmaxCrossEntropy loss_;
  int64_t step_begin_us_ = 0, forward_end_us_ = 0, backward_end_us_ = 0;
};

// Counts gradients into buckets; a bucket is handed to the CommActor the moment its last
// gradient is ready (or, without overlap, all of them after backward).
class Bucketer : public Actor {
 public:
  Bucketer(EngineContext& context, Refs* refs) : c_(context), refs_(refs), step_(context.optimizer->steps()) {
    reset();
    on<GradReady>([this](GradReady& m) {
      const auto k = c_.layout->bucket_of.at(m.parameter);
      if (k != next_bucket_) {
        // Would break Note [Collective order]; the model promises decreasing order.
        throw LogicError("gradient of parameter " + std::to_string(m.parameter) + " (bucket " + std::to_string(k) +
                         ") ready while bucket " + std::to_string(next_bucket_) + " is incomplete");
      }
      if (first_ready_us_ == 0) first_ready_us_ = m.time_us;
      if (--pending_[k] == 0) {
        BucketFull full{k, first_ready_us_, m.time_us, step_};
        first_ready_us_ = 0;
        ++next_bucket_;
        if (c_.overlap) {
          refs_->comm.send(full);
        } else {
          held_.push_back(full);
        }
      }
    });
    on<StepEnd>([this](StepEnd& m) {
      if (next_bucket_ != c_.layout->buckets.size()) {
        throw LogicError("step ended with " + std::to_string(next_bucket_) + " of " +
                         std::to_string(c_.layout->buckets.size()) + " buckets complete");
      }
      for (auto& full : held_) refs_->comm.send(full);
      held_.clear();
      refs_->comm.send(m);
      ++step_;
      reset();
    });
    on<SegmentEnd>([this](SegmentEnd& m) { refs_->comm.send(m); });
  }

 private:
  void reset() {
    pending_.clear();
    for (const auto& b : c_.layout->buckets) pending_.push_back(b.parameters.size());
    next_bucket_ = 0;
  }

  EngineContext& c_;
  Refs* refs_;
  std::vector<std::size_t> pending_;
  std::size_t next_bucket_ = 0;
  std::size_t step_ = 0;
  int64_t first_ready_us_ = 0;
  std::vector<BucketFull> held_;
};

// Issues every collective of the segment (Note [Collective order]); completions come back
// from tnt's event loop as messages.
class CommActor : public Actor {
 public:
  CommActor(EngineContext& context, Refs* refs, std::shared_ptr<CompletionRelay> relay, std::promise<void>* done)
      : c_(context), refs_(refs), relay_(std::move(relay)), done_(done) {
    on<BucketFull>([this](BucketFull& m) {
      auto& bucket = c_.layout->buckets.at(m.bucket);
      if (c_.timeline->enabled()) {
        c_.timeline->add("bucket " + std::to_string(m.bucket), "bucket", Timeline::bucketer, m.first_ready_us,
                         m.full_us, static_cast<int64_t>(m.step));
      }
      ++in_flight_;
      const int64_t begin = now_us();
      c_.communicator->allreduce_async(c_.layout->memory.data() + bucket.offset, bucket.count, DataType::float32,
                                       ReduceOp::sum,
                                       [relay = relay_, k = m.bucket, begin, step = m.step](const std::string& error) {
                                         relay->send(AllreduceDone{k, begin, now_us(), step, error});
                                       });
    });
    on<AllreduceDone>([this](AllreduceDone& m) {
      if (!m.error.empty()) throw JobError(m.error);
      if (c_.timeline->enabled()) {
        c_.timeline->add("allreduce " + std::to_string(m.bucket), "allreduce", Timeline::comm, m.begin_us, m.end_us,
                         static_cast<int64_t>(m.step));
      }
      refs_->backprop.send(Reduced{m.bucket});
      completed();
    });
    on<StepEnd>([this](StepEnd& m) {
      auto sums = std::make_shared<std::array<double, 3>>(
          std::array<double, 3>{m.figures.loss_sum, m.figures.correct, m.figures.count});
      ++in_flight_;
      c_.communicator->allreduce_async(sums->data(), 3, DataType::float64, ReduceOp::sum,
                                       [relay = relay_, sums, figures = m.figures](const std::string& error) {
                                         relay->send(FiguresDone{sums, figures, error});
                                       });
    });
    on<FiguresDone>([this](FiguresDone& m) {
      if (!m.error.empty()) throw JobError(m.error);
      StepFigures f = m.figures;
      f.loss_sum = (*m.sums)[0];
      f.correct = (*m.sums)[1];
      f.count = (*m.sums)[2];
      refs_->metrics.send(ReducedFigures{f});
      completed();
    });
    on<SegmentEnd>([this](SegmentEnd&) {
      ending_ = true;
      completed(0);
    });
  }

 private:
  void completed(std::size_t n = 1) {
    in_flight_ -= n;
    if (ending_ && in_flight_ == 0 && done_) {
      done_->set_value();
      done_ = nullptr;
    }
  }

  EngineContext& c_;
  Refs* refs_;                              // owned by run_segment, outlives the system
  std::shared_ptr<CompletionRelay> relay_;  // Note [Completion relay]
  std::promise<void>* done_;
  std::size_t in_flight_ = 0;
  bool ending_ = false;
};

class MetricsActor : public Actor {
 public:
  explicit MetricsActor(EngineContext& context) {
    on<ReducedFigures>([&context](ReducedFigures& m) {
      if (context.on_step_figures) context.on_step_figures(m.figures);
    });
  }
};

}  // namespace

void run_segment(EngineContext& context, std::size_t epoch, std::size_t step_begin, std::size_t step_end) {
  if (step_begin >= step_end) return;
  actors::SystemConfig config;
  config.name = "trainer";
  // Backprop has a thread to itself (the Trainer's compute thread) so that compute never waits
  // behind bookkeeping; the data actor blocks in Loader::next() only when the prefetch queue
  // is empty.
  config.pools = {{"comm", 1}, {"data", 1}};
  config.placement = {{"backprop", "compute"}, {"data", "data"}};
  config.default_pool = "comm";
  // Declared before the system so that it outlives every handler that may still touch it.
  std::promise<void> done;
  auto finished = done.get_future();
  // Actors reach each other through this table, filled before start(); plain pointers, so no
  // reference cycle keeps the actors alive after the system is gone.
  Refs table;
  Refs* refs = &table;
  auto relay = std::make_shared<CompletionRelay>();
  actors::ActorSystem system(config);
  // Destroyed before the system, on every path: no ActorRef outlives it (Note [Completion relay]).
  struct Release {
    Refs& table;
    CompletionRelay& relay;
    ~Release() {
      relay.disconnect();
      table = Refs{};
    }
  } release{table, *relay};
  system.add_executor("compute", context.compute_executor);
  refs->data = system.spawn<DataActor>("data", context);
  refs->backprop = system.spawn<BackpropActor>("backprop", context, refs, epoch, step_begin, step_end);
  refs->bucketer = system.spawn<Bucketer>("bucketer", context, refs);
  refs->comm = system.spawn<CommActor>("comm", context, refs, relay, &done);
  refs->metrics = system.spawn<MetricsActor>("metrics", context);
  relay->comm = refs->comm;
  system.start();
  refs->backprop.send(Go{});
  while (finished.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
    if (finished.wait_for(std::chrono::milliseconds(20)) == std::future_status::ready) break;
    if (system.stopped()) {
      system.wait();  // throws the failure
      throw LogicError("the trainer's actors stopped before the segment ended");
    }
  }
  system.stop(actors::StopMode::drain);
  system.wait();
}

}  // namespace tnt::trainer
