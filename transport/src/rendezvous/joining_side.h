#pragma once
// A joining rank's side: it connects to the master (retrying while the master starts),
// authenticates, sends its Hello and waits for the address book or a refusal.
#include "auth.h"
#include "rendezvous_parts.h"
#include "tnt/transport/environment.h"
#include "tnt/transport/rendezvous.h"

namespace tnt::transport::detail {

// Runs on the loop's strand until the master answers; throws tnt::JobError naming the master
// when it cannot be reached within TNT_CONNECT_TIMEOUT_S, refuses us, or answers nonsense.
boost::asio::awaitable<Joined> join_master(EventLoop& loop, const JobEnvironment& env, const RendezvousOptions& options,
                                           const AuthContext& auth, TaskCount& tasks, DataAddressFor data_address_for);

}  // namespace tnt::transport::detail
