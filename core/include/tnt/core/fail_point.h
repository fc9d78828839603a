#pragma once
// Fault injection for tests: TNT_TEST_FAIL_AT=phase:rank[,phase:rank...] makes the named rank
// throw a tnt::Error at the named phase, as a rank-local error there would (a file it cannot
// write, a callback that throws). The fault-matrix test (tests/trainer/fault_matrix.py) fails
// every phase on the first and the last rank and checks that every rank ends, non-zero, in time
// (Note [One failure, every rank told] in transport/src/rendezvous/control_plane.cpp).
#include <array>
#include <string_view>

namespace tnt {

// Every phase with a fail point, in the order a run passes them. Each names one place in the
// code: grep for `fail_point("phase"`.
inline constexpr std::array<std::string_view, 10> kFailPhases = {
    "start",           "data",     "step",    "callback",  "checkpoint_write",
    "checkpoint_read", "evaluate", "predict", "translate", "goodbye"};

// Throws tnt::Error("TNT_TEST_FAIL_AT: injected failure at PHASE on rank RANK (wall clock T)")
// when TNT_TEST_FAIL_AT names this phase and rank; a no-op otherwise (one string comparison
// after the first call). A TNT_TEST_FAIL_AT that names an unknown phase or no rank is a
// ConfigError naming the phases.
void fail_point(std::string_view phase, int rank);

}  // namespace tnt
