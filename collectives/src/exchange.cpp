#include "exchange.h"

#include <algorithm>

#include "point_to_point.h"
#include "tnt/core/copy.h"

namespace tnt::detail {

// Note [Exchanges]: the collectives that move different data between every pair of ranks, or
// gather to and scatter from a root, run on point-to-point messages in a context of their own
// (Note [Contexts]: 4c + 2 for communicator c), tagged by their place in the issue order, so
// they match neither the user's messages nor each other. Each is a few rounds of transfers
// posted at once:
//   - alltoall(v): step k sends to rank + k and receives from rank - k. While every block is at
//     most 64 KiB, all n - 1 steps are posted at once: the back ends overlap them, and a rank
//     never waits for one slow peer before talking to the next. Larger blocks post at most 8
//     steps per round, which bounds the rendezvous transfers that converge on one rank (incast
//     over TCP) without waiting for one peer at a time. Rounds of one step (pairwise exchange)
//     were the rule above 64 KiB until 2026-11-28; where ranks outnumber cores a round then
//     waits for the one peer it names to be scheduled. Measured that day, 4 ranks on this 2-core
//     machine, OSU's osu_alltoall through the MPI layer, 3 alternating rounds, us per call,
//     128 KiB / 256 KiB / 1 MiB: pairwise 216 / 415 / 1456, all at once 129 / 257 / 1151.
//     Bruck's algorithm, which trades bandwidth for log(n) rounds at tiny blocks and many ranks,
//     is not implemented: at the rank counts measured here (2 to 8 per host) posting all at once
//     already costs one round.
//   - gather(v) and scatter(v): the root posts one transfer per rank, the others one.
//   - allgatherv: every rank sends its block to every other at once.
//   - reduce and reduce-scatter: the inputs go to the rank that owns the result, which folds
//     them in rank order (reduce_in_order), so the result is defined as MPI defines it and is
//     bitwise the same wherever it is computed; the owner holds one block per rank meanwhile.
//   - scan and exscan: a chain in rank order, each rank folding its input into what the
//     previous one sends: n - 1 steps, the fold in rank order by construction.

void ExchangeOperation::advance() {
  std::vector<Transfer> transfers;
  do {
    transfers.clear();
    if (!next_round(round_++, transfers)) {
      finish();
      return;
    }
  } while (transfers.empty());
  PointToPoint& messages = core_.collective_messages();
  const int tag = static_cast<int>(sequence_ & 0x7fffffffu);
  pending_ = transfers.size() + 1;  // one more while posting: an eager send completes inside send()
  for (const Transfer& t : transfers) {
    auto state =
        std::make_shared<OperationState>(state_->loop, [this](const std::string& error) { on_transfer(error); });
    if (t.send)
      messages.send(std::move(state), t.peer, tag, t.data, t.bytes, false);
    else
      messages.receive(std::move(state), t.peer, tag, t.data, t.bytes);
  }
  on_transfer({});
}

void ExchangeOperation::on_transfer(const std::string& error) {
  if (!error.empty()) {
    // A message that does not fit: the ranks disagree about the counts. (After a job failure
    // this repeats it, and fail_job ignores it.)
    core_.fail_job(std::string(name()) + ": " + error + " (do all ranks pass matching counts?)");
    return;
  }
  if (--pending_ == 0) advance();
}

namespace {
void copy_own(std::byte* to, const std::byte* from, std::size_t bytes) {
  if (bytes && to != from) copy_bytes(to, from, bytes);
}
}  // namespace

// ---- alltoall(v) -------------------------------------------------------------------------------

void AlltoallvOperation::add_exchange(int to, int from, std::vector<Transfer>& transfers) const {
  const auto t = static_cast<std::size_t>(to);
  const auto f = static_cast<std::size_t>(from);
  transfers.push_back({false, from, recv_ + receives_.offsets[f], receives_.bytes[f]});
  transfers.push_back({true, to, const_cast<std::byte*>(send_) + sends_.offsets[t], sends_.bytes[t]});
}

bool AlltoallvOperation::next_round(int round, std::vector<Transfer>& transfers) {
  const int n = core_.size();
  const int me = core_.rank();
  const auto m = static_cast<std::size_t>(me);
  if (round == 0) copy_own(recv_ + receives_.offsets[m], send_ + sends_.offsets[m], receives_.bytes[m]);
  const int first_step = round * peers_per_round_ + 1;
  if (first_step >= n) return false;
  for (int step = first_step; step < std::min(n, first_step + peers_per_round_); ++step)
    add_exchange((me + step) % n, (me + n - step) % n, transfers);
  return true;
}

// ---- gather(v), scatter(v), allgatherv ---------------------------------------------------------

bool RootedOperation::next_round(int round, std::vector<Transfer>& transfers) {
  if (round > 0) return false;
  const int me = core_.rank();
  if (me != root_) {
    transfers.push_back({to_root_, root_, mine_, my_bytes_});
    return true;
  }
  const auto m = static_cast<std::size_t>(me);
  if (to_root_)
    copy_own(all_ + layout_.offsets[m], mine_, layout_.bytes[m]);
  else
    copy_own(mine_, all_ + layout_.offsets[m], layout_.bytes[m]);
  for (int r = 0; r < core_.size(); ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (r != me) transfers.push_back({!to_root_, r, all_ + layout_.offsets[i], layout_.bytes[i]});
  }
  return true;
}

bool AllgathervOperation::next_round(int round, std::vector<Transfer>& transfers) {
  if (round > 0) return false;
  const int me = core_.rank();
  const auto m = static_cast<std::size_t>(me);
  copy_own(recv_ + receives_.offsets[m], send_, receives_.bytes[m]);
  for (int r = 0; r < core_.size(); ++r) {
    if (r == me) continue;
    const auto i = static_cast<std::size_t>(r);
    transfers.push_back({false, r, recv_ + receives_.offsets[i], receives_.bytes[i]});
    transfers.push_back({true, r, const_cast<std::byte*>(send_), send_bytes_});
  }
  return true;
}

// ---- reduce, reduce-scatter ----------------------------------------------------------------------

std::size_t FoldOperation::offset_of(int rank) const {
  std::size_t offset = 0;
  for (int r = 0; r < rank; ++r) offset += counts_[static_cast<std::size_t>(r)];
  return offset;
}

bool FoldOperation::next_round(int round, std::vector<Transfer>& transfers) {
  const int n = core_.size();
  const int me = core_.rank();
  const std::size_t element = size_of(type_);
  const bool scattering = !counts_.empty();
  // The rank that folds this rank's result, and how many elements it is.
  const int owner = scattering ? me : root_;
  const std::size_t count = scattering ? counts_[static_cast<std::size_t>(me)] : count_;
  const std::size_t bytes = count * element;
  if (round == 0) {
    if (scattering) {
      for (int r = 0; r < n; ++r) {
        if (r == me) continue;
        transfers.push_back({true, r, const_cast<std::byte*>(send_) + offset_of(r) * element,
                             counts_[static_cast<std::size_t>(r)] * element});
      }
    } else if (me != root_) {
      transfers.push_back({true, root_, const_cast<std::byte*>(send_), bytes});
      return true;
    }
    received_.resize(static_cast<std::size_t>(n) * bytes);
    for (int r = 0; r < n; ++r) {
      if (r != me) transfers.push_back({false, r, received_.data() + static_cast<std::size_t>(r) * bytes, bytes});
    }
    return true;
  }
  if (round > 1 || me != owner) return false;
  const std::byte* own = send_ + (scattering ? offset_of(me) * element : 0);
  // The result may overwrite only the first input (reduce_in_order): an own input that is the
  // result's own buffer (in place) is moved out of its way first.
  if (own == recv_ && me != 0) {
    std::byte* slot = received_.data() + static_cast<std::size_t>(me) * bytes;
    copy_own(slot, own, bytes);
    own = slot;
  }
  std::vector<const std::byte*> inputs(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    inputs[static_cast<std::size_t>(r)] = r == me ? own : received_.data() + static_cast<std::size_t>(r) * bytes;
  reduce_in_order(inputs, recv_, count, type_, op_);
  return false;
}

// ---- scan, exscan --------------------------------------------------------------------------------

bool ScanOperation::next_round(int round, std::vector<Transfer>& transfers) {
  const int n = core_.size();
  const int me = core_.rank();
  const std::size_t bytes = count_ * size_of(type_);
  if (round == 0) {
    if (me > 0) {
      prefix_.resize(bytes);
      transfers.push_back({false, me - 1, prefix_.data(), bytes});
    }
    return true;
  }
  if (round > 1) return false;
  const std::byte* onward = send_;
  if (me > 0) {
    carry_.resize(bytes);
    const std::byte* inputs[] = {prefix_.data(), send_};
    reduce_in_order(inputs, carry_.data(), count_, type_, op_);
    copy_own(recv_, exclusive_ ? prefix_.data() : carry_.data(), bytes);
    onward = carry_.data();
  } else if (!exclusive_) {
    copy_own(recv_, send_, bytes);
  }
  if (me < n - 1) transfers.push_back({true, me + 1, const_cast<std::byte*>(onward), bytes});
  return true;
}

}  // namespace tnt::detail
