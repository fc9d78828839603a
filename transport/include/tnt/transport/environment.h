#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace tnt {

// What a rank knows about its job, read once from the TNT_* environment that tnt-launch
// sets (docs/design.md, "Ranks and the environment"). A process started without the launcher
// is a job of size 1.
struct JobEnvironment {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string master_addr = "127.0.0.1";
  std::uint16_t master_port = 0;
  std::string job_id = "local";
  std::string job_token;          // secret shared by the ranks; never sent over the network
  std::string transport = "tcp";  // tcp | ib: between hosts
  bool shared_memory = true;      // TNT_SHM: ranks on the same host use shared memory
  // The address this rank's data plane listens on; empty: the local address of the
  // connection to the master (the interface that routes to the other ranks).
  std::string data_addr;

  // TCP send and receive buffer of each data-plane socket (TNT_SOCKET_BUFFER_KB; 0, the
  // default, leaves the kernel's autotuning on).
  int socket_buffer_bytes = 0;
  // Congestion control of the data-plane sockets (TNT_TCP_CONGESTION; empty: the system's).
  // See tcp_transport.cpp for the measurement behind the default.
  std::string tcp_congestion = "reno";

  // Network waits. Every wait on the network is bounded by one of these.
  std::chrono::milliseconds connect_timeout{60'000};   // TNT_CONNECT_TIMEOUT_S: joining the job
  std::chrono::milliseconds peer_timeout{30'000};      // TNT_PEER_TIMEOUT_S: silence before a peer counts as lost
  std::chrono::milliseconds handshake_timeout{5'000};  // TNT_HANDSHAKE_TIMEOUT_S: one authentication
  std::chrono::milliseconds stall_warn{30'000};        // TNT_STALL_WARN_S: a collective others have not joined
  std::chrono::milliseconds stall_timeout{0};          // TNT_STALL_TIMEOUT_S: ... fails the job (0: never)

  // Reads TNT_RANK, TNT_SIZE, ... Throws ConfigError naming the variable that is wrong.
  static JobEnvironment from_env();
  bool is_single_process() const { return size == 1; }
};

}  // namespace tnt
