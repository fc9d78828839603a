// A peer's data-plane address from the master's address book (transport/src/side_channel.cpp),
// "ip:port" or "[ip6]:port", as the rank that connects to it parses it.
#include "fuzz_support.h"
#include "side_channel.h"
#include "tnt/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    tnt::transport::parse_data_address(std::string(tnt::fuzz::as_text(data, size)));
  } catch (const tnt::JobError&) {
  }
  return 0;
}
