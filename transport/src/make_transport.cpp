#include "ib/ib_transport.h"
#include "tcp/tcp_transport.h"
#include "tnt/core/error.h"

namespace tnt::transport {

std::unique_ptr<Transport> make_transport(EventLoop& loop, const JobEnvironment& env) {
  if (env.transport == "tcp") return make_tcp_transport(loop, env);
  if (env.transport == "ib") return make_ib_transport(loop, env);
  throw ConfigError("unknown transport '" + env.transport + "' (use tcp or ib)");
}

}  // namespace tnt::transport
