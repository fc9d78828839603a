// The records tnt-launch sends its agent on another host over ssh (launcher/src/record.h,
// host_launch.cpp, host_checks.cpp): a host check request, a host launch description and a
// cleanup request, and the field escaping they share. Input: one byte choosing the record, then
// its text.
#include <stdexcept>

#include "fuzz_support.h"
#include "host_checks.h"
#include "host_launch.h"
#include "record.h"

using namespace tnt::launcher::detail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string text(tnt::fuzz::as_text(data + 1, size - 1));
  switch (data[0] % 4) {
    case 0: try { decode_check_request(text);
      } catch (const std::runtime_error&) {
      }
      break;
    case 1:
      try {
        const HostLaunch launch = deserialize_host_launch(text);
        // What the launcher accepted must survive its own encoding unchanged.
        const HostLaunch again = deserialize_host_launch(serialize(launch));
        if (again.program != launch.program || again.job_env != launch.job_env || again.host != launch.host ||
            again.cwd != launch.cwd || again.n_ranks != launch.n_ranks || again.exports != launch.exports) {
          tnt::fuzz::violated("a host launch description changed through serialize()");
        }
      } catch (const std::runtime_error&) {
      }
      break;
    case 2:
      if (unescape_field(escape_field(text)) != text) tnt::fuzz::violated("unescape(escape(x)) != x");
      break;
    case 3: try { decode_cleanup_request(text);
      } catch (const std::runtime_error&) {
      }
      break;
  }
  return 0;
}
