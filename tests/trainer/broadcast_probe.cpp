// Every rank of a tnt-launch job starts from its own weights (seed 1000 + rank); fit's initial
// broadcast of rank 0's model is then the only thing that can make the ranks agree. The probe
// exits non-zero if the ranks did not start apart (the test would prove nothing) or if they do
// not hold bitwise the same weights after a short fit (trainer.initial_broadcast).
#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string_view>

#include "tnt/collectives/communicator.h"
#include "tnt/compute/spec.h"
#include "tnt/dataset/source.h"
#include "tnt/trainer/trainer.h"

namespace {

tnt::compute::ModelSpec small_model() {
  using namespace tnt::compute::layers;
  tnt::compute::ModelSpec spec;
  spec.name = "broadcast_probe";
  spec.input = {1, 8, 8};
  spec.layers = {flatten(), dense(16), activation("relu"), dense(4)};
  return spec;
}

// FNV-1a over the bytes of every parameter, as a signed number for a min/max allreduce.
std::int64_t weights_hash(tnt::trainer::Trainer& trainer) {
  std::uint64_t h = 1469598103934665603ULL;
  auto& model = trainer.model();
  for (std::size_t i = 0; i < model.parameter_count(); ++i) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(model.weights(i));
    const auto n = static_cast<std::size_t>(model.parameter(i).size) * sizeof(float);
    for (std::size_t b = 0; b < n; ++b) h = (h ^ bytes[b]) * 1099511628211ULL;
  }
  return static_cast<std::int64_t>(h);
}

// True if every rank holds the same `value`.
bool all_equal(tnt::Communicator& comm, std::int64_t value) {
  std::int64_t lo = value;
  std::int64_t hi = value;
  comm.allreduce(&lo, 1, tnt::DataType::int64, tnt::ReduceOp::min);
  comm.allreduce(&hi, 1, tnt::DataType::int64, tnt::ReduceOp::max);
  return lo == hi;
}

}  // namespace

int main() {
  try {
    tnt::trainer::Session session;
    auto& comm = session.communicator();
    tnt::trainer::Trainer trainer(session, small_model());
    trainer.initialize(1000 + static_cast<std::uint64_t>(session.rank()));
    tnt::trainer::CompileOptions compile;
    compile.optimizer.kind = "sgd";
    trainer.compile(compile);

    if (session.size() > 1 && all_equal(comm, weights_hash(trainer))) {
      std::fprintf(stderr, "rank %d: the ranks start from the same weights: nothing to show\n", session.rank());
      return 1;
    }
    tnt::trainer::FitOptions fit;
    fit.global_batch = 16;
    fit.epochs = 1;
    fit.max_steps = 2;
    trainer.fit(tnt::data::make_synthetic_source({1, 8, 8}, 4, 64, 3), fit);
    if (!all_equal(comm, weights_hash(trainer))) {
      std::fprintf(stderr, "rank %d: the ranks' weights differ after fit: rank 0's were not broadcast\n",
                   session.rank());
      return 1;
    }
    if (session.is_master_rank()) {
      fmt::print("{} ranks started from different weights and agree after fit\n", session.size());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "broadcast_probe: %s\n", e.what());
    return 1;
  }
}
