#include "topology.h"

#include <algorithm>
#include <numeric>

namespace tnt::detail {

Topology Topology::build(const std::vector<int>& host_of, int rank) {
  Topology t;
  const int size = static_cast<int>(host_of.size());
  t.hosts = *std::max_element(host_of.begin(), host_of.end()) + 1;
  t.host = host_of[static_cast<std::size_t>(rank)];
  t.order.resize(static_cast<std::size_t>(size));
  std::iota(t.order.begin(), t.order.end(), 0);
  std::stable_sort(t.order.begin(), t.order.end(), [&](int a, int b) { return host_of[a] < host_of[b]; });
  t.position.resize(t.order.size());
  for (int p = 0; p < size; ++p) t.position[static_cast<std::size_t>(t.order[p])] = p;
  std::vector<std::vector<int>> members(static_cast<std::size_t>(t.hosts));
  for (int r : t.order) members[static_cast<std::size_t>(host_of[r])].push_back(r);
  t.local = members[static_cast<std::size_t>(t.host)];
  t.local_index = static_cast<int>(std::find(t.local.begin(), t.local.end(), rank) - t.local.begin());
  const bool uniform =
      std::all_of(members.begin(), members.end(), [&](const auto& m) { return m.size() == t.local.size(); });
  if (uniform) {
    for (const auto& m : members) t.cross.push_back(m[static_cast<std::size_t>(t.local_index)]);
  }
  return t;
}

}  // namespace tnt::detail
