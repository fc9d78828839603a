#include "ib/ib_transport.h"
#include "node_transport.h"
#include "shm/shm_transport.h"
#include "tcp/tcp_transport.h"
#include "tnt/core/error.h"

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
  return make_node_transport(std::move(network), env.shared_memory ? make_shm_transport(loop, env) : nullptr, env.rank);
}

}  // namespace tnt::transport
