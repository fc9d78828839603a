#include "tnt/core/error.h"

namespace tnt {

int exit_status_of(const std::exception& error) noexcept {
  if (const auto* ours = dynamic_cast<const Error*>(&error)) return static_cast<int>(ours->exit_status());
  return static_cast<int>(ExitStatus::failure);
}

std::string quote_cut(std::string_view text, std::size_t limit) {
  if (text.size() <= limit) return std::string(text);
  std::size_t cut = limit;  // not inside a UTF-8 character
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "... (" + std::to_string(text.size()) + " characters)";
}

}  // namespace tnt
