// Keras's callbacks across ranks, under tnt-launch -n 1, 2 and 3 (callbacks_over_ranks.py
// compares the lines "RESULT ..." the master prints on each).
//
// The validation data are the training distribution with every label moved to the next class:
// the better the model learns, the worse its validation loss. So val_loss improves at epoch 1
// only (from nothing) and then never, on every number of ranks.
//
//   1. EarlyStopping (val_loss, patience 2, restore_best_weights) stops after epoch 3; the final
//      weights are epoch 1's, as the ModelCheckpoint written after every epoch holds them; a
//      ModelCheckpoint with save_best_only wrote epoch 1's file alone.
//   2. ReduceLROnPlateau (val_loss, factor 0.5, patience 1) halves the rate after epochs 2, 3, 4:
//      every rank trains each step at the same rate, which changes at steps 21 and 31.
//
// Usage: tnt-trainer-callbacks-probe DIR (an empty scratch folder). Exits 1 on any failed check.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tnt/collectives/communicator.h"
#include "tnt/compute/checkpoint.h"
#include "tnt/compute/zoo.h"
#include "tnt/dataset/source.h"
#include "tnt/trainer/callbacks.h"
#include "tnt/trainer/trainer.h"

namespace {

using namespace tnt;

int failures = 0;
int rank = 0;

void check(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  fmt::print("rank {}: FAIL: {}\n", rank, what);
}

// The base's samples with label + 1 (mod classes).
class NextLabel : public data::Source {
 public:
  explicit NextLabel(std::shared_ptr<const data::Source> base) : base_(std::move(base)) {}
  std::size_t size() const override { return base_->size(); }
  data::SampleShape shape() const override { return base_->shape(); }
  int num_classes() const override { return base_->num_classes(); }
  std::int32_t read(std::size_t index, std::span<float> out) const override {
    return (base_->read(index, out) + 1) % base_->num_classes();
  }
  std::string describe() const override { return "next label of " + base_->describe(); }

 private:
  std::shared_ptr<const data::Source> base_;
};

std::unique_ptr<trainer::Trainer> make_trainer(trainer::Session& session) {
  auto t = std::make_unique<trainer::Trainer>(session, compute::zoo::mlp({1, 8, 8}, {16}, 3));
  t->initialize(7);
  trainer::CompileOptions c;
  c.optimizer.kind = "sgd";
  c.optimizer.momentum = 0.9;
  c.schedule.base_rate = 0.05;
  t->compile(c);
  return t;
}

uint64_t weights_hash(const compute::Model& m) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (std::size_t i = 0; i < m.parameter_count(); ++i) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(m.weights(i));
    for (int64_t b = 0; b < m.parameter(i).size * 4; ++b) h = (h ^ bytes[b]) * 1099511628211ull;
  }
  return h;
}

bool same_weights(const compute::Model& m, const std::string& path) {
  const auto saved = compute::load_checkpoint(path);
  if (saved.parameters.size() != m.parameter_count()) return false;
  for (std::size_t i = 0; i < m.parameter_count(); ++i) {
    const auto& v = saved.parameters[i].values;
    if (!std::equal(v.begin(), v.end(), m.weights(i), m.weights(i) + m.parameter(i).size)) return false;
  }
  return true;
}

template <class T>
bool same_everywhere(Communicator& comm, T mine) {
  std::vector<T> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(&mine, all.data(), sizeof mine);
  for (const auto& x : all)
    if (x != all.front()) return false;
  return true;
}

trainer::FitOptions fit_options(std::shared_ptr<const data::Source> validation, std::size_t epochs) {
  trainer::FitOptions fit;
  fit.global_batch = 30;  // 10 steps an epoch
  fit.epochs = epochs;
  fit.progress_bar = false;
  fit.validation = std::move(validation);
  fit.validation_batch = 40;
  return fit;
}

void early_stopping(trainer::Session& session, const std::shared_ptr<const data::Source>& train,
                    const std::shared_ptr<const data::Source>& validation, const std::filesystem::path& dir) {
  auto t = make_trainer(session);
  trainer::ModelCheckpoint every({.filepath = (dir / "epoch-{epoch}.ckpt").string(), .save_weights_only = true}, *t);
  trainer::ModelCheckpoint best(
      {.filepath = (dir / "best" / "best-{epoch:02d}-{val_loss:.3f}.ckpt").string(), .save_best_only = true}, *t);
  trainer::EarlyStopping stop({.monitor = "val_loss", .patience = 2, .restore_best_weights = true}, *t);
  auto fit = fit_options(validation, 10);
  fit.callbacks = {&every, &best, &stop};
  const auto history = t->fit(train, fit);
  std::vector<double> val_losses;
  for (const auto& logs : history.epochs) val_losses.push_back(logs.at("val_loss"));
  const auto stopped = stop.stopped_epoch().value_or(999), best_epoch = stop.best_epoch().value_or(999);
  check(stopped == 2 && best_epoch == 0,
        fmt::format("EarlyStopping stopped after epoch {} (best {}), expected 3 (best 1); val_loss {}", stopped + 1,
                    best_epoch + 1, val_losses));
  check(history.epochs.size() == stopped + 1, fmt::format("{} epochs trained", history.epochs.size()));
  check(same_everywhere(session.communicator(), weights_hash(t->model())), "the ranks' final weights differ");
  if (session.is_master_rank()) {
    check(same_weights(t->model(), every.saved().at(best_epoch)),
          "restore_best_weights: the final weights are not those of " + every.saved().at(best_epoch));
    check(!same_weights(t->model(), every.saved().back()), "the last epoch's weights equal the best's: a vacuous test");
    std::vector<std::string> files;
    for (const auto& f : std::filesystem::directory_iterator(dir / "best")) files.push_back(f.path().filename());
    const auto expected = fmt::format("best-01-{:.3f}.ckpt", val_losses.at(0));
    check(files == std::vector<std::string>{expected},
          fmt::format("save_best_only wrote {}, expected [{}]", files, expected));
    check(same_weights(t->model(), (dir / "best" / expected).string()), "the best-only checkpoint is not epoch 1's");
    fmt::print("RESULT early_stopping stopped_epoch={} best_epoch={} epochs={}\n", stopped + 1, best_epoch + 1,
               history.epochs.size());
  }
}

// The rate each optimizer step (1-based) trains at: the next step's rate as on_batch_end sees
// it, replaced at on_epoch_begin by what the epoch's end decided (agreed before that step).
struct Rates : trainer::Callback {
  std::map<uint64_t, double> rates;
  void on_epoch_begin(std::size_t) override { rates[run().optimizer_steps() + 1] = run().learning_rate(); }
  void on_batch_end(std::size_t, std::size_t, const trainer::Logs&) override {
    rates[run().optimizer_steps() + 1] = run().learning_rate();
  }
};

void reduce_lr(trainer::Session& session, const std::shared_ptr<const data::Source>& train,
               const std::shared_ptr<const data::Source>& validation) {
  auto t = make_trainer(session);
  trainer::ReduceLROnPlateau plateau({.monitor = "val_loss", .factor = 0.5, .patience = 1, .min_delta = 0.0});
  Rates rates;
  auto fit = fit_options(validation, 4);
  fit.callbacks = {&plateau, &rates};
  const auto history = t->fit(train, fit);
  std::vector<uint64_t> changes;
  uint64_t h = 0;
  for (const auto& [step, rate] : rates.rates) {
    if (step > history.steps) break;  // recorded after the last step: never trained
    if (step > 1 && rate != rates.rates.at(step - 1)) changes.push_back(step);
    h = h * 1000003 + std::bit_cast<uint64_t>(rate);
  }
  check(same_everywhere(session.communicator(), h), "the ranks trained at different rates");
  // The third, after the last epoch, has no step left to change.
  check(plateau.reductions() == 3, fmt::format("{} reductions, expected 3", plateau.reductions()));
  check(changes == std::vector<uint64_t>{21, 31},
        fmt::format("the rate changed at steps {}, expected [21, 31]", changes));
  check(rates.rates.at(history.steps) == 0.0125,
        fmt::format("last step's rate {}, expected 0.0125", rates.rates.at(history.steps)));
  if (session.is_master_rank()) fmt::print("RESULT reduce_lr_on_plateau changes_at_steps={}\n", changes);
}

}  // namespace

int main(int argc, char** argv) {
  trainer::Session session;
  rank = session.rank();
  if (argc != 2) {
    fmt::print(stderr, "usage: tnt-trainer-callbacks-probe DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const auto all = data::make_synthetic_source({1, 8, 8}, 3, 420, 4);
  const auto train = data::make_subset(all, 0, 300);
  const auto validation = std::make_shared<NextLabel>(data::make_subset(all, 300, 120));
  try {
    early_stopping(session, train, validation, dir);
    reduce_lr(session, train, validation);
  } catch (const std::exception& e) {
    fmt::print("rank {}: FAIL: {}\n", rank, e.what());
    return 1;
  }
  std::vector<int> everyone(static_cast<std::size_t>(session.size()));
  session.communicator().allgather(&failures, everyone.data(), sizeof failures);
  int total = 0;
  for (int f : everyone) total += f;
  if (rank == 0 && total == 0) fmt::print("callbacks across {} ranks: PASS\n", session.size());
  if (rank == 0 && total > 0) fmt::print("callbacks: {} failure(s)\n", total);
  return total == 0 ? 0 : 1;
}
