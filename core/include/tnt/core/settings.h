#pragma once
// Every TNT_* environment variable tnt reads or sets, declared once: its name, its type, its
// default and what it means. The libraries read them through these constants, and tnt-launch
// names the ones it sets through them, so a name exists in one place only.
//
// Reading: `settings::kSegmentKb.read()` reads the variable when called (callers read each
// setting once, when they are built, never on a hot path). An unset or empty variable gives the
// default. A value that does not parse, or lies outside its range, is a tnt::ConfigError that
// names the variable, the value and what would be accepted.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tnt::settings {

// An integer in [min, max].
struct Integer {
  std::string_view name;
  std::int64_t fallback;
  std::int64_t min;
  std::int64_t max;
  std::string_view meaning;
  std::int64_t read() const;
  // The same within a narrower range that only the caller knows (a rank below the job's size).
  std::int64_t read(std::int64_t narrower_min, std::int64_t narrower_max) const;
};

// A size given in KiB, in [min_kib, max_kib]; read() returns bytes.
struct Kib {
  std::string_view name;
  std::int64_t fallback_kib;
  std::int64_t min_kib;
  std::int64_t max_kib;
  std::string_view meaning;
  std::size_t read() const;
};

// A duration given in seconds (a decimal number > 0), at most max_s.
struct Seconds {
  std::string_view name;
  double fallback_s;
  double max_s;
  std::string_view meaning;
  std::chrono::milliseconds read() const;
};

// A duration given in whole microseconds, in [min_us, max_us].
struct Microseconds {
  std::string_view name;
  std::int64_t fallback_us;
  std::int64_t min_us;
  std::int64_t max_us;
  std::string_view meaning;
  std::chrono::microseconds read() const;
};

// true or false, spelled 1/0, true/false, yes/no or on/off in any case.
struct Flag {
  std::string_view name;
  bool fallback;
  std::string_view meaning;
  bool read() const;
};

// One of a fixed list of words, matched without regard to case; read() returns the word as the
// list spells it. `choices` separates the words with '|'.
struct Choice {
  std::string_view name;
  std::string_view fallback;
  std::string_view choices;
  std::string_view meaning;
  std::string read() const;
};

// Free text (an address, a path, a token). Unset gives the fallback; so does an empty value,
// unless `empty_is_a_value` (then an empty value reads as "").
struct Text {
  std::string_view name;
  std::string_view fallback;
  std::string_view meaning;
  bool empty_is_a_value = false;
  std::string read() const;
};

// Parses `text` as a Flag value; throws ConfigError naming `what` (a variable or an option).
bool parse_flag(std::string_view what, std::string_view text);

// Whether the variable is set to something other than the empty string.
bool is_set(std::string_view name);

// --- The job, as tnt-launch (or the user) sets it -----------------------------------------------
inline constexpr Integer kSize{"TNT_SIZE", 1, 1, 1 << 20, "number of ranks in the job"};
inline constexpr Integer kRank{"TNT_RANK", 0, 0, (1 << 20) - 1, "this process's rank, 0 .. TNT_SIZE-1"};
inline constexpr Integer kLocalSize{"TNT_LOCAL_SIZE", 1, 1, 1 << 20, "ranks on this host (default: TNT_SIZE)"};
inline constexpr Integer kLocalRank{"TNT_LOCAL_RANK", 0, 0, (1 << 20) - 1,
                                    "this rank's index among the ranks of its host (default: TNT_RANK)"};
inline constexpr Text kMasterAddr{"TNT_MASTER_ADDR", "127.0.0.1", "address of rank 0's rendezvous"};
inline constexpr Integer kMasterPort{"TNT_MASTER_PORT", 0, 1, 65535, "port of rank 0's rendezvous"};
inline constexpr Text kJobId{"TNT_JOB_ID", "local", "the job's name; ranks of other jobs are refused"};
inline constexpr Text kJobToken{"TNT_JOB_TOKEN", "",
                                "the job's secret (at least 16 characters); never crosses the network"};
inline constexpr Text kJobTokenFile{"TNT_JOB_TOKEN_FILE", "", "a file whose first line is the job's secret"};
inline constexpr Choice kTransport{"TNT_TRANSPORT", "tcp", "tcp|ib", "the data plane between hosts"};
inline constexpr Kib kFusionThresholdKb{"TNT_FUSION_THRESHOLD_KB", 32, 1, 1 << 20,
                                        "smallest gradient bucket the trainer sends"};
inline constexpr Choice kLogLevel{"TNT_LOG_LEVEL", "INFO", "TRACE|DEBUG|INFO|WARNING|ERROR",
                                  "least severe level logged"};
inline constexpr Flag kLogOnAllDevices{
    "TNT_LOG_ON_ALL_DEVICES", false, "every rank logs at TNT_LOG_LEVEL (otherwise ranks other than 0 log errors only)"};
inline constexpr Flag kOutputOnAllDevices{"TNT_OUTPUT_ON_ALL_DEVICES", false,
                                          "every rank prints the trainer's output (otherwise rank 0 only)"};
inline constexpr Flag kTensorBoardOnAllDevices{
    "TNT_TENSORBOARD_ON_ALL_DEVICES", false,
    "every rank writes TensorBoard event files, each in LOG_DIR/rank-N (otherwise rank 0 only, in LOG_DIR)"};
inline constexpr Flag kStdoutIsTty{
    "TNT_STDOUT_IS_TTY", false,
    "tnt-launch's stdout is a terminal: the master rank redraws its progress bar through "
    "the launcher's pipe as on a terminal"};
inline constexpr Integer kPinSocket{"TNT_PIN_SOCKET", -1, -1, 1 << 16,
                                    "NUMA node tnt-launch pinned this rank to (-1: none); informative"};
inline constexpr Integer kHostCores{"TNT_HOST_CORES", 0, 0, 1 << 20,
                                    "cores this host's ranks share, as tnt-launch found them before any binding "
                                    "(0: this process's affinity mask); more ranks than this is oversubscription"};
inline constexpr Flag kPinMemory{"TNT_PIN_MEMORY", false, "tnt-launch bound this rank's memory to its NUMA node"};

// --- Transport -----------------------------------------------------------------------------------
inline constexpr Text kDataAddr{"TNT_DATA_ADDR", "",
                                "address the data plane listens on (default: the one that reaches the master)"};
inline constexpr Kib kSocketBufferKb{"TNT_SOCKET_BUFFER_KB", 0, 0, 1 << 20,
                                     "TCP buffers of each data socket; 0 keeps the kernel's autotuning"};
inline constexpr Text kTcpCongestion{"TNT_TCP_CONGESTION", "reno",
                                     "congestion control of the data sockets; empty keeps the system's", true};
inline constexpr Seconds kConnectTimeoutS{"TNT_CONNECT_TIMEOUT_S", 60, 86400,
                                          "bound on joining the job (all ranks and connections)"};
inline constexpr Seconds kPeerTimeoutS{"TNT_PEER_TIMEOUT_S", 30, 86400,
                                       "silence (no heartbeat) after which a rank counts as lost"};
inline constexpr Seconds kHandshakeTimeoutS{"TNT_HANDSHAKE_TIMEOUT_S", 5, 86400, "bound on one authentication"};
inline constexpr Seconds kStallWarnS{"TNT_STALL_WARN_S", 30, 86400,
                                     "a collective that some ranks wait in and others have not joined for this long "
                                     "is reported, naming the missing ranks (Note [Stall watch])"};
inline constexpr Seconds kStallTimeoutS{"TNT_STALL_TIMEOUT_S", 0, 86400,
                                        "such a stall fails the job after this long (unset: never)"};

inline constexpr Flag kShm{"TNT_SHM", true, "ranks on the same host exchange data through shared memory"};
inline constexpr Kib kShmSingleCopyKb{"TNT_SHM_SINGLE_COPY_KB", 0, 0, 1 << 30,
                                      "shared memory: messages from this size on are read straight from the sender's "
                                      "buffer (process_vm_readv) instead of passing the ring; 0 never (Note [Single "
                                      "copy] says why that is the default)"};
inline constexpr Kib kHostAllreduceKb{"TNT_HOST_ALLREDUCE_KB", 1 << 20, 0, 1 << 20,
                                      "where all ranks share one host: blocking allreduces and barriers up to this "
                                      "size, alltoalls of up to 1 MiB a rank and broadcasts of up to 32 KiB go "
                                      "through a board in shared memory, in rounds of up to 1 MiB, without the "
                                      "event loop; 0 never"};
inline constexpr Integer kVirtualHosts{"TNT_VIRTUAL_HOSTS", 0, 0, 1 << 20,
                                       "tests: each host's ranks form this many hosts (contiguous rank blocks); 0 off"};

// --- Collectives ---------------------------------------------------------------------------------
inline constexpr Kib kSegmentKb{"TNT_SEGMENT_KB", 512, 1, 1 << 20, "largest ring pipeline segment"};
inline constexpr Integer kPipelineDepth{"TNT_PIPELINE_DEPTH", 4, 1, 255, "receives in flight per operation"};
inline constexpr Kib kSmallAllreduceKb{"TNT_SMALL_ALLREDUCE_KB", 16, 0, 1 << 20,
                                       "largest allreduce that gathers and reduces locally"};
inline constexpr Choice kAllreduceAlgorithm{"TNT_ALLREDUCE_ALGORITHM", "auto", "auto|ring|gather|hierarchical",
                                            "forces one allreduce algorithm (auto: by size and topology)"};
inline constexpr Choice kAllgatherAlgorithm{"TNT_ALLGATHER_ALGORITHM", "auto", "auto|ring|hierarchical",
                                            "forces one allgather algorithm (auto: by topology)"};
inline constexpr Kib kP2pEagerKb{
    "TNT_P2P_EAGER_KB", 16, 0, 1024,
    "point-to-point: larger messages wait until their receive is posted (rendezvous); unset, TCP "
    "channels take 64 KiB"};
inline constexpr Kib kP2pCreditKb{"TNT_P2P_CREDIT_KB", 256, 0, 1 << 20,
                                  "point-to-point: eager bytes one sender may have waiting for receives at one rank"};
inline constexpr Microseconds kWaitPollUs{"TNT_WAIT_POLL_US", 500, 0, 1'000'000,
                                          "how long a thread blocked in a collective polls before it sleeps "
                                          "(unset: 500, or 0 where this host's ranks outnumber its cores)"};

// --- InfiniBand ----------------------------------------------------------------------------------
inline constexpr Text kIbDevice{"TNT_IB_DEVICE", "", "verbs device to use (default: the first one)"};
inline constexpr Integer kIbPort{"TNT_IB_PORT", 0, 0, 255, "port of the device (0: the first active one)"};
inline constexpr Integer kIbGidIndex{"TNT_IB_GID_INDEX", -1, -1, 255, "GID index for RoCE (-1: chosen)"};
inline constexpr Kib kIbEagerKb{"TNT_IB_EAGER_KB", 16, 0, 1024, "largest message sent eagerly through bounce buffers"};
inline constexpr Integer kIbBuffers{"TNT_IB_BUFFERS", 32, 4, 4096, "bounce buffers per peer and direction"};
inline constexpr Integer kIbRegCacheMb{"TNT_IB_REG_CACHE_MB", 0, 0, 1 << 24,
                                       "memory registration cache; 0 (off) is safe for every caller"};

// --- Launcher and data ---------------------------------------------------------------------------
inline constexpr Text kLaunchSsh{"TNT_LAUNCH_SSH", "ssh", "the command tnt-launch starts remote ranks with"};
inline constexpr Text kDataDir{"TNT_DATA_DIR", "", "folder searched for the built-in data sets"};

// --- Benchmarks only -----------------------------------------------------------------------------
// Never for training: the ranks' weights diverge. bench/trainer sets it to measure what the
// gradient allreduce costs a step under the same compute contention.
inline constexpr Flag kBenchSkipGradientAllreduce{
    "TNT_BENCH_SKIP_GRADIENT_ALLREDUCE", false,
    "benchmarks only: the trainer skips the gradient allreduce (each rank keeps its own gradients)"};

// --- Tests only ----------------------------------------------------------------------------------
// Fault injection (core/include/tnt/core/fail_point.h): "phase:rank[,phase:rank...]".
inline constexpr Text kTestFailAt{"TNT_TEST_FAIL_AT", "",
                                  "tests only: fail the named ranks at the named phases (e.g. checkpoint_write:0)"};
// Note [Optimizer-state sharding] in actors/trainer/src/optimizer_shard.h: "rank:step".
inline constexpr Text kTestNanGradientAt{
    "TNT_TEST_NAN_GRADIENT_AT", "",
    "tests only: with --shard-optimizer, that rank puts a NaN into its own shard of the gradient at that step"};

}  // namespace tnt::settings
