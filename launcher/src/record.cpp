#include "record.h"

#include <algorithm>
#include <charconv>

namespace tnt::launcher::detail {
namespace {

constexpr std::size_t kMaxKey = 32;

bool valid_key(std::string_view key) {
  return !key.empty() && key.size() <= kMaxKey &&
         std::all_of(key.begin(), key.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; });
}

// A few bytes of a bad line, printable, for messages.
std::string excerpt(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) {
    out += (static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f) ? c : '?';
  }
  return s.size() > 40 ? out + "..." : out;
}

}  // namespace

std::string escape_field(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape_field(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (i + 1 == s.size()) throw RecordError("a value ends in a lone backslash");
    const char n = s[++i];
    if (n == '\\') {
      out += '\\';
    } else if (n == 'n') {
      out += '\n';
    } else if (n == 'r') {
      out += '\r';
    } else {
      throw RecordError(std::string("unknown escape '\\") + excerpt(std::string_view(&n, 1)) + "' in a value");
    }
  }
  return out;
}

bool parse_integer(std::string_view text, long long min, long long max, long long& out) {
  long long v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || ptr != text.data() + text.size() || v < min || v > max) return false;
  out = v;
  return true;
}

RecordWriter& RecordWriter::add(std::string_view key, std::string_view value) {
  text_.append(key);
  text_ += ' ';
  text_ += escape_field(value);
  text_ += '\n';
  return *this;
}

RecordWriter& RecordWriter::add(std::string_view key, long long value) { return add(key, std::to_string(value)); }

Record Record::parse(std::string_view text, std::string what, const std::vector<std::string_view>& keys,
                     const RecordLimits& limits) {
  Record r;
  r.what_ = std::move(what);
  if (text.size() > limits.max_bytes) {
    throw RecordError(r.what_ + ": " + std::to_string(text.size()) + " bytes, more than the " +
                      std::to_string(limits.max_bytes) + " a record may have");
  }
  bool ended = false;
  int line_no = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    if (nl == std::string_view::npos) break;  // an unterminated last line: the record is cut short
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    const std::string where = r.what_ + ": line " + std::to_string(++line_no);
    if (ended) throw RecordError(where + ": '" + excerpt(line) + "' after 'end'");
    if (line == "end") {
      ended = true;
      continue;
    }
    const auto sp = line.find(' ');
    const std::string_view key = line.substr(0, sp);
    if (!valid_key(key) || sp == std::string_view::npos) {
      throw RecordError(where + ": '" + excerpt(line) + "' is not a 'key value' line");
    }
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      throw RecordError(where + ": unknown key '" + std::string(key) + "'");
    }
    if (r.fields_.size() == limits.max_fields) {
      throw RecordError(where + ": more than " + std::to_string(limits.max_fields) + " fields");
    }
    try {
      r.fields_.push_back({std::string(key), unescape_field(line.substr(sp + 1)), line_no});
    } catch (const RecordError& e) {
      throw RecordError(where + ": " + e.what());
    }
  }
  if (!ended || !text.empty()) throw RecordError(r.what_ + ": truncated (no 'end' line)");
  return r;
}

const Record::Field* Record::single(std::string_view key, bool required) const {
  const Field* found = nullptr;
  for (const auto& f : fields_) {
    if (f.key != key) continue;
    if (found) {
      throw RecordError(what_ + ": line " + std::to_string(f.line) + ": '" + std::string(key) + "' given twice");
    }
    found = &f;
  }
  if (!found && required) throw RecordError(what_ + ": no '" + std::string(key) + "' line");
  return found;
}

const std::string& Record::text(std::string_view key) const { return single(key, true)->value; }

std::string Record::text_or_empty(std::string_view key) const {
  const Field* f = single(key, false);
  return f ? f->value : std::string();
}

long long Record::integer(std::string_view key, long long min, long long max) const {
  const Field* f = single(key, true);
  long long v = 0;
  if (!parse_integer(f->value, min, max, v)) {
    throw RecordError(what_ + ": line " + std::to_string(f->line) + ": " + std::string(key) + " '" + excerpt(f->value) +
                      "' is not a whole number from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return v;
}

std::vector<std::string> Record::all(std::string_view key) const {
  std::vector<std::string> out;
  for (const auto& f : fields_) {
    if (f.key == key) out.push_back(f.value);
  }
  return out;
}

RecordError Record::error(std::string_view key, const std::string& problem) const {
  for (const auto& f : fields_) {
    if (f.key == key) return RecordError(what_ + ": line " + std::to_string(f.line) + ": " + problem);
  }
  return RecordError(what_ + ": " + problem);
}

}  // namespace tnt::launcher::detail
