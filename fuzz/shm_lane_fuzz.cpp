// The shared-memory lane's reading side (transport/src/shm/shm_lane.cpp, Note [Lanes]) against
// any records the other process could leave, between well-formed frames written by the lane's
// own writer. The lane has 4 KiB, so that frames wrap and skip records are written. The input is
// a run of steps, each a byte choosing it:
//   0  the writer writes a frame: a context (0-3) and a length of up to 900 bytes, byte i of it
//      (context * 31 + i + n) mod 251 for the n-th frame written, if it finds room;
//   1  a forged record where the reader looks next, with a correct stamp and any frame length
//      and context from the input (truncated lengths, skips with bytes, frames past the lane);
//   2  the reader takes every frame published and publishes its tail.
// Checked: no read past the lane (ASan; every frame lies inside it); a violation names the peer
// and stops the reader for good; while only the writer wrote, the frames come in the order
// written, each with its context and bytes, none lost or repeated.
#include <cstring>
#include <deque>
#include <vector>

#include "fuzz_support.h"
#include "shm/shm_lane.h"

using namespace tnt::transport;
using tnt::fuzz::violated;

namespace {

constexpr std::size_t kLane = 4096;
constexpr std::size_t kMaxFrame = 900;
const std::string kPeer = "rank 1 (fuzz)";

struct Written {
  std::uint32_t context;
  std::vector<std::byte> bytes;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  alignas(64) static std::byte lane[kLane];
  std::memset(lane, 0, sizeof lane);
  LaneControl control;
  ShmLaneWriter writer(std::span<std::byte>(lane, kLane), control);
  ShmLaneReader reader(kPeer, std::span<const std::byte>(lane, kLane));
  std::deque<Written> expected;
  bool forged = false;
  std::size_t written = 0;
  std::size_t at = 0;
  const auto next = [&]() -> unsigned { return at < size ? data[at++] : 0u; };
  while (at < size) {
    switch (next() % 3) {
      case 0: {
        const std::uint32_t context = next() % 4;
        const std::size_t bytes = (next() << 8 | next()) % (kMaxFrame + 1);
        std::vector<std::byte> frame(bytes);
        for (std::size_t i = 0; i < bytes; ++i) frame[i] = static_cast<std::byte>((context * 31 + i + written) % 251);
        const std::size_t head = std::min<std::size_t>(bytes, 8);
        if (writer.write(context, frame.data(), head, frame.data() + head, bytes - head)) {
          ++written;
          expected.push_back({context, std::move(frame)});
        }
        break;
      }
      case 1: {
        LaneRecord record{reader.tail() + 1, 0, 0};
        record.frame_bytes = next() << 24 | next() << 16 | next() << 8 | next();
        record.context = next() % 2 ? kLaneSkip : next();
        std::memcpy(lane + reader.tail() % kLane, &record, sizeof record);
        forged = true;
        break;
      }
      default: {
        std::uint32_t context = 0;
        std::span<const std::byte> frame;
        while (reader.peek(context, frame)) {
          if (frame.data() < lane || frame.data() + frame.size() > lane + kLane) violated("a frame outside the lane");
          if (!forged) {
            if (expected.empty()) violated("a frame nobody wrote");
            const Written& want = expected.front();
            if (context != want.context || frame.size() != want.bytes.size() ||
                !std::equal(frame.begin(), frame.end(), want.bytes.begin()))
              violated("a frame other than the one written next");
            expected.pop_front();
          }
          reader.pop();
        }
        if (!reader.violation().empty()) {
          if (reader.violation().find(kPeer) == std::string::npos) violated("a violation that does not name the peer");
          if (!forged) violated("a violation from well-formed frames: " + reader.violation());
          if (reader.peek(context, frame)) violated("a frame after a violation");
        }
        control.tail.store(reader.tail());
        break;
      }
    }
  }
  return 0;
}
