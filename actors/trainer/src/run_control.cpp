#include "run_control.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <span>

#include "tnt/collectives/communicator.h"
#include "tnt/core/error.h"

namespace tnt::trainer {

// --- SignalWatch ---------------------------------------------------------------------------------

namespace {

constexpr std::array<int, 2> kStopSignals = {SIGTERM, SIGUSR1};

std::atomic<int> g_received{0};
static_assert(std::atomic<int>::is_always_lock_free, "read and written in a signal handler");
std::atomic<bool> g_watching{false};  // a SignalWatch is alive
bool g_installed = false;             // our handlers are in place (g_previous holds what was)
// Written before the handlers are installed: a handler may only write() it.
std::array<std::array<char, 160>, kStopSignals.size()> g_notice{};
std::array<std::size_t, kStopSignals.size()> g_notice_length{};
std::array<struct sigaction, kStopSignals.size()> g_previous{};

extern "C" void on_stop_signal(int sig) {
  int none = 0;
  if (!g_received.compare_exchange_strong(none, sig)) return;  // the first one counts
  const std::size_t i = sig == SIGTERM ? 0 : 1;
  const int saved = errno;
  (void)!::write(STDERR_FILENO, g_notice[i].data(), g_notice_length[i]);
  errno = saved;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    default: return "a stop signal";
  }
}

std::string describe_value(double x) {
  if (std::isnan(x)) return "NaN";
  return x > 0 ? "+infinity" : "-infinity";
}

}  // namespace

SignalWatch::SignalWatch(int rank) {
  if (g_watching.exchange(true)) throw LogicError("only one fit at a time can watch for stop signals");
  g_received = 0;
  for (std::size_t i = 0; i < kStopSignals.size(); ++i) {
    const int n = std::snprintf(g_notice[i].data(), g_notice[i].size(),
                                "tnt rank %d: %s received: every rank stops at the next step boundary\n", rank,
                                signal_name(kStopSignals[i]));
    g_notice_length[i] = static_cast<std::size_t>(std::clamp(n, 0, static_cast<int>(g_notice[i].size()) - 1));
  }
  if (g_installed) return;  // left in place by a preempted fit
  for (std::size_t i = 0; i < kStopSignals.size(); ++i) {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    // Threads interrupted in a system call resume it; Asio retries what is not restarted.
    action.sa_flags = SA_RESTART;
    if (sigaction(kStopSignals[i], &action, &g_previous[i]) != 0) {
      const std::string error = std::strerror(errno);
      for (std::size_t j = 0; j < i; ++j) sigaction(kStopSignals[j], &g_previous[j], nullptr);
      g_watching = false;
      throw Error("cannot install a handler for " + std::string(signal_name(kStopSignals[i])) + ": " + error);
    }
  }
  g_installed = true;
}

SignalWatch::~SignalWatch() {
  g_watching = false;
  // After a preemption the handlers stay: the job is ending, and the SIGTERM tnt-launch sends
  // when the first rank exits must not kill a rank before it has said why it stops.
  if (consumed_) return;
  for (std::size_t i = 0; i < kStopSignals.size(); ++i) sigaction(kStopSignals[i], &g_previous[i], nullptr);
  g_installed = false;
  // A signal that came too late for any agreement (fit was already finishing) is not lost:
  // it gets its previous disposition now (by default, the end of the process). Not while an
  // exception unwinds: fit failed, and its caller is told so.
  if (const int sig = g_received.exchange(0); sig != 0 && std::uncaught_exceptions() == 0) raise(sig);
}

int SignalWatch::received() { return g_watching.load() ? g_received.load() : 0; }

// --- RunController -------------------------------------------------------------------------------

RunController::RunController(Setup setup, double& factor) : setup_(setup), factor_(factor), agreed_factor_(factor) {}

Logs RunController::logs() const {
  std::lock_guard lock(mutex_);
  return logs_;
}

void RunController::set_logs(const Logs& logs) {
  std::lock_guard lock(mutex_);
  logs_ = logs;
}

void RunController::stop_training(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (reason_.empty()) reason_ = reason;
  }
  if (!stop_asked_.exchange(true)) {
    spdlog::info("stop requested{}: training ends at the next step boundary every rank agrees on",
                 reason.empty() ? "" : ": " + reason);
  }
}

double RunController::learning_rate() const { return setup_.schedule->rate(next_step_) * learning_rate_factor(); }

double RunController::learning_rate_factor() const {
  const double asked = asked_factor_.load();
  return asked > 0 ? asked : agreed_factor_.load();
}

void RunController::set_learning_rate_factor(double factor) {
  if (!std::isfinite(factor) || factor <= 0) {
    throw ConfigError(fmt::format("learning-rate factor must be finite and greater than 0, got {}", factor));
  }
  asked_factor_ = factor;
}

void RunController::set_learning_rate(double rate) {
  if (!std::isfinite(rate) || rate <= 0) {
    throw ConfigError(fmt::format("learning rate must be finite and greater than 0, got {}", rate));
  }
  const double scheduled = setup_.schedule->rate(next_step_);
  if (!(scheduled > 0)) {
    throw ConfigError(fmt::format("cannot set the learning rate at step {}: the schedule's rate there is {}",
                                  next_step_ + 1, scheduled));
  }
  set_learning_rate_factor(rate / scheduled);
}

bool RunController::schedule_is_constant() const {
  const auto& o = setup_.schedule->options();
  return o.warmup_steps == 0 && (o.kind == "constant" || (o.kind == "piecewise" && o.boundaries.empty()));
}

Requests RunController::local_requests() const {
  Requests mine;
  mine.stop = stop_asked_.load() ? 1.0 : 0.0;
  mine.signal = SignalWatch::received() != 0 ? 1.0 : 0.0;
  // The master's factor alone: a sum of it and zeros is exactly it, on every rank.
  if (setup_.rank == 0) mine.factor = learning_rate_factor();
  return mine;
}

void RunController::at(std::size_t epoch, uint64_t optimizer_steps) {
  epoch_ = epoch;
  next_step_ = optimizer_steps;
}

void RunController::agree(Communicator& comm) {
  const Requests mine = local_requests();
  std::array<double, 3> sums{mine.stop, mine.signal, mine.factor};
  comm.allreduce(std::span<double>(sums), ReduceOp::sum);
  apply({sums[0], sums[1], sums[2]}, next_step_);
  stop_for(Requests{sums[0], sums[1], sums[2]}, fmt::format("before step {} (epoch {})", next_step_ + 1, epoch_ + 1));
}

StepDecision RunController::on_step(const StepFigures& f) {
  epoch_ = f.epoch;
  apply(f.requests, f.global_step + 1);
  // The figures begin with the loss sum and the samples (Note [Exact figures over ranks]).
  const double loss_sum = f.sums.at(0), samples = f.sums.at(1);
  samples_ = samples_.load() + samples;
  if (setup_.terminate_on_nan && samples > 0 && !std::isfinite(loss_sum) && stop_.kind != StopKind::non_finite) {
    stop_ = {StopKind::non_finite, f.global_step + 1,
             fmt::format("the loss is {} at {} (summed over all ranks): training stopped on every rank",
                         describe_value(loss_sum), where(f.epoch, f.step, f.global_step))};
  }
  stop_for(f.requests, "after " + where(f.epoch, f.step, f.global_step));
  return {stop_.kind != StopKind::none, factor_};
}

void RunController::gradient_not_finite(std::size_t epoch, std::size_t step, uint64_t global_step, bool nan) {
  const std::string what = fmt::format(
      "the reduced gradient has {} values at {}: its update was not applied, and training stopped on "
      "every rank",
      nan ? "NaN" : "infinite", where(epoch, step, global_step));
  if (stop_.kind == StopKind::non_finite) {
    stop_.what += "; " + what;
  } else {
    stop_ = {StopKind::non_finite, global_step, what};
  }
}

void RunController::apply(const Requests& agreed, uint64_t next_step) {
  next_step_ = next_step;
  if (agreed.factor > 0) {
    factor_ = agreed.factor;
    agreed_factor_ = agreed.factor;
  }
  // An ask the agreement carried is done; on other ranks than the master an ask is never
  // carried, and the master's value replaces it.
  double asked = asked_factor_.load();
  if (asked > 0 && (setup_.rank != 0 || asked == agreed.factor)) asked_factor_.compare_exchange_strong(asked, 0.0);
}

void RunController::stop_for(const Requests& agreed, const std::string& at) {
  if (stop_.kind != StopKind::none) return;
  if (agreed.signal > 0) {
    const int mine = SignalWatch::received();
    stop_ = {StopKind::signal, next_step_,
             fmt::format("{} (on {} of {} rank(s)): every rank stopped {}",
                         mine ? fmt::format("{} received by this rank", signal_name(mine))
                              : std::string("a stop signal received by another rank"),
                         agreed.signal, setup_.size, at)};
  } else if (agreed.stop > 0) {
    std::string reason;
    {
      std::lock_guard lock(mutex_);
      reason = reason_;
    }
    stop_ = {StopKind::requested, next_step_,
             fmt::format("training stopped {}: requested by {} of {} rank(s){}", at, agreed.stop, setup_.size,
                         reason.empty() ? "" : " (here: " + reason + ")")};
  }
}

std::string RunController::where(std::size_t epoch, std::size_t step, uint64_t global_step) const {
  return fmt::format("step {} (epoch {}, batch {} of {})", global_step + 1, epoch + 1, step + 1,
                     setup_.steps_per_epoch);
}

}  // namespace tnt::trainer
