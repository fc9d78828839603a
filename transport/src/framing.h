#pragma once
// Length-prefixed Cap'n Proto frames on a TCP socket (control plane only).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "tnt/core/asio.h"

namespace tnt::transport {

// Largest control frame anybody sends except the address book (which grows with the job).
inline constexpr std::size_t kMaxControlFrame = 64 * 1024;

struct Frame {
  std::vector<capnp::word> words;
  // A reader with tight limits: a malicious frame cannot make it traverse more than it holds.
  capnp::FlatArrayMessageReader reader() const;
};

// Reads one frame of at most `max_bytes`; the length is checked before anything is allocated.
// Throws tnt::JobError naming `what` and `peer` on a bad length.
boost::asio::awaitable<Frame> read_frame(boost::asio::ip::tcp::socket& socket, std::size_t max_bytes,
                                         const std::string& what, const std::string& peer);
// The length a frame's 4-byte prefix announces, checked against `max_bytes` (the same errors).
std::uint32_t frame_length(std::span<const std::uint8_t, 4> prefix, std::size_t max_bytes, const std::string& what,
                           const std::string& peer);
// One whole frame, prefix included, from memory: what read_frame would return for these bytes.
// Throws tnt::JobError when the length is invalid or does not match the bytes given.
Frame frame_from_bytes(std::span<const std::uint8_t> bytes, std::size_t max_bytes, const std::string& what,
                       const std::string& peer);
std::vector<std::uint8_t> encode_frame(capnp::MessageBuilder& message);
boost::asio::awaitable<void> write_frame(boost::asio::ip::tcp::socket& socket, capnp::MessageBuilder& message);

}  // namespace tnt::transport
