#include "tnt/core/slurm.h"

#include <charconv>

#include "tnt/core/error.h"

namespace tnt {
namespace {

[[noreturn]] void refuse(std::string_view what, std::string_view list, const std::string& problem) {
  const bool cut = list.size() > 80;
  throw ConfigError(std::string(what) + " '" + std::string(list.substr(0, 80)) + (cut ? "...'" : "'") + ": " + problem);
}

// Splits at commas outside brackets.
std::vector<std::string_view> top_level_items(std::string_view list, std::string_view what) {
  std::vector<std::string_view> items;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const char c = list[i];
    if (c == '[' && ++depth > 1) refuse(what, list, "nested '['");
    if (c == ']' && --depth < 0) refuse(what, list, "unbalanced ']'");
    if (c == ',' && depth == 0) {
      items.push_back(list.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) refuse(what, list, "unbalanced '['");
  items.push_back(list.substr(start));
  return items;
}

bool parse_number(std::string_view text, long& value) {
  if (text.empty() || text.size() > 9) return false;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  return result.ec == std::errc{} && result.ptr == text.data() + text.size() && value >= 0;
}

// The numbers of one bracket group ("01-03,7"), zero-padded to the width written.
std::vector<std::string> expand_group(std::string_view group, std::string_view what, std::string_view list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= group.size()) {
    const std::size_t comma = std::min(group.find(',', start), group.size());
    const std::string_view range = group.substr(start, comma - start);
    const std::size_t dash = range.find('-');
    const std::string_view lo_text = range.substr(0, dash);
    const std::string_view hi_text = dash == std::string_view::npos ? lo_text : range.substr(dash + 1);
    long lo = 0;
    long hi = 0;
    if (!parse_number(lo_text, lo) || !parse_number(hi_text, hi) || hi < lo) {
      refuse(what, list, "bad range '" + std::string(range) + "' (ranges are N or LO-HI, LO <= HI)");
    }
    if (out.size() + static_cast<std::size_t>(hi - lo) + 1 > kMaxSlurmNodes) {
      refuse(what, list, "names more than " + std::to_string(kMaxSlurmNodes) + " nodes");
    }
    for (long v = lo; v <= hi; ++v) {
      std::string number = std::to_string(v);
      if (number.size() < lo_text.size()) number.insert(0, lo_text.size() - number.size(), '0');
      out.push_back(std::move(number));
    }
    start = comma + 1;
  }
  return out;
}

// One item with any number of bracket groups: every combination, the first group varying slowest.
void expand_item(std::string_view item, std::string_view what, std::string_view list, std::vector<std::string>& out) {
  std::vector<std::string> names{""};
  while (!item.empty()) {
    const std::size_t open = item.find('[');
    const std::string_view text = item.substr(0, open);
    for (auto& name : names) name += text;
    if (open == std::string_view::npos) break;
    const std::size_t close = item.find(']', open);  // balanced: checked by top_level_items
    const auto numbers = expand_group(item.substr(open + 1, close - open - 1), what, list);
    if (out.size() + names.size() * numbers.size() > kMaxSlurmNodes) {
      refuse(what, list, "names more than " + std::to_string(kMaxSlurmNodes) + " nodes");
    }
    std::vector<std::string> next;
    next.reserve(names.size() * numbers.size());
    for (const auto& name : names) {
      for (const auto& number : numbers) next.push_back(name + number);
    }
    names = std::move(next);
    item = item.substr(close + 1);
  }
  for (auto& name : names) out.push_back(std::move(name));
}

}  // namespace

std::vector<std::string> expand_slurm_nodelist(std::string_view list, std::string_view what) {
  std::vector<std::string> out;
  for (const auto item : top_level_items(list, what)) {
    if (item.empty()) continue;
    expand_item(item, what, list, out);
  }
  if (out.empty()) refuse(what, list, "names no node");
  for (const auto& name : out) {
    if (name.empty() || name.find_first_of(" \t\n\r") != std::string::npos) {
      refuse(what, list, "a node name is empty or has white space");
    }
  }
  return out;
}

std::vector<int> expand_slurm_tasks_per_node(std::string_view text, std::string_view what) {
  std::vector<int> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    std::string_view item = text.substr(start, comma - start);
    long repeat = 1;
    if (const std::size_t paren = item.find("(x"); paren != std::string_view::npos) {
      if (item.back() != ')' || !parse_number(item.substr(paren + 2, item.size() - paren - 3), repeat) || repeat < 1) {
        refuse(what, text, "bad item '" + std::string(item) + "' (expected N or N(xM))");
      }
      item = item.substr(0, paren);
    }
    long tasks = 0;
    if (!parse_number(item, tasks) || tasks < 1 || tasks > (1 << 20)) {
      refuse(what, text, "bad task count '" + std::string(item) + "' (expected N or N(xM), N >= 1)");
    }
    if (out.size() + static_cast<std::size_t>(repeat) > kMaxSlurmNodes) {
      refuse(what, text, "counts more than " + std::to_string(kMaxSlurmNodes) + " nodes");
    }
    out.insert(out.end(), static_cast<std::size_t>(repeat), static_cast<int>(tasks));
    start = comma + 1;
  }
  return out;
}

}  // namespace tnt
