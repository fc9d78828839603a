#include "bootstrap.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <optional>

#include <openssl/rand.h>

#include "pmix_exchange.h"
#include "tnt/core/error.h"
#include "tnt/core/settings.h"
#include "tnt/core/slurm.h"

// Note [Bootstrap sources]
// A rank learns its place from the first of these that is present:
//  1. TNT_SIZE (tnt-launch, or a user who sets TNT_* by hand): every TNT_* variable as before.
//  2. OMPI_COMM_WORLD_SIZE (OpenMPI's mpirun): rank, size, local rank and size from
//     OMPI_COMM_WORLD_*; rank 0's address, and a job token when none is given, reach the other
//     ranks through PMIx (Note [Bootstrap through PMIx] in pmix_exchange.cpp). OpenMPI comes
//     before Slurm because ranks of an mpirun inside an allocation inherit the SLURM_PROCID and
//     SLURM_NTASKS of mpirun's daemons, which count nodes, not ranks.
//  3. SLURM_STEP_ID with SLURM_PROCID (a task of an srun step): rank SLURM_PROCID of
//     SLURM_NTASKS, local rank SLURM_LOCALID of its node's count in SLURM_STEP_TASKS_PER_NODE;
//     the master is the step's first node (127.0.0.1 when the step has one node) on the first
//     port of SLURM_STEP_RESV_PORTS, else on slurm_master_port(job, step). A batch script has
//     SLURM_PROCID but no SLURM_STEP_ID: a program started there directly is a single process.
// TNT_MASTER_ADDR, TNT_MASTER_PORT, TNT_JOB_ID, TNT_JOB_TOKEN and TNT_JOB_TOKEN_FILE, when set,
// come before what 2 and 3 derive. The token, when neither TNT_JOB_TOKEN nor TNT_JOB_TOKEN_FILE
// is set, comes from rank 0 through PMIx where a PMIx server exists (mpirun, srun --mpi=pmix);
// otherwise a job of more than one rank is refused (README, "Clusters", says why).

namespace tnt::bootstrap {
namespace {

std::optional<std::string> variable(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

// A whole number from a variable another system sets; `who` names it for the error.
std::int64_t whole_number(const char* name, std::int64_t min, std::int64_t max, const char* who) {
  const auto text = variable(name);
  if (!text) throw ConfigError(std::string(name) + " is not set, but " + who + " sets it; " + "cannot place this rank");
  std::int64_t value = 0;
  const auto result = std::from_chars(text->data(), text->data() + text->size(), value);
  if (result.ec != std::errc{} || result.ptr != text->data() + text->size() || value < min || value > max) {
    throw ConfigError(std::string(name) + "='" + *text + "' is not a whole number in [" + std::to_string(min) + ", " +
                      std::to_string(max) + "] (set by " + who + ")");
  }
  return value;
}

std::string read_token_file() {
  const std::string path = settings::kJobTokenFile.read();
  std::ifstream in(path);
  std::string token;
  if (!in || !std::getline(in, token) || token.empty()) {
    throw ConfigError(std::string(settings::kJobTokenFile.name) + "='" + path + "' cannot be read or is empty");
  }
  return token;
}

// TNT_JOB_TOKEN, else TNT_JOB_TOKEN_FILE; empty when neither is set.
void read_given_token(JobEnvironment& env) {
  if (settings::is_set(settings::kJobToken.name)) {
    env.job_token = settings::kJobToken.read();
    env.token_origin = "TNT_JOB_TOKEN";
  } else if (settings::is_set(settings::kJobTokenFile.name)) {
    env.job_token = read_token_file();
    env.token_origin = "TNT_JOB_TOKEN_FILE=" + settings::kJobTokenFile.read();
  }
}

std::string random_token() {
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof raw) != 1) throw Error("cannot draw a job token: OpenSSL's RAND_bytes failed");
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : raw) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return hex;
}

void from_tnt(JobEnvironment& env) {
  using settings::is_set;
  env.size = static_cast<int>(settings::kSize.read());
  env.rank = static_cast<int>(settings::kRank.read(0, env.size - 1));
  env.local_size =
      is_set(settings::kLocalSize.name) ? static_cast<int>(settings::kLocalSize.read(1, env.size)) : env.size;
  env.local_rank =
      is_set(settings::kLocalRank.name) ? static_cast<int>(settings::kLocalRank.read(0, env.local_size - 1)) : env.rank;
  env.master_addr = settings::kMasterAddr.read();
  env.master_port = static_cast<std::uint16_t>(settings::kMasterPort.read());
  env.job_id = settings::kJobId.read();
  read_given_token(env);
  if (is_set(settings::kSize.name)) {
    env.source = "TNT_* variables (TNT_RANK, TNT_SIZE, ...: tnt-launch, or set by hand)";
    env.master_origin = "TNT_MASTER_ADDR, TNT_MASTER_PORT";
  }
}

// TNT_MASTER_ADDR, TNT_MASTER_PORT and TNT_JOB_ID override what a launching system implies.
bool given_master_addr(JobEnvironment& env) {
  if (!settings::is_set(settings::kMasterAddr.name)) return false;
  env.master_addr = settings::kMasterAddr.read();
  return true;
}
bool given_master_port(JobEnvironment& env) {
  if (!settings::is_set(settings::kMasterPort.name)) return false;
  env.master_port = static_cast<std::uint16_t>(settings::kMasterPort.read());
  return true;
}

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

bool is_loopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr);
  }
  return true;
}

std::string numeric(const sockaddr* address, socklen_t length) {
  char text[NI_MAXHOST] = {};
  if (getnameinfo(address, length, text, sizeof text, nullptr, 0, NI_NUMERICHOST) != 0) return {};
  return text;
}

// An address of this machine that other hosts can reach: this host name's first address that is
// not loopback (Debian maps the name to 127.0.1.1), else the first IPv4 address of an interface
// that is up and not loopback, else the host name itself.
std::string reachable_address() {
  const std::string host = this_host();
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) == 0) {
    std::string chosen;
    for (auto* a = found; a != nullptr && chosen.empty(); a = a->ai_next) {
      if (!is_loopback(a->ai_addr)) chosen = numeric(a->ai_addr, a->ai_addrlen);
    }
    freeaddrinfo(found);
    if (!chosen.empty()) return chosen;
  }
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) == 0) {
    std::string chosen;
    for (auto* i = interfaces; i != nullptr && chosen.empty(); i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
      if (!is_loopback(i->ifa_addr)) chosen = numeric(i->ifa_addr, sizeof(sockaddr_in));
    }
    freeifaddrs(interfaces);
    if (!chosen.empty()) return chosen;
  }
  return host;
}

// A port that is free on `address` now (the kernel's choice); rank 0 listens on it moments later.
std::uint16_t free_port(const std::string& address) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(address.c_str(), "0", &hints, &found) != 0 || found == nullptr) {
    throw ConfigError("cannot find a free port on '" + address + "': the name does not resolve (set TNT_MASTER_ADDR)");
  }
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  const bool ok = fd >= 0 && bind(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0;
  freeaddrinfo(found);
  if (fd >= 0) close(fd);
  if (!ok) throw ConfigError("cannot find a free port on " + address + " (set TNT_MASTER_PORT)");
  return ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                          : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
}

void split_master(JobEnvironment& env, const std::string& master) {
  const auto colon = master.rfind(':');
  std::uint16_t port = 0;
  const auto* end = master.data() + master.size();
  if (colon == std::string::npos || std::from_chars(master.data() + colon + 1, end, port).ptr != end || port == 0) {
    throw JobError("bootstrap through PMIx: rank 0 published '" + master + "', not ADDRESS:PORT");
  }
  env.master_addr = master.substr(0, colon);
  env.master_port = port;
}

void from_openmpi(JobEnvironment& env) {
  const char* who = "OpenMPI's mpirun";
  env.size = static_cast<int>(whole_number("OMPI_COMM_WORLD_SIZE", 1, 1 << 20, who));
  env.rank = static_cast<int>(whole_number("OMPI_COMM_WORLD_RANK", 0, env.size - 1, who));
  env.local_size = static_cast<int>(whole_number("OMPI_COMM_WORLD_LOCAL_SIZE", 1, env.size, who));
  env.local_rank = static_cast<int>(whole_number("OMPI_COMM_WORLD_LOCAL_RANK", 0, env.local_size - 1, who));
  env.source = "OpenMPI (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE)";
  read_given_token(env);
  const bool addr_given = given_master_addr(env);
  const bool port_given = given_master_port(env);
  env.job_id = settings::is_set(settings::kJobId.name) ? settings::kJobId.read()
                                                       : "mpirun-" + variable("PMIX_NAMESPACE").value_or("job");
  if (env.size == 1) return;
  const bool need_master = !(addr_given && port_given);
  if (!need_master && !env.job_token.empty()) {
    env.master_origin = "TNT_MASTER_ADDR, TNT_MASTER_PORT";
    return;
  }
  if (!pmix_available()) {
    throw ConfigError("started by mpirun (OMPI_COMM_WORLD_SIZE=" + std::to_string(env.size) +
                      ") without a PMIx server (no PMIX_NAMESPACE): rank 0's address cannot reach the other ranks; set "
                      "TNT_MASTER_ADDR, TNT_MASTER_PORT and TNT_JOB_TOKEN_FILE (mpirun -x), or use an mpirun with PMIx "
                      "(OpenMPI 4 or later)");
  }
  std::string master;
  std::string token;
  if (env.rank == 0) {
    if (!addr_given) env.master_addr = env.local_size == env.size ? "127.0.0.1" : reachable_address();
    if (!port_given) env.master_port = free_port(env.master_addr);
    master = env.master_addr + ":" + std::to_string(env.master_port);
    if (env.job_token.empty()) token = random_token();
  }
  const auto shared = exchange_through_pmix(env.rank == 0, master, token, env.connect_timeout);
  split_master(env, shared.master);
  env.master_origin = "rank 0's address and a free port there, shared through PMIx (namespace " + shared.nspace + ")";
  if (env.job_token.empty()) {
    env.job_token = shared.token;
    env.token_origin = "drawn by rank 0, shared through PMIx";
  }
  if (!settings::is_set(settings::kJobId.name)) env.job_id = "mpirun-" + shared.nspace;
}

}  // namespace

std::uint16_t slurm_master_port(std::uint64_t job_id, std::uint64_t step_id) {
  return static_cast<std::uint16_t>(15000 + ((job_id % 937) * 16 + step_id % 16));
}

}  // namespace tnt::bootstrap

namespace tnt::bootstrap {
namespace {

// This node's task count in SLURM_STEP_TASKS_PER_NODE ("2(x3),1"), or the job's size when srun
// did not say (older Slurm).
int slurm_local_size(int size) {
  const auto counts_text = variable("SLURM_STEP_TASKS_PER_NODE");
  const auto node_text = variable("SLURM_NODEID");
  if (!counts_text || !node_text) return size;
  const auto counts = expand_slurm_tasks_per_node(*counts_text, "SLURM_STEP_TASKS_PER_NODE");
  const auto node = whole_number("SLURM_NODEID", 0, static_cast<std::int64_t>(counts.size()) - 1, "srun");
  return counts[static_cast<std::size_t>(node)];
}

// The first port of SLURM_STEP_RESV_PORTS ("12000-12003" or "12000,12007"), which srun reserves
// for the step where the cluster sets MpiParams=ports=...
std::optional<std::uint16_t> reserved_port() {
  const auto ports = variable("SLURM_STEP_RESV_PORTS");
  if (!ports) return std::nullopt;
  std::uint16_t port = 0;
  const auto result = std::from_chars(ports->data(), ports->data() + ports->size(), port);
  if (result.ec != std::errc{} || port == 0) {
    throw ConfigError("SLURM_STEP_RESV_PORTS='" + *ports + "' does not start with a port number");
  }
  return port;
}

void slurm_master(JobEnvironment& env, std::uint64_t job, std::uint64_t step) {
  const auto nodes_text = variable("SLURM_STEP_NODELIST");
  if (!nodes_text) throw ConfigError("SLURM_STEP_NODELIST is not set, but srun sets it; cannot find rank 0's node");
  const auto nodes = expand_slurm_nodelist(*nodes_text, "SLURM_STEP_NODELIST");
  std::string addr_origin;
  if (given_master_addr(env)) {
    addr_origin = "TNT_MASTER_ADDR";
  } else if (nodes.size() == 1) {
    env.master_addr = "127.0.0.1";
    addr_origin = "127.0.0.1: the step runs on one node (" + nodes.front() + ")";
  } else {
    env.master_addr = nodes.front();
    addr_origin = "the step's first node " + nodes.front() + " (SLURM_STEP_NODELIST)";
    if (env.rank == 0 && whole_number("SLURM_NODEID", 0, 1 << 20, "srun") != 0) {
      throw ConfigError("rank 0 does not run on the step's first node " + nodes.front() +
                        " (a task distribution that moves it?); set TNT_MASTER_ADDR to the node of SLURM_PROCID 0");
    }
  }
  std::string port_origin;
  if (given_master_port(env)) {
    port_origin = "TNT_MASTER_PORT";
  } else if (const auto port = reserved_port()) {
    env.master_port = *port;
    port_origin = "the first of SLURM_STEP_RESV_PORTS";
  } else {
    env.master_port = slurm_master_port(job, step);
    port_origin = "derived from job " + std::to_string(job) + " and step " + std::to_string(step) +
                  " (TNT_MASTER_PORT chooses another)";
  }
  env.master_origin = addr_origin + "; port " + port_origin;
}

void from_slurm(JobEnvironment& env) {
  const char* who = "srun";
  const auto job = static_cast<std::uint64_t>(whole_number("SLURM_JOB_ID", 0, INT64_MAX, who));
  const auto step = static_cast<std::uint64_t>(whole_number("SLURM_STEP_ID", 0, INT64_MAX, who));
  env.size = static_cast<int>(whole_number("SLURM_NTASKS", 1, 1 << 20, who));
  env.rank = static_cast<int>(whole_number("SLURM_PROCID", 0, env.size - 1, who));
  env.local_size = slurm_local_size(env.size);
  env.local_rank = static_cast<int>(whole_number("SLURM_LOCALID", 0, env.local_size - 1, who));
  env.source = "Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID of step " + std::to_string(job) + "." +
               std::to_string(step) + ")";
  env.job_id = settings::is_set(settings::kJobId.name) ? settings::kJobId.read()
                                                       : "slurm-" + std::to_string(job) + "." + std::to_string(step);
  read_given_token(env);
  if (env.size == 1) return;
  slurm_master(env, job, step);
  if (env.job_token.empty() && pmix_available()) {
    const auto shared =
        exchange_through_pmix(env.rank == 0, "", env.rank == 0 ? random_token() : "", env.connect_timeout);
    env.job_token = shared.token;
    env.token_origin = "drawn by rank 0, shared through PMIx (srun --mpi=pmix)";
  }
}

}  // namespace

void place_rank(JobEnvironment& env) {
  if (settings::is_set(settings::kSize.name)) {
    from_tnt(env);
  } else if (variable("OMPI_COMM_WORLD_SIZE")) {
    from_openmpi(env);
  } else if (variable("SLURM_STEP_ID") && variable("SLURM_PROCID")) {
    from_slurm(env);
  } else {
    from_tnt(env);
    if (variable("SLURM_PROCID")) {
      env.source += "; SLURM_PROCID without SLURM_STEP_ID is a batch script, not a task of srun";
    }
  }
  if (env.size == 1) return;
  if (env.master_port == 0) {
    throw ConfigError("a job of " + std::to_string(env.size) + " ranks (" + env.source +
                      ") but TNT_MASTER_PORT is not set (start jobs with tnt-launch, srun or mpirun)");
  }
  if (env.job_token.size() < 16) {
    // The token's origin, when there is one, names the file that holds a short token.
    const std::string what = env.token_origin.empty()
                                 ? "TNT_JOB_TOKEN is missing"
                                 : "the job token of " + env.token_origin + " has " +
                                       std::to_string(env.job_token.size()) + " characters, fewer than 16";
    throw ConfigError(
        what +
        ": every rank of a job needs the job's secret token of at least 16 characters. "
        "tnt-launch provides it; under srun or mpirun export TNT_JOB_TOKEN (srun and mpirun -x carry it to every "
        "rank) or set TNT_JOB_TOKEN_FILE to a file only you can read (README, \"Clusters\")");
  }
}

}  // namespace tnt::bootstrap
