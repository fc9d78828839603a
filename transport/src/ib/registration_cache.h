#pragma once
// Registered memory for user buffers. Registering memory pins its pages and costs tens of
// microseconds per call; with the cache on, the rendezvous path keeps registrations of buffers
// it has seen (a training loop hands the same gradient buckets to every allreduce) and reuses one
// when a later buffer lies inside it.
//
// Note [Stale registrations]: a registration pins the physical pages that backed the range when
// it was made. If the program frees such a buffer, the allocator returns the range to the kernel
// (glibc munmaps large blocks) and a later allocation gets new pages mapped at the same address,
// a cached registration still points at the old pages: the peer's RDMA write lands there and the
// buffer silently keeps stale data. Nothing tells a user-space library about the munmap (only
// on-demand paging, which not every HCA has, follows the mapping). So the cache is off by
// default (TNT_IB_REG_CACHE_MB=0): every rendezvous registers its buffer and deregisters it when
// the message completes. Turn it on only for programs whose communication buffers stay mapped
// for the life of the job. Registrations that are in use (a message in flight) are never evicted.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "protocol.h"

namespace tnt::transport::ib {

class RegistrationCache final : public MemoryRegistry {
 public:
  struct Region {
    std::uint32_t lkey = 0;
    std::uint32_t rkey = 0;
    std::shared_ptr<void> owner;  // deregisters when the last copy goes
  };
  // Registers [start, start + bytes) (page aligned); throws tnt::Error on failure.
  using Registrar = std::function<Region(void* start, std::size_t bytes)>;

  // Keeps up to `max_cached_bytes` of registrations that are not in use; 0 turns caching off.
  RegistrationCache(Registrar registrar, std::size_t max_cached_bytes, std::size_t max_entries = 256);
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  Handle acquire(const void* data, std::size_t bytes) override;
  void release(std::uint64_t id) override;

  std::size_t entries() const { return entries_.size(); }
  std::size_t in_use() const;  // registrations held by messages in flight
  std::uint64_t hits() const { return hits_; }
  std::uint64_t misses() const { return misses_; }

 private:
  struct Entry {
    std::uintptr_t begin;
    std::uintptr_t end;
    Region region;
    std::uint64_t id;
    int uses;
    std::uint64_t last_used;
  };
  void evict(std::size_t incoming_bytes);

  Registrar registrar_;
  std::size_t max_cached_bytes_;
  std::size_t max_entries_;
  std::size_t page_;
  std::vector<Entry> entries_;
  std::uint64_t next_id_ = 1;
  std::uint64_t clock_ = 0;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
};

}  // namespace tnt::transport::ib
