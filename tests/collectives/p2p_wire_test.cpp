// Note [Point-to-point]: the checks a receiver makes of the protocol's frames
// (collectives/src/p2p_wire.h); fuzz/p2p_frames_fuzz.cpp feeds them arbitrary bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "p2p_wire.h"

namespace tnt::detail {
namespace {

std::vector<std::byte> frame(std::int32_t tag, std::uint8_t rendezvous, std::uint64_t bytes, std::size_t data) {
  const Envelope envelope{tag, rendezvous, {}, bytes};
  std::vector<std::byte> out(sizeof envelope + data, std::byte{0x5a});
  std::memcpy(out.data(), &envelope, sizeof envelope);
  return out;
}

std::string read(const std::vector<std::byte>& bytes) {
  Envelope envelope{};
  return read_envelope(bytes.data(), bytes.size(), envelope);
}

TEST(PointToPointWire, EnvelopesThatSayWhatCameAreRead) {
  Envelope envelope{};
  const auto eager = frame(7, 0, 5, 5);
  EXPECT_EQ(read_envelope(eager.data(), eager.size(), envelope), "");
  EXPECT_EQ(envelope.tag, 7);
  EXPECT_EQ(envelope.bytes, 5u);
  EXPECT_EQ(read(frame(0, 0, 0, 0)), "");
  EXPECT_EQ(read(frame(3, 1, std::uint64_t{5} << 30, 0)), "");  // rendezvous: the data comes later
  EXPECT_EQ(read(frame(0, kCreditEnvelope, 0, 0)), "");         // credit given back on a lane
}

TEST(PointToPointWire, MalformedEnvelopesAreNamed) {
  std::vector<std::byte> short_frame(3);
  EXPECT_EQ(read(short_frame), "a point-to-point envelope of 3 bytes (an envelope is 16)");
  EXPECT_EQ(read(frame(1, 3, 0, 0)), "a point-to-point envelope of unknown kind 3");
  EXPECT_EQ(read(frame(1, kCreditEnvelope, 0, 0)),
            "a point-to-point credit envelope with tag 1, announcing 0 bytes, that came with 0");
  EXPECT_EQ(read(frame(0, kCreditEnvelope, 8, 8)),
            "a point-to-point credit envelope with tag 0, announcing 8 bytes, that came with 8");
  EXPECT_EQ(read(frame(-1, 1, 8, 0)), "a point-to-point envelope with the negative tag -1");
  EXPECT_EQ(read(frame(1, 0, 9, 3)), "a point-to-point envelope that announces 9 bytes eagerly came with 3");
  EXPECT_EQ(read(frame(1, 0, 2, 3)), "a point-to-point envelope that announces 2 bytes eagerly came with 3");
  EXPECT_EQ(read(frame(1, 1, 4, 4)), "a point-to-point envelope that announces 4 bytes by rendezvous came with 4");
}

TEST(PointToPointWire, ClearToSendAsksForAtMostTheMessage) {
  EXPECT_EQ(check_clear_to_send(8, 4096, 65536), "");
  EXPECT_EQ(check_clear_to_send(8, 65536, 65536), "");
  EXPECT_EQ(check_clear_to_send(8, 65537, 65536), "a clear-to-send for 65537 bytes of a 65536-byte message");
  // Fewer bytes would leave part of the count unwritten and the sender send the wrong amount.
  EXPECT_EQ(check_clear_to_send(3, 0, 65536), "a clear-to-send of 3 bytes (one is 8)");
  EXPECT_EQ(check_clear_to_send(0, 0, 0), "a clear-to-send of 0 bytes (one is 8)");
}

TEST(PointToPointWire, CreditComesBackUpToTheLoan) {
  std::string error;
  EXPECT_EQ(return_credit(0, 64, 256, error), 64u);
  EXPECT_EQ(return_credit(192, 64, 256, error), 256u);
  EXPECT_EQ(error, "");
  EXPECT_EQ(return_credit(193, 64, 256, error), 193u);
  EXPECT_EQ(error, "point-to-point credit given back beyond what was lent (193 + 64 bytes, lent 256)");
  error.clear();
  EXPECT_EQ(return_credit(~std::size_t{0} - 10, 64, 256, error), ~std::size_t{0} - 10);  // no wrap
  EXPECT_NE(error, "");
}

}  // namespace
}  // namespace tnt::detail
