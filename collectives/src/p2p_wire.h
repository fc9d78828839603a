#pragma once
// The point-to-point protocol's frames as a receiver checks them (Note [Point-to-point] in
// point_to_point.cpp). Pure functions, apart from PointToPoint, so that the fuzz target
// fuzz/p2p_frames_fuzz.cpp runs the very checks the transport runs.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace tnt::detail {

// The header every message travels with: eager data follows it in the same Pair message.
struct Envelope {
  std::int32_t tag;
  // 0: the data follows; 1: it waits for a clear-to-send; kCreditEnvelope: no message, a quarter
  // of the sender's credit given back (on a lane only: Note [Fast lane] in point_to_point.cpp),
  // with tag and bytes 0.
  std::uint8_t rendezvous;
  std::uint8_t reserved[3];
  std::uint64_t bytes;
};
static_assert(sizeof(Envelope) == 16);
inline constexpr std::uint8_t kCreditEnvelope = 2;

// The envelope at the start of `frame`, of which `received` bytes came: an empty string and the
// envelope in `envelope`, or what makes it a protocol violation ("a point-to-point envelope of
// 3 bytes"), for the caller to name its sender. A valid eager envelope announces exactly the
// bytes that came after it; the others come alone, and a credit envelope announces none.
std::string read_envelope(const std::byte* frame, std::size_t received, Envelope& envelope);

// The common case of read_envelope(), inline: true and the envelope where `frame` is a valid
// eager message; false where read_envelope() must say more (it may still be valid). Its string
// cost an 8-byte message's receiver a tenth of its instructions (callgrind, 2026-11-29).
inline bool read_eager_envelope(const std::byte* frame, std::size_t received, Envelope& envelope) {
  if (received < sizeof envelope) return false;
  std::memcpy(&envelope, frame, sizeof envelope);
  return envelope.rendezvous == 0 && envelope.tag >= 0 && envelope.bytes == received - sizeof envelope;
}

// A clear-to-send of `received` bytes that asks for `accepted` bytes of a `bytes`-byte message:
// empty, or what makes it a protocol violation.
std::string check_clear_to_send(std::size_t received, std::uint64_t accepted, std::size_t bytes);

// A sender holding `credit` eager bytes is given back `quantum`: the credit it then holds. Were
// that more than the `limit` it was lent, `error` says so and `credit` comes back unchanged.
std::size_t return_credit(std::size_t credit, std::size_t quantum, std::size_t limit, std::string& error);

}  // namespace tnt::detail
