#pragma once
#include <memory>

#include "tnt/transport/transport.h"

namespace tnt::transport {

std::unique_ptr<Transport> make_tcp_transport(EventLoop& loop, const JobEnvironment& env);

}  // namespace tnt::transport
