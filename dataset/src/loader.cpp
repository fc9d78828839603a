#include "tnt/dataset/loader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "tnt/dataset/error.h"

namespace tnt::data {
namespace {

BatchPlan make_plan(const Source& source, BatchPlanOptions options) {
  options.num_samples = source.size();
  return BatchPlan(options);
}

}  // namespace

// Lock order: only `mutex`. The worker owns `order`/`scratch`; the consumer owns `next_position`
// and `user_stopped`; everything else below `mutex` is shared and guarded by it.
struct Loader::State {
  State(std::shared_ptr<const Source> src, LoaderOptions opts)
      : source(std::move(src)),
        options(std::move(opts)),
        plan(make_plan(*source, options.plan)),
        transform(options.transform, source->shape()) {}

  std::shared_ptr<const Source> source;
  LoaderOptions options;
  BatchPlan plan;
  Transform transform;

  LoaderPosition next_position;
  bool user_stopped = false;

  // Producer-side caches (the worker's, or the consumer's when there is no worker).
  std::vector<std::size_t> order;
  std::size_t order_epoch = 0;
  bool order_valid = false;
  std::vector<float> scratch;

  std::thread worker;
  std::mutex mutex;
  std::condition_variable not_full, not_empty;
  std::deque<MicroBatch> queue;
  std::vector<MicroBatch> free_list;
  bool finished = false;
  std::exception_ptr error;
  std::atomic<bool> stopping{false};

  bool at_end(LoaderPosition p) const {
    return plan.steps_per_epoch() == 0 || (options.end_epoch != 0 && p.epoch >= options.end_epoch);
  }
  LoaderPosition advance(LoaderPosition p) const {
    if (++p.step == plan.steps_per_epoch()) {
      p.step = 0;
      ++p.epoch;
    }
    return p;
  }
  void check_position(LoaderPosition p) const {
    if (plan.steps_per_epoch() != 0 && p.step >= plan.steps_per_epoch()) {
      throw DataError(
          fmt::format("loader: start step {} is out of range: an epoch has {} steps", p.step, plan.steps_per_epoch()));
    }
  }

  MicroBatch take_buffer() {
    std::lock_guard lock(mutex);
    if (free_list.empty()) return {};
    MicroBatch b = std::move(free_list.back());
    free_list.pop_back();
    return b;
  }

  // Loads (epoch, step) into `batch`, reusing its memory. Returns false if stopped meanwhile.
  bool produce(LoaderPosition p, MicroBatch& batch) {
    if (!order_valid || order_epoch != p.epoch) {
      order = plan.order(p.epoch);
      order_epoch = p.epoch;
      order_valid = true;
    }
    StepShare share = plan.share(p.epoch, p.step, order);
    const SampleShape shape = source->shape();
    const std::size_t n = shape.elements();
    batch.shape = shape;
    batch.epoch = p.epoch;
    batch.step = p.step;
    batch.local_count = share.local_count();
    batch.global_count = share.global_count;
    batch.global_offset = share.global_offset;
    batch.data.resize(batch.local_count * n);
    batch.labels.resize(batch.local_count);
    batch.indices = std::move(share.indices);
    const std::size_t threads = std::min(std::max<std::size_t>(options.workers, 1), batch.local_count);
    if (threads <= 1) return read_range(p.epoch, batch, 0, batch.local_count, scratch);
    // Contiguous chunks, one per thread; each sample is written by one thread only and its
    // content does not depend on which (Source::read and Transform::apply are pure).
    std::vector<std::exception_ptr> errors(threads);
    std::vector<char> done(threads, 1);
    {
      const std::size_t chunk = (batch.local_count + threads - 1) / threads;
      auto run = [&](std::size_t t, std::vector<float>& local_scratch) {
        try {
          const std::size_t begin = std::min(t * chunk, batch.local_count);
          done[t] = read_range(p.epoch, batch, begin, std::min(begin + chunk, batch.local_count), local_scratch);
        } catch (...) {
          errors[t] = std::current_exception();
        }
      };
      // Declared after what the helpers use, so that it is destroyed (and joins them) first.
      std::vector<std::jthread> helpers;
      for (std::size_t t = 1; t < threads; ++t) {
        helpers.emplace_back([&run, t] {
          std::vector<float> local_scratch;
          run(t, local_scratch);
        });
      }
      run(0, scratch);
    }  // joins the helpers
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);  // the first chunk's error: the lowest sample that failed
    }
    return std::all_of(done.begin(), done.end(), [](char d) { return d != 0; });
  }

  // Samples [begin, end) of `batch`. False if stopped meanwhile.
  bool read_range(std::size_t epoch, MicroBatch& batch, std::size_t begin, std::size_t end,
                  std::vector<float>& scratch_here) const {
    const std::size_t n = batch.shape.elements();
    const bool transforms = !transform.options().empty();
    for (std::size_t i = begin; i < end; ++i) {
      if (stopping.load(std::memory_order_relaxed)) return false;
      const std::span<float> sample(batch.data.data() + i * n, n);
      batch.labels[i] = source->read(batch.indices[i], sample);
      if (transforms) transform.apply(sample, epoch, batch.indices[i], scratch_here);
    }
    return true;
  }

  void run_worker(LoaderPosition p) {
    try {
      for (; !at_end(p); p = advance(p)) {
        MicroBatch batch = take_buffer();
        if (!produce(p, batch)) return;
        std::unique_lock lock(mutex);
        not_full.wait(lock, [&] { return queue.size() < options.prefetch || stopping; });
        if (stopping) return;
        queue.push_back(std::move(batch));
        not_empty.notify_one();
      }
      std::lock_guard lock(mutex);
      finished = true;
      not_empty.notify_one();
    } catch (...) {
      std::lock_guard lock(mutex);
      error = std::current_exception();
      finished = true;
      not_empty.notify_one();
    }
  }

  void start_worker() {
    stopping = false;
    finished = false;
    error = nullptr;
    order_valid = false;
    if (options.prefetch == 0) return;
    worker = std::thread([this, p = next_position] { run_worker(p); });
  }

  void stop_worker() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    not_full.notify_all();
    if (worker.joinable()) worker.join();
    std::lock_guard lock(mutex);
    while (!queue.empty()) {
      free_list.push_back(std::move(queue.front()));
      queue.pop_front();
    }
  }
};

Loader::Loader(std::shared_ptr<const Source> source, LoaderOptions options) {
  if (!source) throw DataError("loader: null source");
  state_ = std::make_unique<State>(std::move(source), std::move(options));
  state_->check_position(state_->options.start);
  state_->next_position = state_->options.start;
  const auto& plan = state_->plan;
  spdlog::debug(
      "tnt::data: loader rank {}/{}: global batch {}, {} steps/epoch, start {}:{}, "
      "prefetch {} ({})",
      plan.options().rank, plan.options().world_size, plan.global_batch(), plan.steps_per_epoch(),
      state_->next_position.epoch, state_->next_position.step, state_->options.prefetch, state_->source->describe());
  state_->start_worker();
}

Loader::~Loader() { state_->stop_worker(); }

std::optional<MicroBatch> Loader::next() {
  State& s = *state_;
  if (s.user_stopped) return std::nullopt;
  if (s.options.prefetch == 0) {
    if (s.error) std::rethrow_exception(s.error);
    if (s.at_end(s.next_position)) return std::nullopt;
    MicroBatch batch = s.take_buffer();
    try {
      s.produce(s.next_position, batch);
    } catch (...) {
      s.error = std::current_exception();
      throw;
    }
    s.next_position = s.advance(s.next_position);
    return batch;
  }
  std::unique_lock lock(s.mutex);
  s.not_empty.wait(lock, [&] { return !s.queue.empty() || s.finished; });
  if (!s.queue.empty()) {
    MicroBatch batch = std::move(s.queue.front());
    s.queue.pop_front();
    s.not_full.notify_one();
    s.next_position = s.advance({batch.epoch, batch.step});
    return batch;
  }
  if (s.error) std::rethrow_exception(s.error);  // kept: every later call reports it too
  return std::nullopt;
}

void Loader::recycle(MicroBatch&& batch) {
  std::lock_guard lock(state_->mutex);
  // Enough to cover the queue and the batch in the consumer's hands; more would only hold memory.
  if (state_->free_list.size() < state_->options.prefetch + 2) {
    state_->free_list.push_back(std::move(batch));
  }
}

void Loader::seek(LoaderPosition position) {
  State& s = *state_;
  s.check_position(position);
  s.stop_worker();
  s.next_position = position;
  s.user_stopped = false;
  s.start_worker();
}

void Loader::stop() {
  state_->stop_worker();
  state_->user_stopped = true;
}

LoaderPosition Loader::position() const { return state_->next_position; }
const BatchPlan& Loader::plan() const { return state_->plan; }
const Source& Loader::source() const { return *state_->source; }

}  // namespace tnt::data
