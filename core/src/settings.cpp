#include "tnt/core/settings.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "tnt/core/error.h"

namespace tnt::settings {
namespace {

// The variable's value, or nullopt when it is unset or empty (both mean "the default").
std::optional<std::string> value_of(std::string_view name) {
  const char* text = std::getenv(std::string(name).c_str());
  if (text == nullptr || *text == '\0') return std::nullopt;
  return std::string(text);
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

[[noreturn]] void refuse(std::string_view name, std::string_view text, std::string_view expected) {
  throw ConfigError(fmt::format("{}='{}' is not {}", name, text, expected));
}

std::int64_t parse_integer(std::string_view name, std::string_view text, std::int64_t min, std::int64_t max,
                           std::string_view unit) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < min || value > max) {
    refuse(name, text, fmt::format("{} in [{}, {}]", unit, min, max));
  }
  return value;
}

}  // namespace

bool parse_flag(std::string_view what, std::string_view text) {
  const std::string word = lower(text);
  if (word == "1" || word == "true" || word == "yes" || word == "on") return true;
  if (word == "0" || word == "false" || word == "no" || word == "off") return false;
  refuse(what, text, "true or false (1/0, true/false, yes/no, on/off)");
}

bool is_set(std::string_view name) { return value_of(name).has_value(); }

std::int64_t Integer::read() const { return read(min, max); }

std::int64_t Integer::read(std::int64_t narrower_min, std::int64_t narrower_max) const {
  const auto text = value_of(name);
  return text ? parse_integer(name, *text, std::max(min, narrower_min), std::min(max, narrower_max), "an integer")
              : fallback;
}

std::size_t Kib::read() const {
  const auto text = value_of(name);
  const std::int64_t kib = text ? parse_integer(name, *text, min_kib, max_kib, "a size in KiB") : fallback_kib;
  return static_cast<std::size_t>(kib) * 1024;
}

std::chrono::milliseconds Seconds::read() const {
  const auto text = value_of(name);
  double seconds = fallback_s;
  if (text) {
    char* end = nullptr;
    seconds = std::strtod(text->c_str(), &end);
    if (end == text->c_str() || *end != '\0' || !std::isfinite(seconds) || !(seconds > 0) || seconds > max_s) {
      refuse(name, *text, fmt::format("a number of seconds in (0, {}]", max_s));
    }
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(seconds * 1000)));
}

std::chrono::microseconds Microseconds::read() const {
  const auto text = value_of(name);
  return std::chrono::microseconds(text ? parse_integer(name, *text, min_us, max_us, "a number of microseconds")
                                        : fallback_us);
}

bool Flag::read() const {
  const auto text = value_of(name);
  return text ? parse_flag(name, *text) : fallback;
}

std::string Choice::read() const {
  const auto text = value_of(name);
  if (!text) return std::string(fallback);
  const std::string wanted = lower(*text);
  for (std::size_t begin = 0; begin <= choices.size();) {
    const std::size_t end = std::min(choices.find('|', begin), choices.size());
    const std::string_view word = choices.substr(begin, end - begin);
    if (lower(word) == wanted) return std::string(word);
    begin = end + 1;
  }
  refuse(name, *text, fmt::format("one of {}", choices));
}

std::string Text::read() const {
  if (empty_is_a_value) {
    if (const char* text = std::getenv(std::string(name).c_str())) return text;
  }
  return value_of(name).value_or(std::string(fallback));
}

}  // namespace tnt::settings
