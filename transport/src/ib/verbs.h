#pragma once
// Owners of verbs resources: each frees its resource once, copies are deleted, and every
// failing ibv_* call becomes a tnt::JobError that says which call, why (strerror) and for
// which peer ("where").
#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tnt::transport::ib {

// Most verbs return an errno value, some (ibv_query_gid) -1 with errno set, and some providers
// a negated errno: this gives the errno value in every case. Call it right after the call.
int verbs_errno(int result);

// "ibv_create_qp failed for the channel to rank 3 (node07): Cannot allocate memory (errno 12)".
// `error` is a verbs return value or an errno value (see verbs_errno).
[[noreturn]] void throw_verbs_error(const char* call, int error, const std::string& where);

template <class T, int (*Destroy)(T*)>
class VerbsHandle {
 public:
  VerbsHandle() = default;
  explicit VerbsHandle(T* raw) : raw_(raw) {}
  ~VerbsHandle() { reset(); }
  VerbsHandle(const VerbsHandle&) = delete;
  VerbsHandle& operator=(const VerbsHandle&) = delete;
  VerbsHandle(VerbsHandle&& other) noexcept : raw_(std::exchange(other.raw_, nullptr)) {}
  VerbsHandle& operator=(VerbsHandle&& other) noexcept {
    if (this != &other) {
      reset();
      raw_ = std::exchange(other.raw_, nullptr);
    }
    return *this;
  }
  T* get() const { return raw_; }
  explicit operator bool() const { return raw_ != nullptr; }
  // A destroy call can only fail on a resource still in use, which these owners' member order
  // rules out; there is nothing useful to do with such a failure in a destructor.
  void reset() {
    if (raw_) (void)Destroy(std::exchange(raw_, nullptr));
  }

 private:
  T* raw_ = nullptr;
};

class DeviceList {
 public:
  DeviceList();  // never throws: an empty list records why it is empty
  ~DeviceList();
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;
  int size() const { return count_; }
  ibv_device* operator[](int i) const { return devices_[i]; }
  std::vector<std::string> names() const;
  int error() const { return error_; }  // errno when ibv_get_device_list returned NULL

 private:
  ibv_device** devices_ = nullptr;
  int count_ = 0;
  int error_ = 0;
};

using Context = VerbsHandle<ibv_context, ibv_close_device>;
using ProtectionDomain = VerbsHandle<ibv_pd, ibv_dealloc_pd>;
using CompletionChannel = VerbsHandle<ibv_comp_channel, ibv_destroy_comp_channel>;
using CompletionQueue = VerbsHandle<ibv_cq, ibv_destroy_cq>;
using QueuePair = VerbsHandle<ibv_qp, ibv_destroy_qp>;
using MemoryRegion = VerbsHandle<ibv_mr, ibv_dereg_mr>;

Context open_device(ibv_device* device);
ProtectionDomain allocate_pd(ibv_context* context);
CompletionChannel create_completion_channel(ibv_context* context);  // non-blocking fd
CompletionQueue create_cq(ibv_context* context, int entries, void* cq_context, ibv_comp_channel* channel,
                          const std::string& where);
QueuePair create_rc_qp(ibv_pd* pd, ibv_cq* cq, std::uint32_t send_wr, std::uint32_t recv_wr, const std::string& where);
MemoryRegion register_memory(ibv_pd* pd, void* data, std::size_t bytes, int access, const std::string& where);

const char* port_state_name(ibv_port_state state);

}  // namespace tnt::transport::ib
