// The point-to-point protocol's frames as a receiver checks them (collectives/src/p2p_wire.h,
// Note [Point-to-point]) and the one-byte answer to an on-demand channel request
// (transport/src/side_channel.h, Note [Channels on first use]).
// Input: one byte choosing the frame, then its bytes:
//   0  an envelope as it lands in the receiver's inbox; accepted, its eager data is copied out
//      as a matching receive copies it (ASan sees a read past the frame);
//   1  a clear-to-send: the bytes that came (the first 8 are what it asks for), then the size of
//      the message it answers from the input's end;
//   2  credit: the lent limit (4 bytes), then a run of eager sends (a byte: its size in 64-byte
//      units) and returns of a quarter of the limit (a byte of 0), as a sender's books follow;
//   3  the answer to a channel request.
#include <cstring>
#include <vector>

#include "fuzz_support.h"
#include "p2p_wire.h"
#include "side_channel.h"
#include "tnt/core/error.h"

using namespace tnt::detail;

namespace {

void envelope(const std::uint8_t* data, std::size_t size) {
  // The inbox holds exactly what came, so that a copy past it is a heap overflow.
  std::vector<std::byte> inbox(size);
  if (size) std::memcpy(inbox.data(), data, size);
  Envelope parsed{};
  Envelope eager{};
  const bool eager_ok = read_eager_envelope(inbox.data(), inbox.size(), eager);
  if (!read_envelope(inbox.data(), inbox.size(), parsed).empty()) {
    if (eager_ok) tnt::fuzz::violated("read_eager_envelope accepted what read_envelope refuses");
    return;
  }
  if (eager_ok && (eager.tag != parsed.tag || eager.bytes != parsed.bytes || parsed.rendezvous != 0))
    tnt::fuzz::violated("read_eager_envelope read another envelope than read_envelope");
  if (parsed.rendezvous > kCreditEnvelope) tnt::fuzz::violated("an envelope of unknown kind was accepted");
  if (parsed.tag < 0) tnt::fuzz::violated("an envelope with a negative tag was accepted");
  if (parsed.rendezvous == kCreditEnvelope && (size != sizeof(Envelope) || parsed.bytes != 0 || parsed.tag != 0))
    tnt::fuzz::violated("a credit envelope with data, bytes or a tag was accepted");
  if (parsed.rendezvous) {
    if (size != sizeof(Envelope)) tnt::fuzz::violated("a rendezvous envelope with data was accepted");
    return;
  }
  // A receive of up to 64 KiB takes the data, as take_eager() does.
  const std::size_t taken = std::min<std::uint64_t>(parsed.bytes, 65536);
  std::vector<std::byte> receive(taken);
  if (taken) std::memcpy(receive.data(), inbox.data() + sizeof(Envelope), taken);
  if (parsed.bytes != size - sizeof(Envelope)) tnt::fuzz::violated("an eager envelope announces what did not come");
}

void clear_to_send(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return;
  const std::uint64_t message = [&] {
    std::uint64_t value = 0;
    std::memcpy(&value, data + size - 8, 8);
    return value;
  }();
  const std::size_t received = size - 8;
  std::uint64_t accepted = 0;
  std::memcpy(&accepted, data, std::min<std::size_t>(received, sizeof accepted));
  if (!check_clear_to_send(received, accepted, message).empty()) return;
  if (received != sizeof accepted) tnt::fuzz::violated("a clear-to-send of the wrong size was accepted");
  if (accepted > message) tnt::fuzz::violated("a clear-to-send for more than the message was accepted");
}

void credit(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return;
  std::uint32_t limit = 0;
  std::memcpy(&limit, data, 4);
  const std::size_t quantum = std::max<std::size_t>(1, limit / 4);  // as PointToPoint lends it back
  std::size_t credit = limit;
  for (std::size_t i = 4; i < size; ++i) {
    if (data[i] == 0) {
      std::string error;
      const std::size_t after = return_credit(credit, quantum, limit, error);
      if (!error.empty()) {
        if (credit + quantum <= limit) tnt::fuzz::violated("a return within the loan was refused: " + error);
        if (after != credit) tnt::fuzz::violated("a refused return changed the credit");
        return;  // the job fails here
      }
      if (after > limit) tnt::fuzz::violated("credit beyond the loan was accepted");
      credit = after;
    } else {
      credit -= std::min<std::size_t>(credit, std::size_t{data[i]} * 64);
    }
  }
}

void channel_answer(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return;
  try {
    const bool taken = tnt::transport::channel_request_taken(data[0], "rank 1 (fuzz peer)");
    if (data[0] > 1 || taken != (data[0] == 1)) tnt::fuzz::violated("a channel answer was misread");
  } catch (const tnt::JobError&) {
    if (data[0] <= 1) tnt::fuzz::violated("a valid channel answer was refused");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  switch (data[0] % 4) {
    case 0: envelope(data + 1, size - 1); break;
    case 1: clear_to_send(data + 1, size - 1); break;
    case 2: credit(data + 1, size - 1); break;
    case 3: channel_answer(data + 1, size - 1); break;
  }
  return 0;
}
