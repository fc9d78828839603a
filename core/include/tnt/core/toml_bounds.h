#pragma once
// A bound on TOML text that toml++ itself does not keep: how deep dotted keys nest.
#include <cstddef>
#include <string>
#include <string_view>

namespace tnt {

// toml++ builds a table per part of a dotted key ("a.b.c = 1", "[[layers.main.main]]") and
// recurses through them: a key of 400,000 parts (800 kB) overflowed its stack inside toml::parse.
// Inline values are bounded by toml++ (TOML_MAX_NESTED_VALUES, 256); this bounds the dots a line
// may have outside strings and comments, and so the depth of every key. Call it before
// toml::parse on text from outside; throws ConfigError naming `origin` and the line.
inline constexpr std::size_t kMaxTomlDotsPerLine = 256;
void check_toml_key_depth(std::string_view text, const std::string& origin);

}  // namespace tnt
