// The InfiniBand verbs back end: reliable connected queue pairs, one per peer, carrying the
// protocol of protocol.h (eager bounce buffers + RTS/CTS rendezvous with RDMA WRITE WITH
// IMMEDIATE into registered user memory).
//
// Compiled and reviewed, but never run on InfiniBand hardware: the machines this was written on
// have no RDMA device. The protocol layer is tested over a fake wire, and this file's code runs in
// tests only against tests/ib/fake_verbs.cpp, an in-process stand-in for libibverbs; how it fares
// with real drivers and HCAs is unknown. See transport/src/ib/README.md.
//
// Note [IB connection setup]: queue pairs are connected through the same authenticated TCP side
// channel as the TCP back end (the higher rank connects to the lower, authenticate_as_client /
// authenticate_as_server with ChannelKind::data) rather than through rdmacm, because
//   - every data-plane connection must prove the job token before it is used (docs/design.md,
//     "The wire protocol"); over the side channel that is the existing handshake, byte for byte,
//     and the queue-pair numbers, LID/GID and sizes are then exchanged on the authenticated stream.
//     rdmacm's connect carries only 56 bytes of private data one way, so a challenge-response would
//     have to be built anew on top of the first RDMA messages, with the queue pair already
//     accepting writes;
//   - the side channel stays open for the life of the channel: when a peer process dies the
//     kernel closes its socket and we see EOF at once, even on a rank that is only receiving
//     (a queue pair reports a dead peer only when a send of ours times out);
//   - it needs nothing beyond the address book the rendezvous already distributes.
// The cost is that the address (GID) is chosen here rather than resolved by rdmacm: on RoCE we
// pick the RoCE v2 GID that maps the rank's data-plane IP address (or TNT_IB_GID_INDEX).
#include "ib_transport.h"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>

#include "../pair_transport.h"
#include "../side_channel.h"
#include "protocol.h"
#include "registration_cache.h"
#include "tnt/core/error.h"
#include "tnt/core/settings.h"
#include "verbs.h"

namespace tnt::transport {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace ib {
namespace {

// Tunables, read once from the environment (README.md lists them).
struct Settings {
  std::string device;                   // TNT_IB_DEVICE: default the first device with an active port
  int port = 0;                         // TNT_IB_PORT: default the device's first active port
  int gid_index = -1;                   // TNT_IB_GID_INDEX: default chosen from the data-plane address
  std::size_t eager_limit = 16 * 1024;  // TNT_IB_EAGER_KB: larger messages use the rendezvous
  std::uint32_t recv_slots = 32;        // TNT_IB_BUFFERS: bounce buffers per peer and direction
  // TNT_IB_REG_CACHE_MB. Off by default: see Note [Stale registrations] (registration_cache.h);
  // tnt's own callers free and reallocate buffers (the collectives' tests allocate a fresh
  // vector per call), which a cache would turn into silent corruption.
  std::size_t cache_bytes = 0;

  static Settings from_env();
};

Settings Settings::from_env() {
  Settings s;
  s.device = settings::kIbDevice.read();
  s.port = static_cast<int>(settings::kIbPort.read());
  s.gid_index = static_cast<int>(settings::kIbGidIndex.read());
  s.eager_limit = settings::kIbEagerKb.read();
  s.recv_slots = static_cast<std::uint32_t>(settings::kIbBuffers.read());
  s.cache_bytes = static_cast<std::size_t>(settings::kIbRegCacheMb.read()) << 20;
  return s;
}

// What two ranks exchange on the side channel after authenticating. Fixed size: read whole,
// checked field by field before anything is created from it.
struct SetupInfo {
  std::array<char, 4> magic;
  std::uint32_t version;
  std::uint32_t qp_num;
  std::uint32_t psn;
  std::uint32_t recv_slots;
  std::uint32_t eager_limit;
  std::uint16_t lid;
  std::uint8_t link_layer;
  std::uint8_t mtu;
  std::uint8_t gid[16];
};
static_assert(sizeof(SetupInfo) == 44);
constexpr std::array<char, 4> kSetupMagic{'T', 'N', 'I', 'B'};
constexpr std::uint32_t kSetupVersion = 1;
constexpr std::uint8_t kReady = 'R';

// Receive-side work requests carry this bit; send-side ids come from the protocol.
constexpr std::uint64_t kRecvBit = std::uint64_t{1} << 63;

std::string error_text(const boost::system::error_code& ec) {
  if (ec == asio::error::eof) return "connection closed by the peer (process ended or killed?)";
  return ec.message();
}

std::string completion_error(const ibv_wc& wc) {
  std::string text = std::string(ibv_wc_status_str(wc.status)) + " (status " +
                     std::to_string(static_cast<int>(wc.status)) + ", vendor error " + std::to_string(wc.vendor_err) +
                     ")";
  if (wc.status == IBV_WC_RETRY_EXC_ERR)
    text += ": the peer stopped acknowledging (process ended, node down or link lost?)";
  if (wc.status == IBV_WC_REM_ACCESS_ERR) text += ": the peer refused the RDMA write (its buffer was deregistered?)";
  return text;
}

struct Port {
  int number = 0;
  ibv_port_attr attributes{};
};

}  // namespace

class IbTransport;

// One peer: its completion queue, queue pair, bounce buffers and protocol state, plus the
// authenticated TCP socket that set it up and now only watches for the peer's end.
class IbPair final : public Pair, private Wire {
 public:
  IbPair(IbTransport& owner, int peer, std::string peer_name);
  ~IbPair() override;

  SetupInfo local_info() const;
  // Checks the peer's info, creates the protocol state, posts the receive buffers and moves the
  // queue pair to ready-to-send. Throws tnt::JobError.
  void connect(const SetupInfo& remote);
  void watch(tcp::socket socket);  // keeps the side channel and reports its end as a failure
  void on_completion_event();      // the completion channel said our CQ has work
  void fail(const std::string& message) { channel_->fail(message); }
  void close();

  void send(Tag tag, const void* data, std::size_t bytes, CompletionSink& sink, std::uint64_t cookie) override {
    channel_->send(tag, data, bytes, sink, cookie);
  }
  void recv(Tag tag, void* data, std::size_t capacity, CompletionSink& sink, std::uint64_t cookie) override {
    channel_->recv(tag, data, capacity, sink, cookie);
  }
  int peer_rank() const override { return peer_; }

 private:
  // Wire
  std::byte* recv_buffer(std::uint32_t slot) override { return buffers_ + slot * slot_bytes_; }
  std::byte* send_buffer(std::uint32_t slot) override { return buffers_ + (recv_slots_ + slot) * slot_bytes_; }
  void post_recv(std::uint32_t slot) override;
  void post_send(std::uint32_t slot, std::size_t bytes, std::uint64_t wr_id) override;
  void post_write(const WriteRequest& request) override;

  void modify(ibv_qp_attr& attributes, int mask, const char* what);
  void on_failure(const std::string& message);
  void stop_remote_access();

  IbTransport& owner_;
  int peer_;
  std::string peer_name_;
  std::string where_;  // "for the channel to rank 3 (node07, ...)"
  std::uint32_t recv_slots_;
  std::uint32_t send_queue_depth_;
  std::size_t slot_bytes_;
  std::uint32_t psn_;
  // Members are destroyed bottom-up: the protocol state first (it releases user registrations),
  // then the queue pair, which must go before its completion queue and its buffers' region.
  std::unique_ptr<std::byte, decltype(&std::free)> buffer_memory_{nullptr, &std::free};
  std::byte* buffers_ = nullptr;
  ib::MemoryRegion buffers_region_;
  ib::CompletionQueue cq_;
  ib::QueuePair qp_;
  std::unique_ptr<Channel> channel_;
  tcp::socket side_;
  std::uint8_t side_byte_ = 0;
  bool closing_ = false;
};

class IbTransport final : public PairTransport<IbPair> {
 public:
  IbTransport(EventLoop& loop, const JobEnvironment& env)
      : PairTransport(loop, env), settings_(Settings::from_env()), completion_fd_(loop.strand()) {
    select_device();
    pd_ = allocate_pd(context_.get());
    completion_channel_ = create_completion_channel(context_.get());
    cache_ = std::make_unique<RegistrationCache>(
        [this](void* start, std::size_t bytes) {
          auto region = std::make_shared<MemoryRegion>(register_memory(
              pd_.get(), start, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, "for a user buffer"));
          return RegistrationCache::Region{region->get()->lkey, region->get()->rkey, region};
        },
        settings_.cache_bytes);
    spdlog::debug("InfiniBand: device {} port {} ({}), eager limit {} bytes, {} buffers per peer",
                  ibv_get_device_name(context_.get()->device), port_.number,
                  port_.attributes.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", settings_.eager_limit,
                  settings_.recv_slots);
    // Last: once assigned, the fd must be released before the completion channel closes it.
    completion_fd_.assign(completion_channel_.get()->fd);
  }

  ~IbTransport() override {
    close();
    wait_for_handlers();
    pairs_.clear();  // queue pairs and completion queues before the channel, PD and context
    cache_.reset();
    // The completion channel owns the fd; Asio must not close it.
    completion_fd_.release();
  }

  std::string listen(const std::string& local_ip) override {
    const auto address = parse_data_ip(local_ip);
    choose_gid(address);
    // Peers need only the side channel's address: queue-pair numbers and GIDs are per channel
    // and travel on it once the peers have authenticated each other.
    return listen_side_channel(acceptor_, address, "InfiniBand set-up connections");
  }

  void stop_watching() override {
    boost::system::error_code ignored;
    completion_fd_.cancel(ignored);
  }

  void defer(std::function<void()> task) {
    begin_io();
    asio::post(loop_.strand(), [this, task = std::move(task)] {
      const IoScope io{*this};
      if (!closed()) task();
    });
  }
  const Settings& settings() const { return settings_; }
  ibv_context* context() const { return context_.get(); }
  ibv_pd* pd() const { return pd_.get(); }
  ibv_comp_channel* completion_channel() const { return completion_channel_.get(); }
  const Port& port() const { return port_; }
  int gid_index() const { return gid_index_; }
  const ibv_gid& gid() const { return gid_; }
  bool use_grh() const { return use_grh_; }
  MemoryRegistry& memory() { return *cache_; }

 private:
  void select_device() {
    DeviceList devices;
    if (devices.size() == 0) {
      std::string detail = "device list seen: none";
      if (devices.error()) {
        detail += "; ibv_get_device_list: " + std::string(std::strerror(devices.error()));
        if (devices.error() == ENOSYS) detail += " (no RDMA support in this kernel: no ib_uverbs module)";
      }
      throw ConfigError(
          "--transport=ib: no InfiniBand device found (ibv_get_device_list returned 0 devices); use --transport=tcp (" +
          detail + ")");
    }
    std::string seen;  // "mlx5_0 (port 1: DOWN), mlx5_1 (port 1: ACTIVE)"
    for (int i = 0; i < devices.size(); ++i) {
      const std::string name = ibv_get_device_name(devices[i]);
      if (!settings_.device.empty() && name != settings_.device) continue;
      if (!seen.empty()) seen += ", ";
      seen += name + " (";
      Context context = open_device_or_note(devices[i], seen);
      if (!context) continue;
      ibv_device_attr device{};
      if (int error = ibv_query_device(context.get(), &device))
        throw_verbs_error("ibv_query_device", error, "for device " + name);
      std::string states;
      for (int number = 1; number <= device.phys_port_cnt; ++number) {
        if (settings_.port && number != settings_.port) continue;
        Port port{number, {}};
        if (int error = ibv_query_port(context.get(), static_cast<std::uint8_t>(number), &port.attributes)) {
          throw_verbs_error("ibv_query_port", error, "for device " + name + " port " + std::to_string(number));
        }
        states += (states.empty() ? "" : ", ") + std::string("port ") + std::to_string(number) + ": " +
                  port_state_name(port.attributes.state);
        if (port.attributes.state == IBV_PORT_ACTIVE) {
          context_ = std::move(context);
          port_ = port;
          return;
        }
      }
      seen += (states.empty() ? "no such port" : states) + ")";
    }
    if (!settings_.device.empty() && seen.empty()) {
      std::string names;
      for (const auto& n : devices.names()) names += (names.empty() ? "" : ", ") + n;
      throw ConfigError("--transport=ib: TNT_IB_DEVICE='" + settings_.device +
                        "' is not among the devices found: " + names);
    }
    throw ConfigError(
        "--transport=ib: no active InfiniBand port" +
        (settings_.port ? " numbered " + std::to_string(settings_.port) + " (TNT_IB_PORT)" : std::string()) +
        " on the devices found: " + seen + "; use --transport=tcp");
  }

  static Context open_device_or_note(ibv_device* device, std::string& seen) {
    try {
      return ib::open_device(device);
    } catch (const JobError& error) {
      seen += std::string("cannot open: ") + error.what() + ")";
      return Context();
    }
  }

  // RoCE needs a GRH and so a GID: the RoCE v2 entry that carries the data-plane IPv4 address,
  // else the first RoCE v2 entry, else the first valid one. InfiniBand routes by LID inside a
  // subnet and uses a GID only when TNT_IB_GID_INDEX asks for it.
  void choose_gid(const asio::ip::address& local) {
    const bool ethernet = port_.attributes.link_layer == IBV_LINK_LAYER_ETHERNET;
    use_grh_ = ethernet || settings_.gid_index >= 0;
    const std::string where = "for device " + std::string(ibv_get_device_name(context_.get()->device)) + " port " +
                              std::to_string(port_.number);
    if (settings_.gid_index >= 0) {
      if (settings_.gid_index >= port_.attributes.gid_tbl_len) {
        throw ConfigError("TNT_IB_GID_INDEX=" + std::to_string(settings_.gid_index) + " is beyond the GID table (" +
                          std::to_string(port_.attributes.gid_tbl_len) + " entries) " + where);
      }
      gid_index_ = settings_.gid_index;
    } else if (ethernet) {
      ibv_gid mapped{};
      if (local.is_v4()) {
        mapped.raw[10] = 0xff;
        mapped.raw[11] = 0xff;
        const auto bytes = local.to_v4().to_bytes();
        std::memcpy(mapped.raw + 12, bytes.data(), 4);
      } else {
        const auto bytes = local.to_v6().to_bytes();
        std::memcpy(mapped.raw, bytes.data(), 16);
      }
      int first_v2 = -1;
      int first_valid = -1;
      for (int index = 0; index < port_.attributes.gid_tbl_len; ++index) {
        ibv_gid_entry entry{};
        if (ibv_query_gid_ex(context_.get(), static_cast<std::uint32_t>(port_.number),
                             static_cast<std::uint32_t>(index), &entry, 0)) {
          continue;  // an empty entry (ENODATA)
        }
        if (first_valid < 0) first_valid = index;
        if (entry.gid_type != IBV_GID_TYPE_ROCE_V2) continue;
        if (first_v2 < 0) first_v2 = index;
        if (std::memcmp(entry.gid.raw, mapped.raw, 16) == 0) {
          first_v2 = index;
          break;
        }
      }
      gid_index_ = first_v2 >= 0 ? first_v2 : first_valid;
      if (gid_index_ < 0)
        throw ConfigError("--transport=ib: the RoCE port has no valid GID " + where + "; use --transport=tcp");
    }
    if (use_grh_) {
      if (int error = ibv_query_gid(context_.get(), static_cast<std::uint8_t>(port_.number), gid_index_, &gid_)) {
        throw_verbs_error("ibv_query_gid", error, where + " GID index " + std::to_string(gid_index_));
      }
    }
  }

  std::string peer_name(int rank) const { return transport::peer_name(book_, rank); }

  std::string plane() const override { return "InfiniBand data plane"; }

  void after_connect() override {
    if (!waiting_for_completions_) {
      waiting_for_completions_ = true;
      wait_for_completions();
    }
  }

  // Runs on the authenticated socket: exchange queue-pair details, connect, confirm.
  asio::awaitable<void> establish(int peer, tcp::socket& socket) override {
    auto pair = std::make_unique<IbPair>(*this, peer, peer_name(peer));
    const SetupInfo mine = pair->local_info();
    co_await asio::async_write(socket, asio::buffer(&mine, sizeof mine), asio::use_awaitable);
    SetupInfo theirs{};
    co_await asio::async_read(socket, asio::buffer(&theirs, sizeof theirs), asio::use_awaitable);
    pair->connect(theirs);
    // Neither side sends before both queue pairs are ready and have their receives posted.
    co_await asio::async_write(socket, asio::buffer(&kReady, 1), asio::use_awaitable);
    std::uint8_t ready = 0;
    co_await asio::async_read(socket, asio::buffer(&ready, 1), asio::use_awaitable);
    if (ready != kReady) throw JobError("protocol violation: bad ready mark from " + peer_name(peer));
    pair->watch(std::move(socket));
    pairs_[peer] = std::move(pair);
  }

  void wait_for_completions() {
    begin_io();
    completion_fd_.async_wait(asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
      const IoScope io{*this};
      if (ec || closed()) return;
      // Each event names a CQ that has new completions; read until none is left (the fd is
      // non-blocking) and acknowledge each one, as ibv_destroy_cq waits for that.
      while (!closed()) {
        ibv_cq* cq = nullptr;
        void* cq_context = nullptr;
        if (ibv_get_cq_event(completion_channel_.get(), &cq, &cq_context) != 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          const std::string message = std::string("ibv_get_cq_event failed: ") + std::strerror(errno);
          for (auto& pair : pairs_) {
            if (pair) pair->fail(message);  // no completion can be seen any more
          }
          return;
        }
        ibv_ack_cq_events(cq, 1);
        static_cast<IbPair*>(cq_context)->on_completion_event();
      }
      if (!closed()) wait_for_completions();
    });
  }

  Settings settings_;
  // Destroyed bottom-up; pairs_ and cache_ are cleared by hand first in the destructor.
  Context context_;
  Port port_;
  ProtectionDomain pd_;
  CompletionChannel completion_channel_;
  int gid_index_ = 0;
  ibv_gid gid_{};
  bool use_grh_ = false;
  std::unique_ptr<RegistrationCache> cache_;
  asio::posix::stream_descriptor completion_fd_;
  bool waiting_for_completions_ = false;
};

// ---- IbPair -------------------------------------------------------------------------------------

IbPair::IbPair(IbTransport& owner, int peer, std::string peer_name)
    : owner_(owner),
      peer_(peer),
      peer_name_(std::move(peer_name)),
      where_("for the channel to " + peer_name_),
      recv_slots_(owner.settings().recv_slots),
      send_queue_depth_(owner.settings().recv_slots + 64),
      slot_bytes_((slot_bytes(owner.settings().eager_limit) + 63) / 64 * 64),
      psn_(std::random_device{}() & 0xffffff),
      side_(owner.executor()) {
  const std::size_t total = (static_cast<std::size_t>(recv_slots_) * 2 * slot_bytes_ + 4095) / 4096 * 4096;
  buffer_memory_.reset(static_cast<std::byte*>(std::aligned_alloc(4096, total)));
  if (!buffer_memory_)
    throw JobError("cannot allocate " + std::to_string(total) + " bytes of bounce buffers " + where_);
  buffers_ = buffer_memory_.get();
  buffers_region_ =
      register_memory(owner.pd(), buffers_, total, IBV_ACCESS_LOCAL_WRITE, "for the bounce buffers " + where_);
  cq_ = create_cq(owner.context(), static_cast<int>(send_queue_depth_ + recv_slots_), this, owner.completion_channel(),
                  where_);
  qp_ = create_rc_qp(owner.pd(), cq_.get(), send_queue_depth_, recv_slots_, where_);
  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  init.pkey_index = 0;
  init.port_num = static_cast<std::uint8_t>(owner.port().number);
  init.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  modify(init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "to INIT");
}

IbPair::~IbPair() {
  // The protocol state releases its registrations first; the queue pair then goes before the
  // completion queue and the bounce buffers' region (member order).
  channel_.reset();
}

SetupInfo IbPair::local_info() const {
  SetupInfo info{};
  info.magic = kSetupMagic;
  info.version = kSetupVersion;
  info.qp_num = qp_.get()->qp_num;
  info.psn = psn_;
  info.recv_slots = recv_slots_;
  info.eager_limit = static_cast<std::uint32_t>(owner_.settings().eager_limit);
  info.lid = owner_.port().attributes.lid;
  info.link_layer = owner_.port().attributes.link_layer;
  info.mtu = static_cast<std::uint8_t>(owner_.port().attributes.active_mtu);
  std::memcpy(info.gid, owner_.gid().raw, 16);
  return info;
}

void IbPair::connect(const SetupInfo& remote) {
  if (remote.magic != kSetupMagic || remote.version != kSetupVersion) {
    throw JobError("protocol violation: " + peer_name_ +
                   " sent no valid InfiniBand set-up record (another tnt version?)");
  }
  if (remote.recv_slots < 4 || remote.recv_slots > 4096 || remote.eager_limit > 1024 * 1024 ||
      remote.mtu < IBV_MTU_256 || remote.mtu > IBV_MTU_4096) {
    throw JobError("protocol violation: " + peer_name_ + " sent an InfiniBand set-up record with bad sizes");
  }
  if (remote.link_layer != owner_.port().attributes.link_layer) {
    throw JobError(peer_name_ +
                   " uses a different link layer (InfiniBand vs RoCE): these ranks cannot connect by verbs");
  }
  ChannelConfig config;
  config.recv_slots = recv_slots_;
  config.send_slots = recv_slots_;
  config.send_queue_depth = send_queue_depth_;
  config.eager_limit = owner_.settings().eager_limit;
  config.peer_recv_slots = remote.recv_slots;
  config.peer_eager_limit = remote.eager_limit;
  // Writes are split at the port's largest message (a device reporting 0 gets 1 GiB).
  const std::size_t max_message =
      owner_.port().attributes.max_msg_sz ? owner_.port().attributes.max_msg_sz : std::size_t{1} << 30;
  config.max_write_bytes = std::max<std::size_t>(4096, std::min<std::size_t>(std::size_t{1} << 30, max_message));
  channel_ = std::make_unique<Channel>(
      peer_, peer_name_, config, static_cast<Wire&>(*this), owner_.memory(),
      [this](std::function<void()> task) { owner_.defer(std::move(task)); },
      [this](const std::string& message) { on_failure(message); });
  channel_->post_all_receives();  // before the peer can send: it waits for our ready mark

  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  rtr.path_mtu = std::min(owner_.port().attributes.active_mtu, static_cast<ibv_mtu>(remote.mtu));
  rtr.dest_qp_num = remote.qp_num;
  rtr.rq_psn = remote.psn & 0xffffff;
  rtr.max_dest_rd_atomic = 1;
  rtr.min_rnr_timer = 12;  // 0.64 ms; credits keep the peer from ever meeting an empty receive queue
  rtr.ah_attr.dlid = remote.lid;
  rtr.ah_attr.sl = 0;
  rtr.ah_attr.src_path_bits = 0;
  rtr.ah_attr.port_num = static_cast<std::uint8_t>(owner_.port().number);
  if (owner_.use_grh()) {
    rtr.ah_attr.is_global = 1;
    std::memcpy(rtr.ah_attr.grh.dgid.raw, remote.gid, 16);
    rtr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(owner_.gid_index());
    rtr.ah_attr.grh.hop_limit = 64;
  }
  modify(rtr,
         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
             IBV_QP_MIN_RNR_TIMER,
         "to RTR (ready to receive)");

  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.timeout = 14;   // 4.096 us * 2^14 = 67 ms per try
  rts.retry_cnt = 7;  // a dead peer shows as IBV_WC_RETRY_EXC_ERR after about half a second
  rts.rnr_retry = 6;  // finite: a credit bug must end in an error, never in a hang
  rts.sq_psn = psn_;
  rts.max_rd_atomic = 1;
  modify(rts,
         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
         "to RTS (ready to send)");
}

void IbPair::modify(ibv_qp_attr& attributes, int mask, const char* what) {
  if (int error = ibv_modify_qp(qp_.get(), &attributes, mask)) {
    throw_verbs_error("ibv_modify_qp", error, std::string(what) + " " + where_);
  }
}

void IbPair::watch(tcp::socket socket) {
  side_ = std::move(socket);
  owner_.begin_io();
  asio::async_read(side_, asio::buffer(&side_byte_, 1), [this](const boost::system::error_code& ec, std::size_t) {
    const IbTransport::IoScope io{owner_};
    if (closing_ || owner_.closed()) return;
    if (ec)
      channel_->fail("the connection to " + peer_name_ + " was lost: " + error_text(ec));
    else
      channel_->fail("protocol violation: " + peer_name_ + " sent data on the InfiniBand set-up connection");
  });
}

void IbPair::on_completion_event() {
  if (closing_) return;
  // Re-arm before polling: a completion that lands after the poll raises a new event.
  if (int error = ibv_req_notify_cq(cq_.get(), 0)) {
    channel_->fail("ibv_req_notify_cq failed " + where_ + ": " + std::strerror(verbs_errno(error)));
    return;
  }
  ibv_wc completions[32];
  while (!closing_) {
    const int count = ibv_poll_cq(cq_.get(), 32, completions);
    if (count < 0) {
      channel_->fail("ibv_poll_cq failed " + where_ + " (returned " + std::to_string(count) + ")");
      return;
    }
    for (int i = 0; i < count && !closing_; ++i) {
      const ibv_wc& wc = completions[i];
      if (wc.status != IBV_WC_SUCCESS) {
        // After the first error the queue pair flushes everything else: report the first only.
        channel_->fail(std::string(wc.wr_id & kRecvBit ? "receiving from " : "sending to ") + peer_name_ +
                       " failed: " + completion_error(wc));
        continue;
      }
      if (wc.wr_id & kRecvBit) {
        const auto slot = static_cast<std::uint32_t>(wc.wr_id);
        if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM)
          channel_->on_recv_immediate(slot, ntohl(wc.imm_data));
        else
          channel_->on_recv(slot, wc.byte_len);
      } else {
        channel_->on_send_done(wc.wr_id);
      }
    }
    if (count < 32) break;
  }
}

void IbPair::post_recv(std::uint32_t slot) {
  ibv_sge sge{reinterpret_cast<std::uint64_t>(recv_buffer(slot)), static_cast<std::uint32_t>(slot_bytes_),
              buffers_region_.get()->lkey};
  ibv_recv_wr request{};
  request.wr_id = kRecvBit | slot;
  request.sg_list = &sge;
  request.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int error = ibv_post_recv(qp_.get(), &request, &bad)) throw_verbs_error("ibv_post_recv", error, where_);
}

void IbPair::post_send(std::uint32_t slot, std::size_t bytes, std::uint64_t wr_id) {
  ibv_sge sge{reinterpret_cast<std::uint64_t>(send_buffer(slot)), static_cast<std::uint32_t>(bytes),
              buffers_region_.get()->lkey};
  ibv_send_wr request{};
  request.wr_id = wr_id;
  request.sg_list = &sge;
  request.num_sge = 1;
  request.opcode = IBV_WR_SEND;
  request.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (int error = ibv_post_send(qp_.get(), &request, &bad)) throw_verbs_error("ibv_post_send (SEND)", error, where_);
}

void IbPair::post_write(const WriteRequest& write) {
  ibv_sge sge{reinterpret_cast<std::uint64_t>(write.local), static_cast<std::uint32_t>(write.bytes), write.lkey};
  ibv_send_wr request{};
  request.wr_id = write.wr_id;
  request.sg_list = &sge;
  request.num_sge = 1;
  request.opcode = write.with_immediate ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  request.send_flags = IBV_SEND_SIGNALED;
  if (write.with_immediate) request.imm_data = htonl(write.immediate);
  request.wr.rdma.remote_addr = write.remote;
  request.wr.rdma.rkey = write.rkey;
  ibv_send_wr* bad = nullptr;
  if (int error = ibv_post_send(qp_.get(), &request, &bad))
    throw_verbs_error("ibv_post_send (RDMA WRITE)", error, where_);
}

void IbPair::on_failure(const std::string& message) {
  stop_remote_access();
  boost::system::error_code ignored;
  side_.close(ignored);
  owner_.report(peer_, message);
}

// An errored queue pair accepts no more RDMA writes, so a peer holding one of our rkeys cannot
// write into memory that the program may reuse once its operations have failed.
void IbPair::stop_remote_access() {
  if (!qp_) return;
  ibv_qp_attr error{};
  error.qp_state = IBV_QPS_ERR;
  if (int code = ibv_modify_qp(qp_.get(), &error, IBV_QP_STATE)) {
    spdlog::warn("ibv_modify_qp to ERR failed {}: {}", where_, std::strerror(verbs_errno(code)));
  }
}

void IbPair::close() {
  if (closing_) return;
  closing_ = true;
  if (channel_) channel_->close();
  stop_remote_access();
  boost::system::error_code ignored;
  side_.close(ignored);
}

}  // namespace ib

std::unique_ptr<Transport> make_ib_transport(EventLoop& loop, const JobEnvironment& env) {
  return std::make_unique<ib::IbTransport>(loop, env);
}

}  // namespace tnt::transport
