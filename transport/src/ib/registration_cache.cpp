#include "registration_cache.h"

#include <unistd.h>

#include <algorithm>

#include "tnt/core/error.h"

namespace tnt::transport::ib {

RegistrationCache::RegistrationCache(Registrar registrar, std::size_t max_cached_bytes, std::size_t max_entries)
    : registrar_(std::move(registrar)),
      max_cached_bytes_(max_cached_bytes),
      max_entries_(std::max<std::size_t>(1, max_entries)),
      page_(static_cast<std::size_t>(::sysconf(_SC_PAGESIZE))) {}

RegistrationCache::~RegistrationCache() = default;

MemoryRegistry::Handle RegistrationCache::acquire(const void* data, std::size_t bytes) {
  const auto address = reinterpret_cast<std::uintptr_t>(data);
  // Whole pages: the HCA pins pages anyway, and neighbouring buffers then share a registration.
  const std::uintptr_t begin = address / page_ * page_;
  const std::uintptr_t end = (address + std::max<std::size_t>(bytes, 1) + page_ - 1) / page_ * page_;
  ++clock_;
  if (max_cached_bytes_ > 0) {
    for (Entry& entry : entries_) {
      if (entry.begin <= begin && end <= entry.end) {
        ++entry.uses;
        entry.last_used = clock_;
        ++hits_;
        return Handle{entry.region.lkey, entry.region.rkey, entry.id};
      }
    }
    evict(end - begin);
  }
  ++misses_;
  Region region = registrar_(reinterpret_cast<void*>(begin), end - begin);
  entries_.push_back(Entry{begin, end, std::move(region), next_id_++, 1, clock_});
  const Entry& added = entries_.back();
  return Handle{added.region.lkey, added.region.rkey, added.id};
}

std::size_t RegistrationCache::in_use() const {
  return static_cast<std::size_t>(
      std::count_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.uses > 0; }));
}

void RegistrationCache::release(std::uint64_t id) {
  auto entry = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.id == id; });
  if (entry == entries_.end() || entry->uses <= 0) {
    throw Error("internal error: release of unknown memory registration " + std::to_string(id));
  }
  if (--entry->uses > 0) return;
  if (max_cached_bytes_ == 0) {
    entries_.erase(entry);  // deregisters
    return;
  }
  evict(0);  // entries that were in use may have kept the cache above its bounds
}

void RegistrationCache::evict(std::size_t incoming_bytes) {
  auto cached_bytes = [&] {
    std::size_t total = 0;
    for (const Entry& e : entries_) total += e.end - e.begin;
    return total;
  };
  while (true) {
    const bool over = cached_bytes() + incoming_bytes > max_cached_bytes_ ||
                      entries_.size() + (incoming_bytes ? 1 : 0) > max_entries_;
    if (!over) return;
    // The least recently used registration that no message is using.
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->uses == 0 && (victim == entries_.end() || it->last_used < victim->last_used)) victim = it;
    }
    if (victim == entries_.end()) return;  // everything is in use: go above the bound for now
    entries_.erase(victim);
  }
}

}  // namespace tnt::transport::ib
