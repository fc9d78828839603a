#include "framing.h"

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

asio::awaitable<Frame> read_frame(asio::ip::tcp::socket& socket, std::size_t max_bytes, const std::string& what,
                                  const std::string& peer) {
  std::uint8_t prefix[4];
  co_await asio::async_read(socket, asio::buffer(prefix), asio::use_awaitable);
  const std::uint32_t length = std::uint32_t{prefix[0]} | std::uint32_t{prefix[1]} << 8 |
                               std::uint32_t{prefix[2]} << 16 | std::uint32_t{prefix[3]} << 24;
  if (length == 0 || length % sizeof(capnp::word) != 0 || length > max_bytes) {
    throw JobError(what + " from " + peer + " has an invalid length of " + std::to_string(length) + " bytes (limit " +
                   std::to_string(max_bytes) + ", multiple of 8)");
  }
  Frame frame;
  frame.words.resize(length / sizeof(capnp::word));
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
