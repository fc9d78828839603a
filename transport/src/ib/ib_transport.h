#pragma once
#include <memory>

#include "tnt/transport/transport.h"

namespace tnt::transport {

// Defined by ib_transport.cpp when tnt is built with TNT_WITH_IB, else by ib_unavailable.cpp.
std::unique_ptr<Transport> make_ib_transport(EventLoop& loop, const JobEnvironment& env);

}  // namespace tnt::transport
