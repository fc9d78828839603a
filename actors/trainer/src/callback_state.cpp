#include "callback_state.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "tnt/core/error.h"

namespace tnt::trainer {

// --- CallbackState -------------------------------------------------------------------------------

CallbackState::CallbackState(std::string callback_name, std::vector<compute::CheckpointEntry> entries)
    : name_(std::move(callback_name)), entries_(std::move(entries)) {}

void CallbackState::set(const std::string& key, decltype(compute::CheckpointEntry::value) value) {
  for (auto& e : entries_) {
    if (e.key == key) {
      e.value = std::move(value);
      return;
    }
  }
  entries_.push_back({key, std::move(value)});
}

void CallbackState::set_integer(const std::string& key, std::int64_t value) { set(key, value); }
void CallbackState::set_real(const std::string& key, double value) { set(key, value); }
void CallbackState::set_bytes(const std::string& key, std::vector<std::uint8_t> bytes) { set(key, std::move(bytes)); }

void CallbackState::set_floats(const std::string& key, std::span<const float> values) {
  std::vector<std::uint8_t> bytes(values.size_bytes());
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), values.size_bytes());
  set(key, std::move(bytes));
}

bool CallbackState::contains(const std::string& key) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) { return e.key == key; });
}

const compute::CheckpointEntry& CallbackState::entry(const std::string& key, const char* kind) const {
  for (const auto& e : entries_) {
    if (e.key == key) return e;
  }
  throw DataError(fmt::format("the state of callback '{}' has no {} '{}'", name_, kind, key));
}

namespace {

const char* kind_of(const compute::CheckpointEntry& e) {
  if (std::holds_alternative<std::int64_t>(e.value)) return "an integer";
  if (std::holds_alternative<double>(e.value)) return "a real";
  return "bytes";
}

// A value of another kind: the state was written by another version of the callback.
template <class T>
const T& value_of(const std::string& callback, const compute::CheckpointEntry& e, const char* kind) {
  if (const auto* value = std::get_if<T>(&e.value)) return *value;
  throw DataError(
      fmt::format("the state of callback '{}': '{}' holds {}, expected {}", callback, e.key, kind_of(e), kind));
}

}  // namespace

std::int64_t CallbackState::integer(const std::string& key) const {
  return value_of<std::int64_t>(name_, entry(key, "integer"), "an integer");
}

double CallbackState::real(const std::string& key) const {
  return value_of<double>(name_, entry(key, "real"), "a real");
}

const std::vector<std::uint8_t>& CallbackState::bytes(const std::string& key) const {
  return value_of<std::vector<std::uint8_t>>(name_, entry(key, "bytes"), "bytes");
}

std::vector<float> CallbackState::floats(const std::string& key) const {
  const auto& b = bytes(key);
  if (b.size() % sizeof(float) != 0) {
    throw DataError(
        fmt::format("the state of callback '{}': '{}' holds {} bytes, not a number of floats", name_, key, b.size()));
  }
  std::vector<float> values(b.size() / sizeof(float));
  if (!b.empty()) std::memcpy(values.data(), b.data(), b.size());
  return values;
}

// --- in fit --------------------------------------------------------------------------------------

std::vector<NamedCallback> stateful_callbacks(const std::vector<Callback*>& callbacks) {
  std::vector<NamedCallback> named;
  std::map<std::string, int> seen;
  for (auto* cb : callbacks) {
    const std::string name = cb->state_name();
    if (name.empty()) continue;
    const int n = ++seen[name];
    named.push_back({n == 1 ? name : fmt::format("{}#{}", name, n), cb});
  }
  return named;
}

std::vector<compute::CallbackStateEntries> capture_callback_states(const std::vector<NamedCallback>& callbacks) {
  std::vector<compute::CallbackStateEntries> states;
  for (const auto& [name, cb] : callbacks) {
    CallbackState state(name);
    cb->save_state(state);
    states.push_back({name, state.entries()});
  }
  return states;
}

void restore_callback_states(const std::vector<NamedCallback>& callbacks,
                             const std::vector<compute::CallbackStateEntries>& saved, const std::string& origin,
                             bool warn) {
  for (const auto& [name, cb] : callbacks) {
    // By value: clang before 16 cannot capture a structured binding.
    const auto it =
        std::find_if(saved.begin(), saved.end(), [wanted = name](const auto& s) { return s.name == wanted; });
    if (it == saved.end()) {
      if (warn) {
        spdlog::warn(
            "checkpoint '{}' holds no state of callback '{}': it starts afresh, so the resumed run may decide "
            "otherwise than a run straight through",
            origin, name);
      }
      continue;
    }
    try {
      cb->load_state(CallbackState(name, it->entries));
    } catch (const Error& e) {
      throw DataError(
          fmt::format("checkpoint '{}': callback '{}' cannot take its saved state: {}", origin, name, e.what()));
    }
  }
  for (const auto& s : saved) {
    const bool taken =
        std::any_of(callbacks.begin(), callbacks.end(), [&](const NamedCallback& c) { return c.name == s.name; });
    if (!taken && warn) {
      spdlog::warn("checkpoint '{}' holds the state of callback '{}', which this run does not have: it is dropped",
                   origin, s.name);
    }
  }
}

}  // namespace tnt::trainer
