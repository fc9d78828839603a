// An in-process stand-in for libibverbs, linked into tnt-ib-fake-fabric-test only: its ibv_*
// definitions live in the test executable, so they take the place of the shared library's for
// the transport code linked statically into it. It models one device with one active InfiniBand
// port; queue pairs of the same process reach each other by QP number, SENDs consume the peer's
// posted receives in order, RDMA writes are memcpy checked against the target's registrations,
// completions land in CQs and raise events on completion channels (a pipe, so that the event
// loop can wait on its fd). It is strict where a real HCA is: a SEND or WRITE WITH IMMEDIATE that
// finds no receive posted fails with IBV_WC_RNR_RETRY_EXC_ERR, a bad lkey or rkey with a
// protection or remote-access error, posting to a queue pair that is not ready fails, and
// moving a queue pair to RTR with an address that does not fit the port (a LID on InfiniBand; a
// GRH with the right GID on RoCE, selected with TNT_FAKE_VERBS_ROCE=1) is refused.
//
// It exercises ib_transport.cpp's glue (set-up, state transitions, work requests, completion
// events); it says nothing about how real drivers and HCAs behave.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

namespace {

std::mutex fabric_mutex;

struct CqState {
  std::deque<ibv_wc> entries;
  bool armed = false;
};
struct ChannelState {
  int write_fd = -1;
  std::deque<ibv_cq*> events;
};
struct QpState {
  std::deque<ibv_recv_wr> receives;  // sg_list points into `sges`
  std::deque<ibv_sge> sges;
  std::uint32_t dest_qp_num = 0;
};
struct MrState {
  std::uintptr_t begin;
  std::uintptr_t end;
  int access;
};

ibv_device the_device{};
ibv_device* device_list[2] = {&the_device, nullptr};
std::map<ibv_cq*, CqState> cqs;
std::map<ibv_comp_channel*, ChannelState> channels;
std::map<ibv_qp*, QpState> qp_states;
std::map<std::uint32_t, ibv_qp*> qps_by_number;
std::map<std::uint32_t, MrState> mrs;  // by key (lkey == rkey)
std::uint32_t next_qp_num = 0x100;
long sends_until_failure = -1;  // fake_verbs_fail_send_after(): < 0 never
std::uint32_t next_key = 0x1000;

// TNT_FAKE_VERBS_ROCE=1: the port is RoCE (Ethernet link layer, no LID, a GID table).
bool roce() {
  const char* value = std::getenv("TNT_FAKE_VERBS_ROCE");
  return value && std::strcmp(value, "1") == 0;
}

ibv_gid link_local_gid() {
  ibv_gid gid{};
  gid.raw[0] = 0xfe;
  gid.raw[1] = 0x80;
  gid.raw[15] = 0x01;
  return gid;
}

ibv_gid loopback_v4_gid() {  // ::ffff:127.0.0.1
  ibv_gid gid{};
  gid.raw[10] = 0xff;
  gid.raw[11] = 0xff;
  gid.raw[12] = 127;
  gid.raw[15] = 1;
  return gid;
}

void push_completion(ibv_cq* cq, const ibv_wc& wc) {
  CqState& state = cqs.at(cq);
  state.entries.push_back(wc);
  if (state.armed && cq->channel) {
    state.armed = false;
    ChannelState& channel = channels.at(cq->channel);
    channel.events.push_back(cq);
    const char byte = 1;
    (void)::write(channel.write_fd, &byte, 1);
  }
}

bool covers(std::uint32_t key, std::uint64_t address, std::size_t bytes, int need_access) {
  auto it = mrs.find(key);
  return it != mrs.end() && it->second.begin <= address && address + bytes <= it->second.end &&
         (it->second.access & need_access) == need_access;
}

ibv_wc completion(std::uint64_t wr_id, ibv_qp* qp, ibv_wc_opcode opcode, ibv_wc_status status = IBV_WC_SUCCESS) {
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = status;
  wc.opcode = opcode;
  wc.qp_num = qp->qp_num;
  return wc;
}

void to_error(ibv_qp* qp) {
  if (qp->state == IBV_QPS_ERR) return;
  qp->state = IBV_QPS_ERR;
  QpState& state = qp_states.at(qp);
  for (const auto& receive : state.receives)
    push_completion(qp->recv_cq, completion(receive.wr_id, qp, IBV_WC_RECV, IBV_WC_WR_FLUSH_ERR));
  state.receives.clear();
  state.sges.clear();
}

// Takes the peer's next posted receive; false: none posted (receiver not ready).
bool take_receive(ibv_qp* peer, ibv_recv_wr& receive, ibv_sge& sge) {
  QpState& state = qp_states.at(peer);
  if (state.receives.empty()) return false;
  receive = state.receives.front();
  sge = state.sges.front();
  state.receives.pop_front();
  state.sges.pop_front();
  return true;
}

int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) {
  std::lock_guard lock(fabric_mutex);
  CqState& state = cqs.at(cq);
  int count = 0;
  while (count < num_entries && !state.entries.empty()) {
    wc[count++] = state.entries.front();
    state.entries.pop_front();
  }
  return count;
}

int req_notify_cq(ibv_cq* cq, int) {
  std::lock_guard lock(fabric_mutex);
  cqs.at(cq).armed = true;
  return 0;
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard lock(fabric_mutex);
  if (qp->state == IBV_QPS_RESET) {
    *bad = wr;
    return EINVAL;
  }
  QpState& state = qp_states.at(qp);
  for (; wr; wr = wr->next) {
    if (wr->num_sge != 1) {
      *bad = wr;
      return EINVAL;
    }
    if (qp->state == IBV_QPS_ERR) {
      push_completion(qp->recv_cq, completion(wr->wr_id, qp, IBV_WC_RECV, IBV_WC_WR_FLUSH_ERR));
      continue;
    }
    state.sges.push_back(*wr->sg_list);
    state.receives.push_back(*wr);
  }
  return 0;
}

void execute(ibv_qp* qp, const ibv_send_wr& wr) {
  const ibv_wc_opcode done = wr.opcode == IBV_WR_SEND ? IBV_WC_SEND : IBV_WC_RDMA_WRITE;
  auto fail = [&](ibv_wc_status status) {
    push_completion(qp->send_cq, completion(wr.wr_id, qp, done, status));
    to_error(qp);
  };
  if (sends_until_failure >= 0 && sends_until_failure-- == 0) return fail(IBV_WC_RETRY_EXC_ERR);  // as if the link died
  const ibv_sge& sge = wr.sg_list[0];
  if (sge.length && !covers(sge.lkey, sge.addr, sge.length, 0)) return fail(IBV_WC_LOC_PROT_ERR);
  auto peer_it = qps_by_number.find(qp_states.at(qp).dest_qp_num);
  if (peer_it == qps_by_number.end() || peer_it->second->state == IBV_QPS_ERR || peer_it->second->state < IBV_QPS_RTR) {
    return fail(IBV_WC_RETRY_EXC_ERR);  // nobody acknowledges
  }
  ibv_qp* peer = peer_it->second;
  if (wr.opcode == IBV_WR_SEND) {
    ibv_recv_wr receive{};
    ibv_sge target{};
    if (!take_receive(peer, receive, target)) return fail(IBV_WC_RNR_RETRY_EXC_ERR);
    if (sge.length > target.length || !covers(target.lkey, target.addr, sge.length, IBV_ACCESS_LOCAL_WRITE)) {
      push_completion(peer->recv_cq, completion(receive.wr_id, peer, IBV_WC_RECV, IBV_WC_LOC_LEN_ERR));
      to_error(peer);
      return fail(IBV_WC_REM_INV_REQ_ERR);
    }
    if (sge.length) std::memcpy(reinterpret_cast<void*>(target.addr), reinterpret_cast<void*>(sge.addr), sge.length);
    ibv_wc arrived = completion(receive.wr_id, peer, IBV_WC_RECV);
    arrived.byte_len = sge.length;
    push_completion(peer->recv_cq, arrived);
  } else {
    if (!covers(wr.wr.rdma.rkey, wr.wr.rdma.remote_addr, sge.length, IBV_ACCESS_REMOTE_WRITE)) {
      to_error(peer);
      return fail(IBV_WC_REM_ACCESS_ERR);
    }
    ibv_recv_wr receive{};
    ibv_sge target{};
    if (wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM && !take_receive(peer, receive, target))
      return fail(IBV_WC_RNR_RETRY_EXC_ERR);
    std::memcpy(reinterpret_cast<void*>(wr.wr.rdma.remote_addr), reinterpret_cast<void*>(sge.addr), sge.length);
    if (wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
      ibv_wc arrived = completion(receive.wr_id, peer, IBV_WC_RECV_RDMA_WITH_IMM);
      arrived.byte_len = sge.length;
      arrived.imm_data = wr.imm_data;
      arrived.wc_flags = IBV_WC_WITH_IMM;
      push_completion(peer->recv_cq, arrived);
    }
  }
  push_completion(qp->send_cq, completion(wr.wr_id, qp, done));
}

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard lock(fabric_mutex);
  for (; wr; wr = wr->next) {
    const bool known =
        wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    if (qp->state != IBV_QPS_RTS || wr->num_sge != 1 || !known) {
      *bad = wr;
      return EINVAL;
    }
    execute(qp, *wr);
  }
  return 0;
}

}  // namespace

extern "C" {

// Test hook: the work request after the next `count` fails as if the peer stopped answering.
void fake_verbs_fail_send_after(long count) {
  std::lock_guard lock(fabric_mutex);
  sends_until_failure = count;
}

ibv_device** ibv_get_device_list(int* num_devices) {
  std::strcpy(the_device.name, "fake_ib0");
  if (num_devices) *num_devices = 1;
  return device_list;
}

void ibv_free_device_list(ibv_device**) {}

const char* ibv_get_device_name(ibv_device* device) { return device->name; }

ibv_context* ibv_open_device(ibv_device* device) {
  auto* context = new ibv_context{};
  context->device = device;
  context->ops.poll_cq = poll_cq;
  context->ops.req_notify_cq = req_notify_cq;
  context->ops.post_send = post_send;
  context->ops.post_recv = post_recv;
  return context;
}

int ibv_close_device(ibv_context* context) {
  delete context;
  return 0;
}

int ibv_query_device(ibv_context*, ibv_device_attr* attributes) {
  *attributes = ibv_device_attr{};
  attributes->phys_port_cnt = 1;
  attributes->max_qp_wr = 16384;
  return 0;
}

int ibv_query_port(ibv_context*, std::uint8_t port, _compat_ibv_port_attr* compat) {
  if (port != 1) return EINVAL;
  // The header's inline wrapper passes a full ibv_port_attr.
  auto* attributes = reinterpret_cast<ibv_port_attr*>(compat);
  attributes->state = IBV_PORT_ACTIVE;
  attributes->max_mtu = IBV_MTU_4096;
  attributes->active_mtu = roce() ? IBV_MTU_1024 : IBV_MTU_4096;
  attributes->gid_tbl_len = roce() ? 4 : 1;
  attributes->max_msg_sz = 1u << 31;
  attributes->lid = roce() ? 0 : 7;
  attributes->link_layer = roce() ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  return 0;
}

int _ibv_query_gid_ex(ibv_context*, std::uint32_t port, std::uint32_t index, ibv_gid_entry* entry, std::uint32_t,
                      std::size_t) {
  *entry = ibv_gid_entry{};
  entry->gid_index = index;
  entry->port_num = port;
  if (!roce()) {
    if (index != 0) return ENODATA;
    entry->gid_type = IBV_GID_TYPE_IB;
    entry->gid = link_local_gid();
    return 0;
  }
  // RoCE: v1 and v2 link-local entries, an empty slot, then the v2 entry of the IPv4 address.
  switch (index) {
    case 0:
    case 1:
      entry->gid_type = index == 0 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2;
      entry->gid = link_local_gid();
      return 0;
    case 3:
      entry->gid_type = IBV_GID_TYPE_ROCE_V2;
      entry->gid = loopback_v4_gid();
      return 0;
    default: return ENODATA;
  }
}

int ibv_query_gid(ibv_context* context, std::uint8_t port, int index, ibv_gid* gid) {
  ibv_gid_entry entry{};
  if (_ibv_query_gid_ex(context, port, static_cast<std::uint32_t>(index), &entry, 0, sizeof entry) != 0) {
    errno = EINVAL;
    return -1;  // as the real call: -1 and errno
  }
  *gid = entry.gid;
  return 0;
}

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  auto* pd = new ibv_pd{};
  pd->context = context;
  return pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  delete pd;
  return 0;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, std::size_t length, int access) {
  std::lock_guard lock(fabric_mutex);
  if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
    errno = EINVAL;
    return nullptr;
  }
  auto* mr = new ibv_mr{};
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  mr->lkey = mr->rkey = next_key++;
  const auto begin = reinterpret_cast<std::uintptr_t>(addr);
  mrs[mr->lkey] = MrState{begin, begin + length, access};
  return mr;
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t, unsigned int access) {
  return ibv_reg_mr(pd, addr, length, static_cast<int>(access));
}

int ibv_dereg_mr(ibv_mr* mr) {
  std::lock_guard lock(fabric_mutex);
  mrs.erase(mr->lkey);
  delete mr;
  return 0;
}

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  int fds[2];
  if (::pipe(fds) != 0) return nullptr;
  std::lock_guard lock(fabric_mutex);
  auto* channel = new ibv_comp_channel{};
  channel->context = context;
  channel->fd = fds[0];
  channels[channel] = ChannelState{fds[1], {}};
  return channel;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  std::lock_guard lock(fabric_mutex);
  ::close(channels.at(channel).write_fd);
  ::close(channel->fd);
  channels.erase(channel);
  delete channel;
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel, int) {
  std::lock_guard lock(fabric_mutex);
  auto* cq = new ibv_cq{};
  cq->context = context;
  cq->channel = channel;
  cq->cq_context = cq_context;
  cq->cqe = cqe;
  cqs[cq] = CqState{};
  return cq;
}

int ibv_destroy_cq(ibv_cq* cq) {
  std::lock_guard lock(fabric_mutex);
  if (cq->channel) {
    auto& events = channels.at(cq->channel).events;
    for (auto it = events.begin(); it != events.end();) it = *it == cq ? events.erase(it) : it + 1;
  }
  cqs.erase(cq);
  delete cq;
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  std::lock_guard lock(fabric_mutex);
  ChannelState& state = channels.at(channel);
  char byte = 0;
  while (true) {
    if (::read(channel->fd, &byte, 1) != 1) return -1;  // errno EAGAIN: nothing pending
    if (state.events.empty()) continue;                 // the event of a destroyed CQ
    *cq = state.events.front();
    state.events.pop_front();
    *cq_context = (*cq)->cq_context;
    return 0;
  }
}

void ibv_ack_cq_events(ibv_cq*, unsigned int) {}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  std::lock_guard lock(fabric_mutex);
  if (init->qp_type != IBV_QPT_RC || !init->send_cq || !init->recv_cq) {
    errno = EINVAL;
    return nullptr;
  }
  auto* qp = new ibv_qp{};
  qp->context = pd->context;
  qp->pd = pd;
  qp->send_cq = init->send_cq;
  qp->recv_cq = init->recv_cq;
  qp->qp_type = init->qp_type;
  qp->state = IBV_QPS_RESET;
  qp->qp_num = next_qp_num++;
  qp_states[qp] = QpState{};
  qps_by_number[qp->qp_num] = qp;
  return qp;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attributes, int mask) {
  std::lock_guard lock(fabric_mutex);
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  const ibv_qp_state next = attributes->qp_state;
  const int rtr_needs =
      IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  const int rts_needs = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
  if (next == IBV_QPS_ERR) {
    to_error(qp);
    return 0;
  }
  if (next == IBV_QPS_INIT && qp->state == IBV_QPS_RESET && (mask & IBV_QP_PORT) && attributes->port_num == 1) {
    qp->state = next;
    return 0;
  }
  if (next == IBV_QPS_RTR && qp->state == IBV_QPS_INIT && (mask & rtr_needs) == rtr_needs) {
    // RoCE has no LIDs: the address must carry a GRH with the GID of the data-plane address.
    const ibv_ah_attr& ah = attributes->ah_attr;
    const ibv_gid expected = loopback_v4_gid();
    if (roce() && (!ah.is_global || ah.grh.sgid_index != 3 || std::memcmp(ah.grh.dgid.raw, expected.raw, 16) != 0 ||
                   attributes->path_mtu != IBV_MTU_1024)) {
      return EINVAL;
    }
    if (!roce() && (ah.is_global || ah.dlid != 7)) return EINVAL;
    qp_states.at(qp).dest_qp_num = attributes->dest_qp_num;
    qp->state = next;
    return 0;
  }
  if (next == IBV_QPS_RTS && qp->state == IBV_QPS_RTR && (mask & rts_needs) == rts_needs) {
    qp->state = next;
    return 0;
  }
  return EINVAL;
}

int ibv_destroy_qp(ibv_qp* qp) {
  std::lock_guard lock(fabric_mutex);
  qps_by_number.erase(qp->qp_num);
  qp_states.erase(qp);
  delete qp;
  return 0;
}

const char* ibv_wc_status_str(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    default: return "other error";
  }
}

}  // extern "C"
