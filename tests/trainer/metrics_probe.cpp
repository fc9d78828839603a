// Prints, on the master rank, the figures of a short fit and an evaluation with every loss and
// metric kind: binary cross-entropy, mean squared error, cross-entropy with top-k accuracy, and
// a user's metric. trainer.metrics_over_ranks runs it on 1, 2 and 3 ranks with batches that do
// not split evenly and compares the lines (metrics_over_ranks.py): the data-only metric and
// the evaluation before training must match exactly, the rest to float summation order.
#include <fmt/format.h>

#include <cstdio>
#include <exception>

#include "tnt/compute/zoo.h"
#include "tnt/dataset/source.h"
#include "tnt/trainer/trainer.h"

namespace {

using namespace tnt;

trainer::MetricFunction label_zero_share() {
  return {"label_zero", [](const compute::Tensor&, std::span<const std::int32_t> labels) {
            trainer::MetricPart part;
            for (auto l : labels) part.sum += l == 0 ? 1.0 : 0.0;
            part.count = static_cast<double>(labels.size());
            return part;
          }};
}

void print(const trainer::Session& session, const std::string& what, const trainer::Logs& logs) {
  if (!session.is_master_rank()) return;
  for (const auto& [key, value] : logs) fmt::print("{} {} {:.17g}\n", what, key, value);
}

void run(trainer::Session& session, const std::string& loss, int64_t outputs, std::vector<std::string> metrics) {
  auto all = data::make_synthetic_source({1, 6, 6}, 4, 157, 11);
  auto train = data::make_subset(all, 0, 127);
  auto test = data::make_subset(all, 127, 30);
  trainer::Trainer t(session, compute::zoo::mlp({1, 6, 6}, {12}, outputs));
  t.initialize(7);
  trainer::CompileOptions c;
  c.optimizer.kind = "sgd";
  c.schedule.base_rate = 0.05;
  c.loss = loss;
  c.metrics = std::move(metrics);
  c.custom_metrics = {label_zero_share()};
  t.compile(c);
  print(session, loss + " exact evaluate", t.evaluate(test, 7));
  trainer::FitOptions fit;
  fit.global_batch = 20;  // 7 steps, the last of 7 samples: uneven shares on 2 and 3 ranks
  fit.epochs = 2;
  fit.progress_bar = false;
  fit.validation = test;
  fit.validation_batch = 11;
  const auto history = t.fit(train, fit);
  print(session, loss + " fit", history.epochs.back());
  print(session, loss + " near evaluate", t.evaluate(test, 13));
}

}  // namespace

int main() {
  try {
    trainer::Session session;
    run(session, "binary_crossentropy", 4, {"accuracy"});
    run(session, "mean_squared_error", 4, {"accuracy", "top_2_accuracy"});
    run(session, "sparse_categorical_crossentropy", 4, {"accuracy", "top_2_accuracy", "top_k_accuracy"});
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "metrics probe: %s\n", e.what());
    return 1;
  }
}
