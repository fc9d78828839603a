#include "tnt/core/toml_bounds.h"

#include "tnt/core/error.h"

namespace tnt {

void check_toml_key_depth(std::string_view text, const std::string& origin) {
  char quote = 0;  // the quote of the string the scan is in, 0 outside strings
  bool comment = false, escaped = false;
  std::size_t line = 1, dots = 0;
  for (const char c : text) {
    if (c == '\n') {
      ++line;
      dots = 0;
      comment = false;
      continue;
    }
    if (comment) continue;
    if (quote != 0) {
      if (escaped) {
        escaped = false;
      } else if (quote == '"' && c == '\\') {
        escaped = true;
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#') {
      comment = true;
    } else if (c == '.' && ++dots > kMaxTomlDotsPerLine) {
      throw ConfigError(origin + ":" + std::to_string(line) + ": more than " + std::to_string(kMaxTomlDotsPerLine) +
                        " dots outside strings: keys nested that deep are beyond any tnt TOML file");
    }
  }
}

}  // namespace tnt
