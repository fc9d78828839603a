// A user's own model trained with tnt's C++ API: the same program runs alone or as every rank
// of a tnt-launch job; nothing in it knows about ranks.
//
//   build/examples/train-api/tnt-example-train-api                       # one process
//   build/bin/tnt-launch -n 2 -- build/examples/train-api/tnt-example-train-api
#include <fmt/format.h>

#include <cstdio>
#include <exception>

#include "tnt/compute/spec.h"
#include "tnt/dataset/source.h"
#include "tnt/trainer/trainer.h"

namespace {

// The user's model: a small convolutional network, built with compute/'s layer builders.
tnt::compute::ModelSpec my_model() {
  using namespace tnt::compute::layers;
  tnt::compute::ModelSpec spec;
  spec.name = "small_cnn";
  spec.input = {1, 28, 28};
  Conv2DOptions conv;
  conv.filters = 8;
  conv.kernel = {3, 3};
  conv.padding = {1, 1};
  conv.init = "he_normal";
  spec.layers = {conv2d(conv), activation("relu"), max_pool2d(2), flatten(), dense(64), activation("relu"), dense(10)};
  return spec;
}

// Prints the validation accuracy after each epoch (on the master rank).
class PrintEpoch : public tnt::trainer::Callback {
 public:
  explicit PrintEpoch(bool master) : master_(master) {}
  void on_epoch_end(std::size_t epoch, const tnt::trainer::Logs& logs) override {
    if (master_) fmt::print("callback: epoch {} val_accuracy {:.4f}\n", epoch + 1, logs.at("val_accuracy"));
  }

 private:
  bool master_;
};

}  // namespace

int main() {
  try {
    tnt::trainer::Session session;  // joins the job started by tnt-launch (or is a job of one)

    // Synthetic 28x28 images of 10 learnable classes: 4000 to train on, 1000 to test.
    auto all = tnt::data::make_synthetic_source({1, 28, 28}, 10, 5000, 7);
    auto train = tnt::data::make_subset(all, 0, 4000);
    auto test = tnt::data::make_subset(all, 4000, 1000);

    tnt::trainer::Trainer model(session, my_model());  // wrap
    model.initialize(42);
    tnt::trainer::CompileOptions compile;  // loss: softmax cross-entropy, metric: accuracy
    compile.optimizer.kind = "adam";
    compile.schedule.base_rate = 0.002;
    model.compile(compile);

    PrintEpoch print(session.is_master_rank());
    tnt::trainer::FitOptions fit;
    fit.global_batch = 64;  // the global batch: each rank takes its share
    fit.epochs = 2;
    fit.validation = test;
    fit.callbacks = {&print};
    model.fit(train, fit);

    const auto result = model.evaluate(test, 500);
    const auto probabilities = model.predict(tnt::data::make_subset(test, 0, 3), 3);
    if (session.is_master_rank()) {
      fmt::print("test accuracy: {:.4f}\n", result.at("accuracy"));
      for (int64_t i = 0; i < 3; ++i) {
        int best = 0;
        for (int k = 1; k < 10; ++k)
          if (probabilities[i * 10 + k] > probabilities[i * 10 + best]) best = k;
        fmt::print("sample {}: class {} (p = {:.3f})\n", i, best, probabilities[i * 10 + best]);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train-api example failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
