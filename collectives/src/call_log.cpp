#include "call_log.h"

#include <algorithm>

namespace tnt::detail {

std::string CallSignature::describe() const {
  std::string text = std::string(kind) + "(";
  if (op) text += std::string(name_of(*op)) + ", ";
  if (type) text += std::string(name_of(*type)) + ", ";
  if (root >= 0) text += "root " + std::to_string(root) + ", ";
  return text + std::to_string(bytes) + (kind == "allgather" ? " bytes per rank)" : " bytes)");
}

std::uint64_t CallSignature::hash(bool with_size) const {
  std::uint64_t h = 14695981039346656037ull;
  auto mix = [&](std::uint64_t value) {
    for (int i = 0; i < 8; ++i, value >>= 8) h = (h ^ (value & 0xff)) * 1099511628211ull;
  };
  for (char c : kind) mix(static_cast<unsigned char>(c));
  mix(type ? static_cast<std::uint64_t>(*type) + 1 : 0);
  mix(op ? static_cast<std::uint64_t>(*op) + 1 : 0);
  mix(static_cast<std::uint64_t>(root + 1));
  if (with_size) mix(bytes);
  return h;
}

std::uint64_t CallLog::issue(const CallSignature& call) {
  std::uint64_t sequence = 0;
  {
    std::lock_guard lock(mutex_);
    sequence = next_sequence_++;
    last_issued_ = Record{sequence, call.hash(true), call};
    pending_.push_back(*last_issued_);
  }
  if (changed_) changed_();
  return sequence;
}

void CallLog::completed(std::uint64_t sequence) {
  {
    std::lock_guard lock(mutex_);
    const auto call = std::find_if(pending_.begin(), pending_.end(),
                                   [&](const Record& pending) { return pending.sequence == sequence; });
    if (call == pending_.end()) return;
    if (!last_completed_ || sequence > last_completed_->sequence) last_completed_ = *call;
    pending_.erase(call);
  }
  if (changed_) changed_();
}

transport::CollectiveProgress CallLog::progress() const {
  std::lock_guard lock(mutex_);
  transport::CollectiveProgress now;
  now.issued = last_issued_ ? last_issued_->sequence + 1 : 0;
  if (!pending_.empty()) now.oldest_pending = pending_.front().described();
  if (last_issued_) now.last_issued = last_issued_->described();
  if (last_completed_) now.last_completed = last_completed_->described();
  return now;
}

}  // namespace tnt::detail
