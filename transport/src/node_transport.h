#pragma once
// Node-aware data plane: shared memory between ranks on one host, the network back end between
// hosts, chosen per pair at connection time.
#include <cstddef>
#include <memory>
#include <string>

#include "tnt/transport/transport.h"

namespace tnt::transport {

// Identifies this host as shared memory sees it (Note [Same host] in node_transport.cpp).
std::string this_host_key();

// `shm` may be null (TNT_SHM=0): every peer is then reached through `network`, and the published
// address still names this host, for hosts_of(). `board_bytes`: the host board this rank offers
// (Note [Host board]); 0 none.
std::unique_ptr<Transport> make_node_transport(std::unique_ptr<Transport> network, std::unique_ptr<Transport> shm,
                                               int rank, std::size_t board_bytes);

}  // namespace tnt::transport
