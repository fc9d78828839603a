#include "p2p_wire.h"

#include <cstring>

namespace tnt::detail {

std::string read_envelope(const std::byte* frame, std::size_t received, Envelope& envelope) {
  if (received < sizeof envelope)
    return "a point-to-point envelope of " + std::to_string(received) + " bytes (an envelope is 16)";
  std::memcpy(&envelope, frame, sizeof envelope);
  if (envelope.rendezvous > kCreditEnvelope)
    return "a point-to-point envelope of unknown kind " + std::to_string(envelope.rendezvous);
  if (envelope.tag < 0) return "a point-to-point envelope with the negative tag " + std::to_string(envelope.tag);
  const std::size_t after = received - sizeof envelope;
  if (envelope.rendezvous == kCreditEnvelope && (after != 0 || envelope.bytes != 0 || envelope.tag != 0))
    return "a point-to-point credit envelope with tag " + std::to_string(envelope.tag) + ", announcing " +
           std::to_string(envelope.bytes) + " bytes, that came with " + std::to_string(after);
  if (envelope.rendezvous ? after != 0 : envelope.bytes != after) {
    return "a point-to-point envelope that announces " + std::to_string(envelope.bytes) + " bytes " +
           (envelope.rendezvous ? "by rendezvous" : "eagerly") + " came with " + std::to_string(after);
  }
  return {};
}

std::string check_clear_to_send(std::size_t received, std::uint64_t accepted, std::size_t bytes) {
  if (received != sizeof accepted)
    return "a clear-to-send of " + std::to_string(received) + " bytes (one is " + std::to_string(sizeof accepted) + ")";
  if (accepted > bytes)
    return "a clear-to-send for " + std::to_string(accepted) + " bytes of a " + std::to_string(bytes) + "-byte message";
  return {};
}

std::size_t return_credit(std::size_t credit, std::size_t quantum, std::size_t limit, std::string& error) {
  if (quantum > limit || credit > limit - quantum) {
    error = "point-to-point credit given back beyond what was lent (" + std::to_string(credit) + " + " +
            std::to_string(quantum) + " bytes, lent " + std::to_string(limit) + ")";
    return credit;
  }
  return credit + quantum;
}

}  // namespace tnt::detail
