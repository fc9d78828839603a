// The one text codec of the launcher's records (Note [Records]).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tnt/core/error.h"

namespace tnt::launcher::detail {

// Note [Records]
// ~~~~~~~~~~~~~~
// tnt-launch hands records to processes it does not control the input of: the pre-launch check,
// the host launch and the cleanup request cross ssh to `tnt-launch --agent`, and the job registry
// is a file another tnt-launch reads later. A record is text: one "key value" line per field, then
// a line "end". Keys are [a-z_]; a key may repeat where the reader takes a list (a rank's argv).
// Values are escaped (backslash, newline and carriage return) so that they may hold any byte.
//
// The reader trusts nothing: the whole record, the number of fields and every key are bounded, an
// escape it does not know, an unknown or missing key, a repeated single key, a number out of its
// range and anything after "end" are errors that name the record and the line.

// A malformed record. The message names the record, the line and what is wrong.
class RecordError : public DataError {
 public:
  using DataError::DataError;
};

struct RecordLimits {
  std::size_t max_bytes = 16u << 20;  // a host launch holds argv and environment (ARG_MAX is 2 MiB)
  std::size_t max_fields = 1u << 20;
};

std::string escape_field(std::string_view s);
// Inverse of escape_field; throws RecordError on a dangling or unknown escape.
std::string unescape_field(std::string_view s);

// Parses a whole number in [min, max] written in decimal, nothing else; false if it is not one.
bool parse_integer(std::string_view text, long long min, long long max, long long& out);

class RecordWriter {
 public:
  RecordWriter& add(std::string_view key, std::string_view value);
  RecordWriter& add(std::string_view key, const char* value) { return add(key, std::string_view(value)); }
  RecordWriter& add(std::string_view key, long long value);
  RecordWriter& add(std::string_view key, int value) { return add(key, static_cast<long long>(value)); }
  RecordWriter& add(std::string_view key, bool value) { return add(key, value ? 1LL : 0LL); }
  // The record with its closing "end" line.
  std::string finish() const { return text_ + "end\n"; }

 private:
  std::string text_;
};

class Record {
 public:
  // Parses `text` (which must end with the line "end"); `what` names the record in errors and
  // `keys` are the keys it may hold.
  static Record parse(std::string_view text, std::string what, const std::vector<std::string_view>& keys,
                      const RecordLimits& limits = {});

  // The single value of `key`; a missing or repeated key is an error.
  const std::string& text(std::string_view key) const;
  // Like text(), but "" when the key is absent.
  std::string text_or_empty(std::string_view key) const;
  long long integer(std::string_view key, long long min, long long max) const;
  bool flag(std::string_view key) const { return integer(key, 0, 1) != 0; }
  // Every value of `key`, in order (none is fine).
  std::vector<std::string> all(std::string_view key) const;

  // An error about this record's field `key` (for checks the reader makes itself).
  RecordError error(std::string_view key, const std::string& problem) const;

 private:
  struct Field {
    std::string key;
    std::string value;
    int line = 0;
  };
  const Field* single(std::string_view key, bool required) const;

  std::string what_;
  std::vector<Field> fields_;
};

}  // namespace tnt::launcher::detail
