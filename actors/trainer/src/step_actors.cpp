#include "step_actors.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "exact_sum.h"
#include "optimizer_shard.h"
#include "tnt/compute/runtime.h"
#include "tnt/core/error.h"

namespace tnt::trainer {

namespace {

// Runs on the collectives' thread: only hand over. A closed mailbox means the segment's
// system has stopped (after a failure elsewhere) or is gone: nobody is left to tell.
template <class Msg>
void hand_over(const actors::ActorRef& to, Msg msg) {
  try {
    to.send(std::move(msg));
  } catch (const actors::MailboxClosed& e) {
    spdlog::debug("completion after the trainer's actors stopped: {}", e.what());
  }
}

}  // namespace

DataActor::DataActor(EngineContext& context) {
  on<NextBatch>([&context](NextBatch&) {
    auto batch = context.feed->next();  // the loader's worker has loaded it ahead
    if (!batch) throw LogicError("the data loader ended before the epoch did");
    return std::move(*batch);
  });
  on<Recycle>([&context](Recycle& m) { context.feed->recycle(std::move(m.batch)); });
}

// --- BackpropActor -------------------------------------------------------------------------------

BackpropActor::BackpropActor(EngineContext& context, Refs* refs, std::size_t epoch, std::size_t step_begin,
                             std::size_t step_end, SegmentResult* result)
    : c_(context),
      refs_(refs),
      epoch_(epoch),
      step_(step_begin),
      end_(step_end),
      result_(result),
      factor_(context.rate_factor),
      objective_(*context.objective) {
  on<Go>([this](Go&) { next(); });
  on<Reduced>([this](Reduced& m) {
    non_finite_.nan = non_finite_.nan || m.non_finite.nan;
    non_finite_.inf = non_finite_.inf || m.non_finite.inf;
    if (++reduced_ == c_.layout->buckets.size()) finish_step();
  });
  on<Decided>([this](Decided& m) { decided(m); });
}

void BackpropActor::on_start() { compute::set_num_threads(c_.threads); }

void BackpropActor::next() {
  if (step_ == end_) {
    end_segment();
    return;
  }
  request(refs_->data, NextBatch{}, [this](StepBatch& batch) { run(std::move(batch)); });
}

// Note [Gradient accumulation] (issue 26): with accumulation_steps = N, each rank cuts its share
// of the step into N micro-steps of consecutive rows (as even as possible: global batch / (ranks
// x N) each where that divides, which fit() requires of full batches) and runs forward and
// backward on each; the optimizer steps once. Backward overwrites gradients (compute/model.h),
// so after every micro-step but the last each final gradient is added into kept_ (copied on the
// first), and in the last one each gradient gets kept_ added the moment it is final, before it
// is announced: its bucket's allreduce starts during the last backward, as without
// accumulation. Every micro-step scales by 1 / global batch, so the sum is the global batch's
// mean gradient, the plain step's up to the order of the additions; dropout masks are keyed by
// each row's place in the global batch, so they are the plain step's too. A step's figures are
// the sums over its micro-steps. BatchNorm normalises each micro-step with its own statistics
// (fewer samples than the rank's share) and updates its running statistics once per micro-step;
// synchronized BatchNorm over the micro-step's rows of every rank, so there every rank runs N
// passes, those without rows (a short last batch) through Model::pass_without_samples.
void BackpropActor::run(StepBatch batch) {
  if (epoch_of(batch) != epoch_ || step_of(batch) != step_) {
    throw LogicError("data actor delivered epoch " + std::to_string(epoch_of(batch)) + " step " +
                     std::to_string(step_of(batch)) + ", expected epoch " + std::to_string(epoch_) + " step " +
                     std::to_string(step_));
  }
  batch_ = std::move(batch);
  reduced_ = 0;
  non_finite_ = {};
  StepFigures figures{epoch_, step_, std::vector<double>(objective_.figure_count(), 0.0), objective_.metric_names()};
  figures.global_step = c_.optimizer->steps();
  step_begin_us_ = now_us();
  const auto n = c_.model->parameter_count();
  const auto [local_count, global_offset, global_count] = std::visit(
      [](const auto& b) {
        return std::array<std::size_t, 3>{b.local_count, b.global_offset, b.global_count};
      },
      batch_);
  if (c_.exact_buckets) {
    for (auto& limbs : *c_.exact_buckets) std::fill(limbs.begin(), limbs.end(), 0);
  }
  const std::vector<Rows> micro = micro_steps(local_count, global_offset, global_count);
  if (!micro.empty()) {
    const std::size_t parts = std::max<std::size_t>(1, c_.accumulation_steps);
    // A step counts as one training pass however many micro-steps it took, so that a
    // checkpoint's pass count (compute::Model::training_passes) is the plain run's.
    const auto passes = c_.model->training_passes();
    std::vector<double> part(figures.sums.size());
    for (std::size_t k = 0; k < micro.size(); ++k) {
      const bool last = k + 1 == micro.size();
      const Gradients g = c_.exact_buckets    ? (last ? Gradients::exact_and_announce : Gradients::exact)
                          : micro.size() == 1 ? Gradients::announce
                          : last              ? Gradients::add_kept_and_announce
                          : k == 0            ? Gradients::keep
                                              : Gradients::add_to_kept;
      micro_step(k, micro[k], g, part);
      for (std::size_t i = 0; i < part.size(); ++i) figures.sums[i] += part[i];
    }
    c_.model->set_training_passes(passes + 1);
    for (std::size_t k = micro.size(); c_.synchronized_batch_norm && k < parts; ++k) c_.model->pass_without_samples();
  } else {
    // No samples in this step's share: contribute zeros to every allreduce (and with
    // synchronized BatchNorm to its sums, in every micro-step the other ranks may run).
    for (std::size_t k = 0; c_.synchronized_batch_norm && k < std::max<std::size_t>(1, c_.accumulation_steps); ++k)
      c_.model->pass_without_samples();
    forward_end_us_ = now_us();
    std::fill(c_.layout->memory.begin(), c_.layout->memory.end(), 0.0f);
    for (std::size_t i = n; i-- > 0;) refs_->bucketer.send(GradReady{i, now_us()});
  }
  backward_end_us_ = now_us();
  refs_->bucketer.send(StepEnd{figures});
}

std::vector<BackpropActor::Rows> BackpropActor::micro_steps(std::size_t local_count, std::size_t global_offset,
                                                            std::size_t global_count) const {
  std::vector<Rows> micro;
  if (c_.exact_buckets) {
    // The shards of the global batch that lie in this rank's rows (the batch plan gave it whole
    // ones: Note [Bitwise-reproducible mode] in exact_sum.cpp); empty ones (a short last batch) add nothing.
    const std::size_t shards = c_.bitwise_shards, end = global_offset + local_count;
    for (std::size_t s = 0; s < shards; ++s) {
      const std::size_t begin_row = s * global_count / shards, end_row = (s + 1) * global_count / shards;
      if (end_row == begin_row || begin_row < global_offset || begin_row >= end) continue;
      if (end_row > end) {
        throw LogicError("shard " + std::to_string(s) + " of the global batch (rows " + std::to_string(begin_row) +
                         " to " + std::to_string(end_row) + ") crosses this rank's rows " +
                         std::to_string(global_offset) + " to " + std::to_string(end));
      }
      micro.push_back({begin_row - global_offset, end_row - global_offset});
    }
    // Larger shards first: shards of two sizes then change the model's shape (which rebuilds its
    // primitives) once in the step, not at every other shard; the exact sum is the same in any order.
    std::stable_sort(micro.begin(), micro.end(),
                     [](const Rows& a, const Rows& b) { return a.end - a.begin > b.end - b.begin; });
    return micro;
  }
  const std::size_t parts = std::max<std::size_t>(1, c_.accumulation_steps);
  for (std::size_t k = 0; k < parts; ++k) {
    const Rows rows{k * local_count / parts, (k + 1) * local_count / parts};
    if (rows.end > rows.begin) micro.push_back(rows);  // a short last batch may leave some empty
  }
  return micro;
}

void BackpropActor::micro_step(std::size_t index, Rows rows, Gradients gradients, std::span<double> sums) {
  const int64_t begin_us = now_us();
  auto& layout = *c_.layout;
  const bool exact = gradients == Gradients::exact || gradients == Gradients::exact_and_announce;
  if (gradients != Gradients::announce && !exact && kept_.size() != layout.memory.size())
    kept_.assign(layout.memory.size(), 0);
  const compute::Model::GradientReadyFn on_gradient = [this, gradients, exact, &layout](std::size_t i) {
    float* g = layout.memory.data() + layout.offset_of[i];
    const std::size_t count = layout.size_of[i];
    if (exact) {
      const auto& bucket = layout.buckets[layout.bucket_of[i]];
      auto& limbs = (*c_.exact_buckets)[layout.bucket_of[i]];
      const std::size_t at = kExactLimbs * (layout.offset_of[i] - bucket.offset);
      exact_add(std::span<const float>(g, count), std::span(limbs).subspan(at, kExactLimbs * count),
                std::span(limbs).subspan(kExactLimbs * bucket.count));
      if (gradients == Gradients::exact) return;
    } else if (gradients != Gradients::announce) {
      // kept_ is empty without accumulation: no pointer into it is made then.
      float* kept = kept_.data() + layout.offset_of[i];
      switch (gradients) {
        case Gradients::keep: std::copy(g, g + count, kept); return;
        case Gradients::add_to_kept:
          for (std::size_t j = 0; j < count; ++j) kept[j] += g[j];
          return;
        case Gradients::add_kept_and_announce:
          for (std::size_t j = 0; j < count; ++j) g[j] += kept[j];
          break;
        case Gradients::announce:
        case Gradients::exact:
        case Gradients::exact_and_announce: break;
      }
    }
    refs_->bucketer.send(GradReady{i, now_us()});
  };
  if (const auto* images_batch = std::get_if<data::MicroBatch>(&batch_)) {
    images(*images_batch, rows, sums, on_gradient);
  } else {
    sequences(std::get<data::SequenceBatch>(batch_), rows, sums, on_gradient);
  }
  if (c_.timeline->enabled()) {
    const auto s = static_cast<int64_t>(c_.optimizer->steps());
    const Timeline::MicroStep micro{static_cast<int64_t>(index), static_cast<int64_t>(rows.end - rows.begin)};
    c_.timeline->add("forward", "compute", Timeline::compute, begin_us, forward_end_us_, s, micro);
    c_.timeline->add("backward", "compute", Timeline::compute, forward_end_us_, now_us(), s, micro);
  }
}

void BackpropActor::images(const data::MicroBatch& batch, Rows rows, std::span<double> sums,
                           const compute::Model::GradientReadyFn& on_gradient) {
  auto& model = *c_.model;
  const auto& s = batch.shape;
  const std::size_t count = rows.end - rows.begin, sample = batch.data.size() / batch.local_count;
  input_.resize({static_cast<int64_t>(count), static_cast<int64_t>(s.channels), static_cast<int64_t>(s.height),
                 static_cast<int64_t>(s.width)});
  std::memcpy(input_.data(), batch.data.data() + rows.begin * sample, count * sample * sizeof(float));
  // Dropout masks keyed by (step, global sample index): the same on any number of ranks.
  const compute::BatchInfo where{c_.optimizer->steps(), static_cast<int64_t>(batch.global_offset + rows.begin), {}};
  const auto& output = model.forward(input_, compute::Mode::training, where);
  objective_.forward(output, std::span(batch.labels).subspan(rows.begin, count), sums);
  forward_end_us_ = now_us();
  // Every rank scales by 1/global so that the allreduce-SUM is the global batch's mean
  // gradient, whatever each rank's share (compute/loss.h).
  const auto& d_out = objective_.backward(1.0f / static_cast<float>(batch.global_count));
  model.backward(d_out, on_gradient);
}

namespace {
// Token ids travel to the model as floats (exact below 2^24).
void to_tensor(std::span<const std::int32_t> ids, std::size_t rows, std::size_t length, compute::Tensor& out) {
  out.resize({static_cast<int64_t>(rows), static_cast<int64_t>(length)});
  for (std::size_t i = 0; i < ids.size(); ++i) out[static_cast<int64_t>(i)] = static_cast<float>(ids[i]);
}
}  // namespace

void BackpropActor::sequences(const data::SequenceBatch& batch, Rows rows, std::span<double> sums,
                              const compute::Model::GradientReadyFn& on_gradient) {
  auto& model = *c_.model;
  const std::size_t count = rows.end - rows.begin;
  const auto cut = [&](const std::vector<std::int32_t>& v, std::size_t length) {
    return v.empty() ? std::span<const std::int32_t>() : std::span(v).subspan(rows.begin * length, count * length);
  };
  to_tensor(cut(batch.source, batch.source_length), count, batch.source_length, input_);
  to_tensor(cut(batch.target_input, batch.target_length), count, batch.target_length, target_);
  const compute::BatchInfo where{c_.optimizer->steps(), static_cast<int64_t>(batch.global_offset + rows.begin),
                                 cut(batch.source_lengths, 1), cut(batch.target_lengths, 1)};
  const auto& output = model.forward(input_, target_, compute::Mode::training, where);
  objective_.forward_tokens(output, cut(batch.target_labels, batch.target_length), sums);
  forward_end_us_ = now_us();
  // The exact token mean of the global batch: every rank divides its token sum by the global
  // batch's real target tokens, known from the plan (Note [Exact token mean] in
  // dataset/src/sequence.cpp), and the allreduce sums.
  const auto& d_out = objective_.backward(1.0f / static_cast<float>(batch.global_target_tokens));
  model.backward(d_out, on_gradient);
}

void BackpropActor::finish_step() {
  double whole_square_sum = 0.0;
  if (c_.shard) {
    // Each rank has looked at its own shard only (Note [Optimizer-state sharding]).
    auto& model = *c_.model;
    const bool clip = c_.optimizer->options().global_clipnorm > 0;
    const auto whole = c_.shard->agree(non_finite_, clip ? c_.optimizer->owned_gradient_square_sum(model) : 0.0);
    non_finite_ = whole.non_finite;
    whole_square_sum = whole.square_sum;
  }
  if (non_finite_.nan || non_finite_.inf) {
    // Every rank holds the same reduced gradient, so every rank ends here, before the update.
    if (result_) {
      result_->gradient_nan = non_finite_.nan;
      result_->gradient_inf = non_finite_.inf;
    }
    refs_->data.send(Recycle{std::move(batch_)});
    batch_ = {};
    end_segment();
    return;
  }
  const int64_t reduced_us = now_us();
  auto& optimizer = *c_.optimizer;
  const auto rate = static_cast<float>(c_.schedule->rate(optimizer.steps()) * factor_);
  if (c_.shard) {
    optimizer.step(*c_.model, rate, whole_square_sum);
    c_.shard->allgather_weights(c_.layout->memory.data());
  } else {
    optimizer.step(*c_.model, rate);
  }
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
  stepped_ = true;
  advance();
}

void BackpropActor::decided(const Decided& m) {
  decision_ = m;
  advance();
}

void BackpropActor::advance() {
  if (!stepped_ || !decision_ || decision_->step != step_) return;
  stepped_ = false;
  factor_ = decision_->decision.factor;
  if (decision_->decision.stop) end_ = step_ + 1;
  ++step_;
  next();
}

void BackpropActor::end_segment() {
  if (result_) result_->end = step_;
  refs_->bucketer.send(SegmentEnd{});
}

// --- Bucketer ------------------------------------------------------------------------------------

Bucketer::Bucketer(EngineContext& context, Refs* refs) : c_(context), refs_(refs), step_(context.optimizer->steps()) {
  reset();
  on<GradReady>([this](GradReady& m) { grad_ready(m); });
  on<StepEnd>([this](StepEnd& m) { step_end(m); });
  on<SegmentEnd>([this](SegmentEnd& m) { refs_->comm.send(m); });
}

void Bucketer::grad_ready(const GradReady& m) {
  const auto k = c_.layout->bucket_of.at(m.parameter);
  if (k != next_bucket_) {
    // Would break Note [Collective order]; the model promises decreasing order.
    throw LogicError("gradient of parameter " + std::to_string(m.parameter) + " (bucket " + std::to_string(k) +
                     ") ready while bucket " + std::to_string(next_bucket_) + " is incomplete");
  }
  if (first_ready_us_ == 0) first_ready_us_ = m.time_us;
  if (--pending_[k] > 0) return;
  BucketFull full{k, first_ready_us_, m.time_us, step_};
  first_ready_us_ = 0;
  ++next_bucket_;
  if (c_.overlap) {
    refs_->comm.send(full);
  } else {
    held_.push_back(full);
  }
}

void Bucketer::step_end(const StepEnd& m) {
  if (next_bucket_ != c_.layout->buckets.size()) {
    throw LogicError("step ended with " + std::to_string(next_bucket_) + " of " +
                     std::to_string(c_.layout->buckets.size()) + " buckets complete");
  }
  for (auto& full : held_) refs_->comm.send(full);
  held_.clear();
  refs_->comm.send(m);
  ++step_;
  reset();
}

void Bucketer::reset() {
  pending_.clear();
  for (const auto& b : c_.layout->buckets) pending_.push_back(b.parameters.size());
  next_bucket_ = 0;
}

// --- CommActor -----------------------------------------------------------------------------------

CommActor::CommActor(EngineContext& context, Refs* refs, Collectives& collectives, std::promise<void>* done)
    : c_(context), refs_(refs), collectives_(collectives), done_(done) {
  on<BucketFull>([this](BucketFull& m) { bucket_full(m); });
  on<AllreduceDone>([this](AllreduceDone& m) {
    if (!m.error.empty()) throw JobError(m.error);
    if (m.wire) {
      const auto& bucket = c_.layout->buckets.at(m.bucket);
      float* g = c_.layout->memory.data() + bucket.offset;
      for (std::size_t i = 0; i < bucket.count; ++i) g[i] = static_cast<float>((*m.wire)[i]);
    }
    if (c_.exact_buckets) round_exact(m.bucket, m.step);
    if (c_.timeline->enabled()) {
      c_.timeline->add("allreduce " + std::to_string(m.bucket), "allreduce", Timeline::comm, m.begin_us, m.end_us,
                       static_cast<int64_t>(m.step));
    }
    NonFinite found;
    if (c_.shard) {
      found = c_.shard->check_reduced(m.bucket, c_.layout->memory.data(), c_.check_finite);
    } else if (c_.check_finite) {
      const auto& bucket = c_.layout->buckets.at(m.bucket);
      found = find_non_finite(c_.layout->memory.data() + bucket.offset, bucket.count);
    }
    refs_->backprop.send(Reduced{m.bucket, found});
    completed();
  });
  on<StepEnd>([this](StepEnd& m) { step_end(m); });
  on<FiguresDone>([this](FiguresDone& m) {
    if (!m.error.empty()) throw JobError(m.error);
    StepFigures f = m.figures;
    // The Requests rode at the end (CommActor::step_end).
    const std::size_t n = m.sums->size() - 3;
    f.requests = {(*m.sums)[n], (*m.sums)[n + 1], (*m.sums)[n + 2]};
    m.sums->resize(n);
    f.sums = std::move(*m.sums);
    refs_->metrics.send(ReducedFigures{std::move(f)});
    completed();
  });
  on<SegmentEnd>([this](SegmentEnd&) {
    ending_ = true;
    completed(0);
  });
}

void CommActor::bucket_full(const BucketFull& m) {
  auto& bucket = c_.layout->buckets.at(m.bucket);
  if (c_.timeline->enabled()) {
    c_.timeline->add("bucket " + std::to_string(m.bucket), "bucket", Timeline::bucketer, m.first_ready_us, m.full_us,
                     static_cast<int64_t>(m.step));
  }
  if (c_.skip_gradient_allreduce) {
    if (c_.exact_buckets) round_exact(m.bucket, m.step);
    refs_->backprop.send(Reduced{m.bucket});
    return;
  }
  ++in_flight_;
  const int64_t begin = now_us();
  float* g = c_.layout->memory.data() + bucket.offset;
  if (c_.exact_buckets) {
    // Note [Bitwise-reproducible mode] in exact_sum.cpp: the limbs, summed exactly; rounded on arrival.
    auto& limbs = (*c_.exact_buckets)[m.bucket];
    if (c_.gradient_bytes) *c_.gradient_bytes += limbs.size() * sizeof(std::int64_t);
    collectives_.allreduce_sum(limbs.data(), limbs.size(),
                               [me = self(), k = m.bucket, begin, step = m.step](const std::string& error) {
                                 hand_over(me, AllreduceDone{k, begin, now_us(), step, error});
                               });
    return;
  }
  if (c_.shard) {
    c_.shard->poison(m.step, m.bucket, c_.layout->memory.data());
    if (c_.gradient_bytes) *c_.gradient_bytes += bucket.count * sizeof(float);
    collectives_.reduce_scatter_sum(g, bucket.count,
                                    [me = self(), k = m.bucket, begin, step = m.step](const std::string& error) {
                                      hand_over(me, AllreduceDone{k, begin, now_us(), step, error});
                                    });
    return;
  }
  if (!c_.bf16_gradients) {
    if (c_.gradient_bytes) *c_.gradient_bytes += bucket.count * sizeof(float);
    collectives_.allreduce_sum(g, bucket.count,
                               [me = self(), k = m.bucket, begin, step = m.step](const std::string& error) {
                                 hand_over(me, AllreduceDone{k, begin, now_us(), step, error});
                               });
    return;
  }
  // Note [bf16 gradients on the wire] (issue 26, item 6; --gradient-compression bf16): each
  // bucket is rounded to bfloat16 (to nearest even) for its allreduce, which adds in float32
  // and rounds the sum to bfloat16, and is widened back into the float32 bucket when it arrives
  // (on this actor, so nothing writes the bucket after a failed segment has gone). Half the bytes
  // are handed to the allreduce, and they travel as such (Note [bf16 on the ring] in ring.cpp:
  // on rings of more than two, partial sums are rounded as they travel). The weights, the
  // optimizer state and the update stay float32. Every rank widens the same reduced bf16 values,
  // so the ranks' weights stay equal.
  auto wire = std::make_shared<std::vector<bfloat16>>(bucket.count);
  for (std::size_t i = 0; i < bucket.count; ++i) (*wire)[i] = bfloat16(g[i]);
  if (c_.gradient_bytes) *c_.gradient_bytes += bucket.count * sizeof(bfloat16);
  collectives_.allreduce_sum(wire->data(), bucket.count,
                             [me = self(), k = m.bucket, begin, step = m.step, wire](const std::string& error) {
                               hand_over(me, AllreduceDone{k, begin, now_us(), step, error, wire});
                             });
}

void CommActor::round_exact(std::size_t k, std::size_t step) {
  const auto& bucket = c_.layout->buckets.at(k);
  const auto& limbs = (*c_.exact_buckets)[k];
  const std::size_t count = kExactLimbs * bucket.count;
  const std::string error = exact_result(std::span(limbs).first(count), std::span(limbs).subspan(count),
                                         std::span(c_.layout->memory).subspan(bucket.offset, bucket.count));
  // Every rank holds the same sums: every rank stops here.
  if (!error.empty()) throw JobError(fmt::format("optimizer step {}, gradient bucket {}: {}", step, k, error));
}

void CommActor::step_end(const StepEnd& m) {
  // Sampled now: whatever this rank asked for since its last step's figures rides along, after them.
  const Requests asked = c_.local_requests ? c_.local_requests() : Requests{};
  auto sums = std::make_shared<std::vector<double>>(m.figures.sums);
  sums->insert(sums->end(), {asked.stop, asked.signal, asked.factor});
  ++in_flight_;
  collectives_.allreduce_sum(sums->data(), sums->size(),
                             [me = self(), sums, figures = m.figures](const std::string& error) {
                               hand_over(me, FiguresDone{sums, figures, error});
                             });
}

void CommActor::completed(std::size_t n) {
  in_flight_ -= n;
  if (ending_ && in_flight_ == 0 && done_) {
    done_->set_value();
    done_ = nullptr;
  }
}

MetricsActor::MetricsActor(EngineContext& context, Refs* refs) {
  on<ReducedFigures>([&context, refs](ReducedFigures& m) {
    StepDecision decision{false, context.rate_factor};
    if (context.on_step_figures) decision = context.on_step_figures(m.figures);
    // After a segment that ended on a non-finite gradient the system may be draining: nobody
    // waits for this decision then.
    hand_over(refs->backprop, Decided{m.figures.step, decision});
  });
}

}  // namespace tnt::trainer
