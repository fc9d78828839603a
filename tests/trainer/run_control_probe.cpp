// Run control across ranks, under tnt-launch -n 3: what one rank alone asks for is done by every
// rank at the same step (Note [Run control] in actors/trainer/src/run_control.h).
//
//   1. Rank 1 alone asks to stop in on_batch_end of step 4 (0-based); the master alone sets the
//      learning-rate factor 0.5 after step 1, rank 2 alone 4.0 (ignored: the master's value
//      is every rank's). Every rank trains 6 steps, ends with the same weights (each started
//      from its own), and with factor 0.5.
//   2. Rank 2 alone raises SIGUSR1 in on_batch_end of step 2 (stop_on_signals): every rank
//      throws Preempted after step 4, once the master has written the checkpoint.
//
// Prints every failed check and exits 1 on any (on every rank), else 0.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tnt/collectives/communicator.h"
#include "tnt/compute/checkpoint.h"
#include "tnt/compute/zoo.h"
#include "tnt/dataset/source.h"
#include "tnt/trainer/trainer.h"

namespace {

using namespace tnt;

int failures = 0;

void check(bool ok, const std::string& what, int rank) {
  if (ok) return;
  ++failures;
  fmt::print("rank {}: FAIL: {}\n", rank, what);
}

uint64_t weights_hash(trainer::Trainer& t) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (std::size_t i = 0; i < t.model().parameter_count(); ++i) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(t.model().weights(i));
    for (int64_t b = 0; b < t.model().parameter(i).size * 4; ++b) h = (h ^ bytes[b]) * 1099511628211ull;
  }
  return h;
}

// Every rank's value, so that each rank can check that all agree.
template <class T>
std::vector<T> everyone(Communicator& comm, T mine) {
  std::vector<T> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(&mine, all.data(), sizeof mine);
  return all;
}

template <class T>
bool all_equal(const std::vector<T>& v) {
  for (const auto& x : v)
    if (x != v.front()) return false;
  return true;
}

struct OneRankAsks : trainer::Callback {
  int rank = 0;
  std::size_t batches = 0;
  double final_factor = 0.0;
  void on_batch_end(std::size_t, std::size_t step, const trainer::Logs&) override {
    ++batches;
    if (step == 1 && rank == 0) run().set_learning_rate_factor(0.5);
    if (step == 1 && rank == 2) run().set_learning_rate_factor(4.0);
    if (step == 4 && rank == 1) run().stop_training("rank 1 alone asks");
  }
  void on_train_end(const trainer::Logs&) override { final_factor = run().learning_rate_factor(); }
};

struct OneRankIsSignalled : trainer::Callback {
  int rank = 0;
  void on_batch_end(std::size_t, std::size_t step, const trainer::Logs&) override {
    if (step == 2 && rank == 2) raise(SIGUSR1);
  }
};

std::unique_ptr<trainer::Trainer> make_trainer(trainer::Session& session) {
  auto t = std::make_unique<trainer::Trainer>(session, compute::zoo::mlp({1, 8, 8}, {16}, 3));
  t->initialize(100 + static_cast<uint64_t>(session.rank()));  // only fit's broadcast makes them agree
  trainer::CompileOptions c;
  c.optimizer.kind = "sgd";
  c.optimizer.momentum = 0.9;
  c.schedule.base_rate = 0.05;
  t->compile(c);
  return t;
}

trainer::FitOptions fit_options() {
  trainer::FitOptions fit;
  fit.global_batch = 30;  // 10 steps an epoch over 300 samples
  fit.epochs = 2;
  fit.progress_bar = false;
  return fit;
}

void stop_asked_by_one_rank(trainer::Session& session, const std::shared_ptr<const data::Source>& data) {
  const int rank = session.rank();
  auto t = make_trainer(session);
  OneRankAsks cb;
  cb.rank = rank;
  auto fit = fit_options();
  fit.callbacks = {&cb};
  const auto history = t->fit(data, fit);
  auto& comm = session.communicator();
  check(history.steps == 6, fmt::format("stop: {} steps trained, expected 6", history.steps), rank);
  check(all_equal(everyone<uint64_t>(comm, history.steps)), "stop: ranks trained different numbers of steps", rank);
  check(cb.batches == 6, fmt::format("stop: {} batch callbacks, expected 6", cb.batches), rank);
  check(cb.final_factor == 0.5, fmt::format("stop: factor {} at the end, expected the master's 0.5", cb.final_factor),
        rank);
  check(all_equal(everyone<uint64_t>(comm, weights_hash(*t))), "stop: the ranks' weights differ", rank);
}

void signal_to_one_rank(trainer::Session& session, const std::shared_ptr<const data::Source>& data) {
  const int rank = session.rank();
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("tnt_run_control_probe_{}", getppid());
  const auto ckpt = (dir / "preempted.ckpt").string();
  if (rank == 0) {
    std::filesystem::create_directories(dir);
    std::filesystem::remove(ckpt);
  }
  session.communicator().barrier();
  auto t = make_trainer(session);
  OneRankIsSignalled cb;
  cb.rank = rank;
  auto fit = fit_options();
  fit.callbacks = {&cb};
  fit.stop_on_signals = true;
  fit.checkpoint_path = ckpt;
  std::string what;
  try {
    t->fit(data, fit);
  } catch (const trainer::Preempted& e) {
    what = e.what();
  }
  check(what.find("every rank stopped after step 4 (epoch 1, batch 4 of 10)") != std::string::npos,
        "signal: not preempted after step 4: '" + what + "'", rank);
  const bool mine = what.find("SIGUSR1 received by this rank") != std::string::npos;
  check(mine == (rank == 2), "signal: wrong about who received it: '" + what + "'", rank);
  // Every rank left fit after the master wrote the checkpoint.
  const auto saved = compute::load_checkpoint(ckpt);
  check(saved.step == 4 && saved.optimizer_state.steps == 4,
        fmt::format("signal: the checkpoint is at step {} (optimizer step {}), expected 4", saved.step,
                    saved.optimizer_state.steps),
        rank);
  session.communicator().barrier();
  if (rank == 0) std::filesystem::remove_all(dir);
}

}  // namespace

int main() {
  trainer::Session session;
  const int rank = session.rank();
  const auto data = data::make_synthetic_source({1, 8, 8}, 3, 300, 4);
  try {
    stop_asked_by_one_rank(session, data);
    signal_to_one_rank(session, data);
  } catch (const std::exception& e) {
    fmt::print("rank {}: FAIL: {}\n", rank, e.what());
    return 1;
  }
  const auto all = everyone<int>(session.communicator(), failures);
  int total = 0;
  for (int f : all) total += f;
  if (rank == 0 && total == 0) fmt::print("run control across {} ranks: PASS\n", session.size());
  if (rank == 0 && total > 0) fmt::print("run control: {} failure(s)\n", total);
  return total == 0 ? 0 : 1;
}
