#include <algorithm>

#include "ib/ib_transport.h"
#include "node_transport.h"
#include "shm/shm_transport.h"
#include "tcp/tcp_transport.h"
#include "tnt/core/error.h"
#include "tnt/core/settings.h"

namespace tnt::transport {

std::unique_ptr<Transport> make_transport(EventLoop& loop, const JobEnvironment& env) {
  std::unique_ptr<Transport> network;
  if (env.transport == "tcp") {
    network = make_tcp_transport(loop, env);
  } else if (env.transport == "ib") {
    network = make_ib_transport(loop, env);
  } else {
    throw ConfigError("unknown transport '" + env.transport + "' (use tcp or ib)");
  }
  // The host board's size (Note [Host board]): with two ranks the ring's single copy moves less
  // memory than the board from about 1 MiB on; more ranks take more steps on the ring, and the
  // board wins up to 4 MiB. A TNT_HOST_ALLREDUCE_KB that was set counts as it is. Each rank
  // offers this size, and the board takes the least offered, so all ranks agree.
  std::size_t board_bytes = env.shared_memory ? settings::kHostAllreduceKb.read() : 0;
  if (env.size == 2 && !settings::is_set(settings::kHostAllreduceKb.name)) {
    board_bytes = std::min<std::size_t>(board_bytes, std::size_t{1} << 20);
  }
  return make_node_transport(std::move(network), env.shared_memory ? make_shm_transport(loop, env) : nullptr, env.rank,
                             board_bytes);
}

}  // namespace tnt::transport
