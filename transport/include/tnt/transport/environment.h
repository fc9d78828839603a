#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace tnt {

// What a rank knows about its job, read once from the environment of whatever started it
// (docs/design.md, "Ranks and the environment"): the TNT_* variables that tnt-launch sets, else
// OpenMPI's (mpirun), else Slurm's (srun). A process started by none of them is a job of size 1.
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

  // Where the above came from, in words, for --print-job and for errors: the launching
  // system and its variables, how the master's address and port were found, where the token was.
  std::string source = "none (a single process: no TNT_SIZE, no mpirun, no srun step)";
  std::string master_origin;
  std::string token_origin;

  // Reads TNT_RANK, TNT_SIZE, ... (or OMPI_COMM_WORLD_*, SLURM_*: Note [Bootstrap sources] in
  // src/bootstrap.cpp). Under mpirun the ranks exchange the master's address through PMIx, so
  // every rank must call it; the answer is kept for the rest of the process. Throws ConfigError
  // naming the variable that is wrong.
  static JobEnvironment from_env();
  bool is_single_process() const { return size == 1; }
  // Several lines: where this rank thinks it is, and from which source.
  std::string describe() const;
};

}  // namespace tnt
