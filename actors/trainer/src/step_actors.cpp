#include "step_actors.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

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
  const std::size_t local_count = std::visit([](const auto& b) -> std::size_t { return b.local_count; }, batch_);
  if (local_count > 0) {
    if (const auto* images_batch = std::get_if<data::MicroBatch>(&batch_)) {
      images(*images_batch, figures.sums);
    } else {
      sequences(std::get<data::SequenceBatch>(batch_), figures.sums);
    }
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

void BackpropActor::images(const data::MicroBatch& batch, std::span<double> sums) {
  auto& model = *c_.model;
  const auto& s = batch.shape;
  input_.resize({static_cast<int64_t>(batch.local_count), static_cast<int64_t>(s.channels),
                 static_cast<int64_t>(s.height), static_cast<int64_t>(s.width)});
  std::memcpy(input_.data(), batch.data.data(), batch.data.size() * sizeof(float));
  // Dropout masks keyed by (step, global sample index): the same on any number of ranks.
  const compute::BatchInfo where{c_.optimizer->steps(), static_cast<int64_t>(batch.global_offset), {}};
  const auto& output = model.forward(input_, compute::Mode::training, where);
  objective_.forward(output, batch.labels, sums);
  forward_end_us_ = now_us();
  // Every rank scales by 1/global so that the allreduce-SUM is the global batch's mean
  // gradient, whatever each rank's share (compute/loss.h).
  const auto& d_out = objective_.backward(1.0f / static_cast<float>(batch.global_count));
  model.backward(d_out, [this](std::size_t i) { refs_->bucketer.send(GradReady{i, now_us()}); });
}

namespace {
// Token ids travel to the model as floats (exact below 2^24).
void to_tensor(const std::vector<std::int32_t>& ids, std::size_t rows, std::size_t length, compute::Tensor& out) {
  out.resize({static_cast<int64_t>(rows), static_cast<int64_t>(length)});
  for (std::size_t i = 0; i < ids.size(); ++i) out[static_cast<int64_t>(i)] = static_cast<float>(ids[i]);
}
}  // namespace

void BackpropActor::sequences(const data::SequenceBatch& batch, std::span<double> sums) {
  auto& model = *c_.model;
  to_tensor(batch.source, batch.local_count, batch.source_length, input_);
  to_tensor(batch.target_input, batch.local_count, batch.target_length, target_);
  const compute::BatchInfo where{c_.optimizer->steps(), static_cast<int64_t>(batch.global_offset), batch.source_lengths,
                                 batch.target_lengths};
  const auto& output = model.forward(input_, target_, compute::Mode::training, where);
  objective_.forward_tokens(output, batch.target_labels, sums);
  forward_end_us_ = now_us();
  // The exact token mean of the global batch: every rank divides its token sum by the global
  // batch's real target tokens, known from the plan (Note [Exact token mean] in
  // dataset/src/sequence.cpp), and the allreduce sums.
  const auto& d_out = objective_.backward(1.0f / static_cast<float>(batch.global_target_tokens));
  model.backward(d_out, [this](std::size_t i) { refs_->bucketer.send(GradReady{i, now_us()}); });
}

void BackpropActor::finish_step() {
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
    if (c_.timeline->enabled()) {
      c_.timeline->add("allreduce " + std::to_string(m.bucket), "allreduce", Timeline::comm, m.begin_us, m.end_us,
                       static_cast<int64_t>(m.step));
    }
    NonFinite found;
    if (c_.check_finite) {
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
    refs_->backprop.send(Reduced{m.bucket});
    return;
  }
  ++in_flight_;
  const int64_t begin = now_us();
  collectives_.allreduce_sum(c_.layout->memory.data() + bucket.offset, bucket.count,
                             [me = self(), k = m.bucket, begin, step = m.step](const std::string& error) {
                               hand_over(me, AllreduceDone{k, begin, now_us(), step, error});
                             });
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
