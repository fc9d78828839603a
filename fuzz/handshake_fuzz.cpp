// The authentication handshake's fixed-size records (transport/src/auth.cpp, Note [Handshake]):
// a client's preamble as the server checks it, and a server's challenge as the client checks it.
// Input: preamble (80 bytes), challenge (72 bytes), the rank this side is; missing bytes are 0.
#include <algorithm>
#include <array>
#include <cstring>

#include "auth.h"
#include "fuzz_support.h"
#include "tnt/core/error.h"

using namespace tnt::transport;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::array<std::uint8_t, kPreambleSize> preamble{};
  std::array<std::uint8_t, kChallengeSize> challenge{};
  const std::size_t in_preamble = std::min(size, preamble.size());
  std::memcpy(preamble.data(), data, in_preamble);
  const std::size_t in_challenge = std::min(size - in_preamble, challenge.size());
  std::memcpy(challenge.data(), data + in_preamble, in_challenge);
  const int my_rank = size > in_preamble + in_challenge ? data[in_preamble + in_challenge] % 8 : 0;
  const AuthContext auth{"fuzz-job", "fuzz-token"};

  try {
    const PreambleCheck check = check_preamble(preamble, auth, my_rank, "fuzz peer");
    if (check.identity.kind != ChannelKind::rendezvous && check.identity.kind != ChannelKind::data &&
        check.identity.kind != ChannelKind::data_on_demand) {
      tnt::fuzz::violated("check_preamble accepted an unknown channel kind");
    }
    const auto digest = sha256(auth.job_id);
    if (check.status == ServerStatus::ok && std::memcmp(digest.data(), preamble.data() + 16, digest.size()) != 0) {
      tnt::fuzz::violated("check_preamble accepted another job's digest");
    }
  } catch (const tnt::JobError&) {
  }
  try {
    check_challenge(challenge, preamble, auth, my_rank, "fuzz peer");
  } catch (const tnt::JobError&) {
  }
  return 0;
}
