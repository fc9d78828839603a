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
  // The largest allreduce on the host board (Note [Host board]). Each rank offers it, and the
  // board takes the least offered, so all ranks agree.
  const std::size_t board_bytes = env.shared_memory ? settings::kHostAllreduceKb.read() : 0;
  return make_node_transport(std::move(network), env.shared_memory ? make_shm_transport(loop, env) : nullptr, env.rank,
                             board_bytes);
}

}  // namespace tnt::transport
