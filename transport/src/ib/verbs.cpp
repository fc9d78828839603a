#include "verbs.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "tnt/core/error.h"

namespace tnt::transport::ib {

int verbs_errno(int result) {
  if (result == -1) return errno ? errno : EIO;
  return result < 0 ? -result : result;
}

void throw_verbs_error(const char* call, int result, const std::string& where) {
  const int error = verbs_errno(result);
  throw JobError(std::string(call) + " failed " + where + ": " + std::strerror(error) + " (errno " +
                 std::to_string(error) + ")");
}

namespace {
// Calls that return NULL report through errno; a provider may forget to set it.
int last_errno() { return errno ? errno : EIO; }
}  // namespace

DeviceList::DeviceList() {
  errno = 0;
  devices_ = ibv_get_device_list(&count_);
  if (!devices_) {
    count_ = 0;
    error_ = last_errno();
  }
}

DeviceList::~DeviceList() {
  if (devices_) ibv_free_device_list(devices_);
}

std::vector<std::string> DeviceList::names() const {
  std::vector<std::string> names;
  for (int i = 0; i < count_; ++i) names.emplace_back(ibv_get_device_name(devices_[i]));
  return names;
}

Context open_device(ibv_device* device) {
  errno = 0;
  ibv_context* context = ibv_open_device(device);
  if (!context)
    throw_verbs_error("ibv_open_device", last_errno(), std::string("for device ") + ibv_get_device_name(device));
  return Context(context);
}

ProtectionDomain allocate_pd(ibv_context* context) {
  errno = 0;
  ibv_pd* pd = ibv_alloc_pd(context);
  if (!pd)
    throw_verbs_error("ibv_alloc_pd", last_errno(), std::string("on device ") + ibv_get_device_name(context->device));
  return ProtectionDomain(pd);
}

CompletionChannel create_completion_channel(ibv_context* context) {
  errno = 0;
  ibv_comp_channel* channel = ibv_create_comp_channel(context);
  const std::string where = std::string("on device ") + ibv_get_device_name(context->device);
  if (!channel) throw_verbs_error("ibv_create_comp_channel", last_errno(), where);
  CompletionChannel owner(channel);
  // The event loop waits for the fd to become readable; reading it must then never block.
  const int flags = ::fcntl(channel->fd, F_GETFL);
  if (flags < 0 || ::fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throw_verbs_error("fcntl(O_NONBLOCK) on the completion channel", errno, where);
  }
  return owner;
}

CompletionQueue create_cq(ibv_context* context, int entries, void* cq_context, ibv_comp_channel* channel,
                          const std::string& where) {
  errno = 0;
  ibv_cq* cq = ibv_create_cq(context, entries, cq_context, channel, 0);
  if (!cq) throw_verbs_error("ibv_create_cq", last_errno(), where);
  CompletionQueue owner(cq);
  if (int error = ibv_req_notify_cq(cq, 0)) throw_verbs_error("ibv_req_notify_cq", error, where);
  return owner;
}

QueuePair create_rc_qp(ibv_pd* pd, ibv_cq* cq, std::uint32_t send_wr, std::uint32_t recv_wr, const std::string& where) {
  ibv_qp_init_attr attributes{};
  attributes.send_cq = cq;
  attributes.recv_cq = cq;
  attributes.qp_type = IBV_QPT_RC;
  attributes.sq_sig_all = 1;  // every send-side request completes: the protocol counts them
  attributes.cap.max_send_wr = send_wr;
  attributes.cap.max_recv_wr = recv_wr;
  attributes.cap.max_send_sge = 1;
  attributes.cap.max_recv_sge = 1;
  errno = 0;
  ibv_qp* qp = ibv_create_qp(pd, &attributes);
  if (!qp) throw_verbs_error("ibv_create_qp", last_errno(), where);
  return QueuePair(qp);
}

MemoryRegion register_memory(ibv_pd* pd, void* data, std::size_t bytes, int access, const std::string& where) {
  errno = 0;
  ibv_mr* mr = ibv_reg_mr(pd, data, bytes, access);
  if (!mr) {
    throw_verbs_error(
        "ibv_reg_mr", last_errno(),
        where + " (" + std::to_string(bytes) + " bytes; is the locked-memory limit, ulimit -l, high enough?)");
  }
  return MemoryRegion(mr);
}

const char* port_state_name(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
  }
  return "UNKNOWN";
}

}  // namespace tnt::transport::ib
