#include "tnt/core/error.h"

namespace tnt {

int exit_status_of(const std::exception& error) noexcept {
  if (const auto* ours = dynamic_cast<const Error*>(&error)) return static_cast<int>(ours->exit_status());
  return static_cast<int>(ExitStatus::failure);
}

}  // namespace tnt
