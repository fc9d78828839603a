#include "ib_transport.h"

#include "tnt/core/error.h"

namespace tnt::transport {

std::unique_ptr<Transport> make_ib_transport(EventLoop&, const JobEnvironment&) {
  throw ConfigError("--transport=ib: this tnt was built without InfiniBand support (configure with -DTNT_WITH_IB=ON)");
}

}  // namespace tnt::transport
