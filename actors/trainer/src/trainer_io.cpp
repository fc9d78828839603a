// Trainer calls that Tarantella's models have beside fit: distributed predict, weights-only and
// architecture-only saving. (evaluate and load_weights are in trainer.cpp.)
//
// Note [Distributed predict]: predict splits `source` into contiguous shares, rank r taking
// samples [begin_r, begin_r + count_r) with count_r = N / W, plus one for the first N mod W
// ranks (as data::BatchPlan shares a batch). Each rank runs forward passes of `batch` samples
// over its share, then one allgather (every share padded to the largest) puts the rows back in
// input order. A sample's row depends only on the sample and on the size of the forward pass it
// was in (oneDNN picks kernels by batch size), so predict on W ranks equals predict on one rank
// bit for bit whenever every share is a multiple of `batch` (the passes then have the sizes the
// single rank's have); otherwise the rows differ only in float rounding.
//
// Note [Distribution switches]: FitOptions::distribute_dataset = false is Tarantella's
// `distribute_dataset = False`: each rank passes its own data, and data::BatchPlan walks each
// rank's source with micro-batches (global batch = micro-batch x ranks). fit agrees with the
// other ranks on the switch and on the sizes of their sources before any step: every rank must
// take the same number of steps, else the ranks would wait on each other's allreduce.
// distribute_validation_dataset = false has each rank evaluate all of its own validation data;
// the loss and metric sums are added over ranks, so the figures are those of all ranks' data.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>

#include "tnt/collectives/communicator.h"
#include "tnt/compute/checkpoint.h"
#include "tnt/core/error.h"
#include "tnt/core/fail_point.h"
#include "tnt/dataset/loader.h"
#include "trainer_io.h"
#include "trainer_state.h"

namespace tnt::trainer {

namespace {

// Forward passes of `batch` samples over all of `source`, in order, into `out` (rows of `classes`).
void predict_rows(Trainer::State& s, const std::shared_ptr<const data::Source>& source, std::size_t batch,
                  const data::TransformOptions& transform, float* out, int64_t classes) {
  data::BatchPlanOptions plan;
  plan.global_batch = batch;
  Objective objective = objective_of(s);
  std::size_t row = 0;
  run_inference(s, source, plan, transform, [&](const compute::Tensor& output, const data::MicroBatch& b) {
    const auto p = objective.predictions(output, b.labels);
    std::memcpy(out + row * static_cast<std::size_t>(classes), p.data(),
                static_cast<std::size_t>(p.size()) * sizeof(float));
    row += b.local_count;
  });
}

}  // namespace

Objective objective_of(const Trainer::State& s) {
  if (s.objective) return *s.objective;
  return Objective(CompileOptions{}, compute::element_count(s.model.output_shape()));
}

void run_inference(Trainer::State& s, const std::shared_ptr<const data::Source>& source, data::BatchPlanOptions plan,
                   const data::TransformOptions& transform,
                   const std::function<void(const compute::Tensor& output, const data::MicroBatch& batch)>& each) {
  data::LoaderOptions lo;
  lo.plan = plan;
  lo.plan.num_samples = source->size();
  lo.plan.shuffle = false;
  lo.transform = transform;
  lo.end_epoch = 1;
  lo.prefetch = 0;
  data::Loader loader(source, lo);
  compute::Tensor input;
  s.compute.run([&] {
    while (auto batch = loader.next()) {
      if (batch->local_count == 0) continue;
      const auto& sh = batch->shape;
      input.resize({static_cast<int64_t>(batch->local_count), static_cast<int64_t>(sh.channels),
                    static_cast<int64_t>(sh.height), static_cast<int64_t>(sh.width)});
      std::memcpy(input.data(), batch->data.data(), batch->data.size() * sizeof(float));
      each(s.model.forward(input, compute::Mode::inference), *batch);
    }
  });
}

compute::Tensor Trainer::predict(std::shared_ptr<const data::Source> source, std::size_t batch,
                                 const data::TransformOptions& transform, PredictionsOn on) {
  auto& s = *state_;
  auto& comm = s.comm();
  fail_point("predict", comm.rank());
  if (!source) throw ConfigError("predict: no data");
  if (batch == 0) throw ConfigError("predict: batch must be at least 1");
  check_data(*source, "the data to predict");
  const auto classes = compute::element_count(s.model.output_shape());
  const auto n = source->size();
  const auto w = static_cast<std::size_t>(comm.size()), r = static_cast<std::size_t>(comm.rank());
  const std::size_t count = n / w + (r < n % w ? 1 : 0);
  const std::size_t begin = r * (n / w) + std::min(r, n % w);
  const std::size_t most = (n + w - 1) / w;
  const auto row_floats = static_cast<std::size_t>(classes);
  std::vector<float> mine(std::max<std::size_t>(most, 1) * row_floats, 0.0f);
  if (count > 0) predict_rows(s, data::make_subset(source, begin, count), batch, transform, mine.data(), classes);
  const bool here = on == PredictionsOn::every_rank || comm.is_master_rank();
  if (comm.is_master_rank() && w > 1) {
    spdlog::info("predict: {} samples split over {} ranks, {} to {} each, in forward passes of up to {}", n, w, n / w,
                 most, batch);
  }
  if (w == 1) {
    mine.resize(n * row_floats);
    return compute::Tensor(compute::Shape{static_cast<int64_t>(n), classes}, std::move(mine));
  }
  std::vector<float> all(w * mine.size());
  comm.allgather(mine.data(), all.data(), mine.size() * sizeof(float));
  if (!here) return compute::Tensor(compute::Shape{0, classes});
  compute::Tensor result(compute::Shape{static_cast<int64_t>(n), classes});
  std::size_t row = 0;
  for (std::size_t k = 0; k < w; ++k) {
    const std::size_t rows = n / w + (k < n % w ? 1 : 0);
    std::memcpy(result.data() + row * row_floats, all.data() + k * mine.size(), rows * row_floats * sizeof(float));
    row += rows;
  }
  return result;
}

// The master rank writes `kind`; every rank returns once it has (or throws when it could not,
// so that no rank waits for a file that will never come).
// The master rank runs `write`; every rank learns whether it failed and throws alike.
static void write_on_master(Trainer::State& s, const std::string& path, const char* what,
                            const std::function<void()>& write) {
  std::string error;
  int64_t failed = 0;  // 1: a DataError (what checkpoint writing throws), 2: a ConfigError (ONNX export's)
  if (s.master()) {
    try {
      write();
      spdlog::info("{} of model '{}' written to {}", what, s.model.spec().name, path);
    } catch (const ConfigError& e) {
      error = e.what();
      failed = 2;
    } catch (const Error& e) {
      error = e.what();
      failed = 1;
    }
  }
  s.comm().broadcast(&failed, sizeof failed, 0);
  if (failed == 0) return;
  const std::string message =
      s.master() ? error : fmt::format("the master rank could not write {} to '{}'", what, path);
  if (failed == 2) throw ConfigError(message);
  throw DataError(message);
}

static void save_as(Trainer::State& s, const std::string& path, compute::CheckpointKind kind, const char* what) {
  write_on_master(s, path, what, [&] { compute::save_checkpoint(path, compute::capture(s.model, nullptr, kind)); });
}

void Trainer::save_weights(const std::string& path) {
  save_as(*state_, path, compute::CheckpointKind::weights, "the weights");
}

void Trainer::save_architecture(const std::string& path) {
  save_as(*state_, path, compute::CheckpointKind::architecture, "the architecture");
}

void Trainer::export_onnx(const std::string& path, std::optional<compute::OnnxOutput> output) {
  auto& s = *state_;
  if (!output && !s.objective) throw LogicError("export_onnx: compile() first, or name the output");
  const compute::OnnxOutput kind = output ? *output : s.objective->onnx_output();
  write_on_master(s, path, "the ONNX inference graph", [&] { compute::export_onnx(s.model, path, kind); });
}

void agree_on_distribution(Trainer::State& s, const data::Source& train, const FitOptions& options) {
  auto& comm = s.comm();
  // {switch on, switch off, smallest source, -largest source}, each reduced with max.
  std::array<int64_t, 4> v{options.distribute_dataset ? 1 : 0, options.distribute_dataset ? 0 : 1,
                           -static_cast<int64_t>(train.size()), static_cast<int64_t>(train.size())};
  comm.allreduce(std::span<int64_t>(v), ReduceOp::max);
  if (v[0] == 1 && v[1] == 1) {
    throw ConfigError("ranks disagree on FitOptions::distribute_dataset: some have it on, others off");
  }
  if (options.distribute_dataset) return;
  const auto smallest = static_cast<std::size_t>(-v[2]), largest = static_cast<std::size_t>(v[3]);
  if (smallest != largest) {
    throw ConfigError(fmt::format(
        "distribute_dataset = false: every rank needs its own training data of the same size, but the ranks' "
        "sources hold between {} and {} samples (this rank: {}: {})",
        smallest, largest, train.size(), train.describe()));
  }
  const auto micro =
      options.micro_batch != 0 ? options.micro_batch : options.global_batch / static_cast<std::size_t>(comm.size());
  spdlog::info(
      "distribute_dataset = false: each of the {} rank(s) trains on its own data ({} samples each), a micro-batch of "
      "{} per rank: global batch {} = {} x {}",
      comm.size(), train.size(), micro, micro * static_cast<std::size_t>(comm.size()), micro, comm.size());
  if (!options.distribute_validation_dataset && options.validation) {
    spdlog::info("distribute_validation_dataset = false: each rank evaluates its own validation data ({} samples here)",
                 options.validation->size());
  }
}

compute::ModelSpec load_architecture(const std::string& path) { return compute::load_checkpoint(path).model; }

}  // namespace tnt::trainer
