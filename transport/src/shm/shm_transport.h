#pragma once
// The shared-memory back end, for ranks on the same host (chosen per pair by node_transport.cpp).
//
// Note [Shared-memory channel]: two ranks share one anonymous segment (memfd_create) holding a
// single-producer single-consumer byte ring per direction. The lower rank creates it; the higher
// one opens it through /proc/<pid>/fd/<fd> (same user, same pid namespace: that is part of what
// "same host" means here) and maps it, and the creator then closes its descriptor. The segment
// has no name anywhere, so nothing can be left behind, whatever kills the ranks.
//
// The authenticated TCP side channel that set the pair up stays open (as for InfiniBand): its end
// is how a lost peer is noticed, and one byte on it wakes the peer's event loop when a ring
// gained data, or gained room while the peer's writer waits for it. So waiting is the event
// loop's ordinary wait on a socket: no thread spins for good.
#include <memory>

#include "tnt/transport/transport.h"

namespace tnt::transport {

std::unique_ptr<Transport> make_shm_transport(EventLoop& loop, const JobEnvironment& env);

}  // namespace tnt::transport
