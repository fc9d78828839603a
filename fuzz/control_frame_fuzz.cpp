// Control-plane frames (transport/src/framing.cpp) and the Cap'n Proto messages they carry
// (transport/src/wire.capnp): a frame as read from a socket, then read as a Hello, a
// RendezvousReply or a Control message, every field, as the rendezvous reads them.
// Input: one byte choosing the message, then the frame (4-byte length prefix and payload).
#include <kj/exception.h>

#include "framing.h"
#include "fuzz_support.h"
#include "tnt/core/error.h"
#include "wire.capnp.h"

using namespace tnt::transport;

namespace {

std::size_t consumed = 0;  // keeps the reads from being optimised away
void use(capnp::Text::Reader text) { consumed += std::string(text.cStr()).size(); }
void use(capnp::Data::Reader data) { consumed += data.size(); }

void read_hello(wire::Hello::Reader hello) {
  consumed += hello.getRank() + hello.getSize() + hello.getProtocolVersion();
  use(hello.getJobId());
  use(hello.getHostname());
  use(hello.getDataAddress());
  use(hello.getTransport());
  use(hello.getConfigHash());
}

void read_reply(wire::RendezvousReply::Reader reply) {
  if (reply.isRefusal()) {
    use(reply.getRefusal());
    return;
  }
  for (auto entry : reply.getAddressBook()) {
    consumed += entry.getRank();
    use(entry.getHostname());
    use(entry.getDataAddress());
  }
}

void read_control(wire::Control::Reader control) {
  switch (control.which()) {
    case wire::Control::HEARTBEAT: break;
    case wire::Control::PEER_LOST:
      consumed += static_cast<std::size_t>(control.getPeerLost().getRank());
      use(control.getPeerLost().getReason());
      break;
    case wire::Control::ABORT:
      consumed += static_cast<std::size_t>(control.getAbort().getLostRank());
      use(control.getAbort().getReason());
      break;
    case wire::Control::GOODBYE: break;
    case wire::Control::PROGRESS: {
      const auto progress = control.getProgress();
      consumed += progress.getIssued();
      for (auto call : {progress.getOldestPending(), progress.getLastIssued(), progress.getLastCompleted()}) {
        consumed += call.getSequence() + call.getSignature();
        use(call.getDescription());
      }
      break;
    }
    case wire::Control::STALL_WARNING: use(control.getStallWarning()); break;
    case wire::Control::FAILED: use(control.getFailed()); break;
    default: break;  // a newer peer's union member
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const int kind = data[0] % 3;
  // The address book may grow with the job: the rendezvous allows 1 KiB per rank more.
  const std::size_t limit = kind == 1 ? kMaxControlFrame + 1024 * 64 : kMaxControlFrame;
  Frame frame;
  try {
    frame = frame_from_bytes({data + 1, size - 1}, limit, "a fuzz frame", "fuzz peer");
  } catch (const tnt::JobError&) {
    return 0;
  }
  try {
    auto reader = frame.reader();
    if (kind == 0) read_hello(reader.getRoot<wire::Hello>());
    if (kind == 1) read_reply(reader.getRoot<wire::RendezvousReply>());
    if (kind == 2) read_control(reader.getRoot<wire::Control>());
  } catch (const kj::Exception&) {
  }
  return 0;
}
