#include "framing.h"

#include <array>
#include <cstring>

#include "tnt/core/error.h"

namespace tnt::transport {
namespace asio = boost::asio;

capnp::FlatArrayMessageReader Frame::reader() const {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = words.size() * 2 + 64;
  options.nestingLimit = 16;
  return capnp::FlatArrayMessageReader(kj::ArrayPtr<const capnp::word>(words.data(), words.size()), options);
}

std::uint32_t frame_length(std::span<const std::uint8_t, 4> prefix, std::size_t max_bytes, const std::string& what,
                           const std::string& peer) {
  const std::uint32_t length = std::uint32_t{prefix[0]} | std::uint32_t{prefix[1]} << 8 |
                               std::uint32_t{prefix[2]} << 16 | std::uint32_t{prefix[3]} << 24;
  if (length == 0 || length % sizeof(capnp::word) != 0 || length > max_bytes) {
    throw JobError(what + " from " + peer + " has an invalid length of " + std::to_string(length) + " bytes (limit " +
                   std::to_string(max_bytes) + ", multiple of 8)");
  }
  return length;
}

Frame frame_from_bytes(std::span<const std::uint8_t> bytes, std::size_t max_bytes, const std::string& what,
                       const std::string& peer) {
  if (bytes.size() < 4) throw JobError(what + " from " + peer + " ends inside its length prefix");
  const std::uint32_t length = frame_length(bytes.first<4>(), max_bytes, what, peer);
  if (bytes.size() - 4 != length) {
    throw JobError(what + " from " + peer + " announces " + std::to_string(length) + " bytes but holds " +
                   std::to_string(bytes.size() - 4));
  }
  Frame frame;
  frame.words = std::vector<capnp::word>(length / sizeof(capnp::word));  // resize() needs a movable word
  std::memcpy(frame.words.data(), bytes.data() + 4, length);
  return frame;
}

asio::awaitable<Frame> read_frame(asio::ip::tcp::socket& socket, std::size_t max_bytes, const std::string& what,
                                  const std::string& peer) {
  std::array<std::uint8_t, 4> prefix;
  co_await asio::async_read(socket, asio::buffer(prefix), asio::use_awaitable);
  const std::uint32_t length = frame_length(prefix, max_bytes, what, peer);
  Frame frame;
  frame.words = std::vector<capnp::word>(length / sizeof(capnp::word));  // resize() needs a movable word
  co_await asio::async_read(socket, asio::buffer(frame.words.data(), length), asio::use_awaitable);
  co_return frame;
}

std::vector<std::uint8_t> encode_frame(capnp::MessageBuilder& message) {
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
  const auto bytes = flat.asBytes();
  std::vector<std::uint8_t> out(4 + bytes.size());
  const auto length = static_cast<std::uint32_t>(bytes.size());
  for (int i = 0; i < 4; ++i) out[i] = static_cast<std::uint8_t>(length >> (8 * i));
  std::memcpy(out.data() + 4, bytes.begin(), bytes.size());
  return out;
}

asio::awaitable<void> write_frame(asio::ip::tcp::socket& socket, capnp::MessageBuilder& message) {
  auto bytes = encode_frame(message);
  co_await asio::async_write(socket, asio::buffer(bytes), asio::use_awaitable);
}

}  // namespace tnt::transport
