// NumPy .npy arrays (Note [NPY format]): features {N, ...} of float32 or uint8 and labels {N} of
// an integer type, uint8 or float32 holding whole numbers, both little-endian and in C order.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "file_io.h"
#include "sources.h"
#include "tnt/dataset/error.h"

namespace tnt::data::detail {
namespace {

// Note [NPY format]
// ~~~~~~~~~~~~~~~~~
// An .npy file is the magic "\x93NUMPY", a major and a minor version byte, the header's length
// (2 bytes little-endian in version 1, 4 bytes in versions 2 and 3), then the header: an ASCII
// (version 3: UTF-8) Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 1, 28, 28), }
// padded with spaces and a newline, and then the array's bytes. We parse exactly that literal:
// three keys with a string, a bool and a tuple of integers; anything else (object arrays,
// structured dtypes, big-endian data, Fortran order) is refused with a message that says what
// to change on the NumPy side.

enum class DType { float32, uint8, int8, int32, int64, uint32, int16, uint16 };

struct NpyArray {
  std::vector<std::uint8_t> bytes;
  std::size_t data_offset = 0;
  DType dtype = DType::float32;
  std::vector<std::size_t> shape;
  std::size_t item_size = 4;
};

std::size_t item_size_of(DType t) {
  switch (t) {
    case DType::uint8:
    case DType::int8: return 1;
    case DType::int16:
    case DType::uint16: return 2;
    case DType::float32:
    case DType::int32:
    case DType::uint32: return 4;
    case DType::int64: return 8;
  }
  return 1;
}

// The header's dict literal, read left to right.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  void parse(NpyArray& array) {
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        array.dtype = dtype(string_literal());
        have_descr = true;
      } else if (key == "fortran_order") {
        if (word() != "False") {
          fail("the array is in Fortran order; save it in C order (np.ascontiguousarray)");
        }
        have_order = true;
      } else if (key == "shape") {
        array.shape = tuple();
        have_shape = true;
      } else {
        fail(fmt::format("unexpected key '{}'", key));
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') fail("expected ',' or '}'");
    }
    if (!have_descr || !have_order || !have_shape) fail("'descr', 'fortran_order' and 'shape' are required");
    array.item_size = item_size_of(array.dtype);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw DataError(fmt::format("{}: bad .npy header: {} (at byte {} of the header)", name_, what, pos_));
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(fmt::format("expected '{}'", c));
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    const auto end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return s;
  }
  std::string_view word() {
    skip_space();
    const auto begin = pos_;
    while (pos_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    return text_.substr(begin, pos_ - begin);
  }
  std::vector<std::size_t> tuple() {
    expect('(');
    std::vector<std::size_t> dims;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      std::size_t value = 0;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("expected a dimension");
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        const auto digit = static_cast<std::size_t>(peek() - '0');
        if (value > (std::numeric_limits<std::size_t>::max() - digit) / 10) fail("dimension too large");
        value = value * 10 + digit;
        ++pos_;
      }
      dims.push_back(value);
      if (dims.size() > 8) fail("more than 8 dimensions");
      skip_space();
      if (peek() == ',') ++pos_;
    }
    ++pos_;
    return dims;
  }
  DType dtype(const std::string& d) {
    // '|' means byte order does not apply; '=' is native, little-endian on every machine tnt runs on.
    if (d.size() >= 2 && (d[0] == '<' || d[0] == '|' || d[0] == '=')) {
      const std::string t = d.substr(1);
      if (t == "f4") return DType::float32;
      if (t == "u1") return DType::uint8;
      if (t == "i1") return DType::int8;
      if (t == "i2") return DType::int16;
      if (t == "u2") return DType::uint16;
      if (t == "i4") return DType::int32;
      if (t == "u4") return DType::uint32;
      if (t == "i8") return DType::int64;
    }
    if (!d.empty() && d[0] == '>') fail(fmt::format("big-endian dtype '{}'; save it little-endian", d));
    fail(fmt::format("unsupported dtype '{}' (features: float32 or uint8; labels: an integer type, uint8 or float32)",
                     d));
  }

  std::string_view text_;
  const std::string& name_;
  std::size_t pos_ = 0;
};

NpyArray parse_npy(std::vector<std::uint8_t> bytes, const std::string& name) {
  NpyArray a;
  a.bytes = std::move(bytes);
  const auto& b = a.bytes;
  static constexpr std::uint8_t kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (b.size() < 10)
    throw DataError(fmt::format("{}: truncated: {} bytes, too short for an .npy header", name, b.size()));
  if (std::memcmp(b.data(), kMagic, sizeof kMagic) != 0) {
    throw DataError(fmt::format("{}: not an .npy file (the magic \\x93NUMPY is missing)", name));
  }
  const int major = b[6];
  std::size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = std::size_t{b[8]} | (std::size_t{b[9]} << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) throw DataError(fmt::format("{}: truncated .npy header", name));
    header_len = std::size_t{b[8]} | (std::size_t{b[9]} << 8) | (std::size_t{b[10]} << 16) | (std::size_t{b[11]} << 24);
    header_start = 12;
  } else {
    throw DataError(fmt::format("{}: unsupported .npy format version {}.{}", name, major, int{b[7]}));
  }
  if (b.size() - header_start < header_len) {
    throw DataError(fmt::format("{}: truncated: the .npy header says {} bytes, the file holds {}", name, header_len,
                                b.size() - header_start));
  }
  const std::string_view header(reinterpret_cast<const char*>(b.data() + header_start), header_len);
  HeaderParser(header, name).parse(a);
  a.data_offset = header_start + header_len;
  std::size_t expected = a.item_size;
  for (auto d : a.shape) {
    if (d != 0 && expected > std::numeric_limits<std::size_t>::max() / d) {
      throw DataError(fmt::format("{}: .npy shape ({}) overflows", name, fmt::join(a.shape, ", ")));
    }
    expected *= d;
  }
  const std::size_t present = b.size() - a.data_offset;
  if (present < expected) {
    throw DataError(fmt::format("{}: truncated: shape ({}) needs {} bytes of data, the file holds {}", name,
                                fmt::join(a.shape, ", "), expected, present));
  }
  if (present > expected) {
    throw DataError(fmt::format("{}: {} unexpected bytes after the {} bytes of data of shape ({})", name,
                                present - expected, expected, fmt::join(a.shape, ", ")));
  }
  return a;
}

// The sample shape of features {N, ...}: {N, C, H, W}, {N, H, W} (one channel) or {N, F}
// (F features as F×1×1). Checked against `expected` when it is given.
SampleShape sample_shape(const NpyArray& f, const std::string& name, std::optional<SampleShape> expected) {
  const auto& s = f.shape;
  SampleShape shape;
  if (s.size() == 4) {
    shape = {s[1], s[2], s[3]};
  } else if (s.size() == 3) {
    shape = {1, s[1], s[2]};
  } else if (s.size() == 2) {
    shape = {s[1], 1, 1};
  } else {
    throw DataError(fmt::format("{}: features of shape ({}): expected (N, C, H, W), (N, H, W) or (N, features)", name,
                                fmt::join(s, ", ")));
  }
  if (shape.elements() == 0) throw DataError(fmt::format("{}: samples of zero size ({})", name, fmt::join(s, ", ")));
  if (expected && shape != *expected) {
    // (N, F) with F = C·H·W of the model is a flattened sample in C order: take it as it is.
    if (s.size() == 2 && shape.elements() == expected->elements()) return *expected;
    throw DataError(fmt::format("{}: features of shape ({}) do not fit the model's input {}x{}x{} (C, H, W){}", name,
                                fmt::join(s, ", "), expected->channels, expected->height, expected->width,
                                s.size() == 4 && s[3] == expected->channels
                                    ? "; the array looks channels-last: transpose it to (N, C, H, W)"
                                    : ""));
  }
  return shape;
}

template <class T>
T load_le(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // little-endian host (checked by the dtype parser's contract)
  return v;
}

// Every label as an int32 in [0, num_classes).
std::vector<std::int32_t> decode_labels(const NpyArray& l, const std::string& name, int num_classes) {
  const std::size_t n = l.shape.empty() ? 0 : l.shape[0];
  if (l.shape.empty() || l.shape.size() > 2 || (l.shape.size() == 2 && l.shape[1] != 1)) {
    throw DataError(
        fmt::format("{}: labels of shape ({}): expected (N) or (N, 1) class indices", name, fmt::join(l.shape, ", ")));
  }
  std::vector<std::int32_t> labels(n);
  const std::uint8_t* p = l.bytes.data() + l.data_offset;
  for (std::size_t i = 0; i < n; ++i, p += l.item_size) {
    double v = 0;
    switch (l.dtype) {
      case DType::float32: v = load_le<float>(p); break;
      case DType::uint8: v = *p; break;
      case DType::int8: v = static_cast<std::int8_t>(*p); break;
      case DType::int16: v = load_le<std::int16_t>(p); break;
      case DType::uint16: v = load_le<std::uint16_t>(p); break;
      case DType::int32: v = load_le<std::int32_t>(p); break;
      case DType::uint32: v = load_le<std::uint32_t>(p); break;
      case DType::int64: v = static_cast<double>(load_le<std::int64_t>(p)); break;
    }
    const double limit = num_classes > 0 ? num_classes : std::numeric_limits<std::int32_t>::max();
    if (!(v >= 0 && v < limit) || v != std::floor(v)) {
      throw DataError(fmt::format("{}: label {} of sample {} is not a class index in [0, {})", name, v, i, limit));
    }
    labels[i] = static_cast<std::int32_t>(v);
  }
  return labels;
}

class NpySource final : public Source {
 public:
  NpySource(NpyArray features, std::string features_path, std::vector<std::int32_t> labels, std::string labels_path,
            SampleShape shape, int num_classes)
      : features_(std::move(features)),
        labels_(std::move(labels)),
        features_path_(std::move(features_path)),
        labels_path_(std::move(labels_path)),
        shape_(shape),
        num_classes_(num_classes) {}

  std::size_t size() const override { return labels_.size(); }
  SampleShape shape() const override { return shape_; }
  int num_classes() const override { return num_classes_; }

  std::int32_t read(std::size_t index, std::span<float> out) const override {
    check_read(*this, index, out);
    const std::size_t n = shape_.elements();
    const std::uint8_t* p = features_.bytes.data() + features_.data_offset + index * n * features_.item_size;
    if (features_.dtype == DType::uint8) {
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(p[i]) * (1.0f / 255.0f);
    } else {
      std::memcpy(out.data(), p, n * sizeof(float));
    }
    return labels_[index];
  }

  std::string describe() const override {
    return fmt::format("npy {} + {}: {} samples of {}x{}x{} ({}), {} classes", features_path_, labels_path_, size(),
                       shape_.channels, shape_.height, shape_.width,
                       features_.dtype == DType::uint8 ? "uint8 scaled to [0, 1]" : "float32", num_classes_);
  }

 private:
  NpyArray features_;
  std::vector<std::int32_t> labels_;
  std::string features_path_, labels_path_;
  SampleShape shape_;
  int num_classes_;
};

}  // namespace

std::shared_ptr<const Source> npy_source_from_bytes(std::vector<std::uint8_t> features,
                                                    const std::string& features_path, std::vector<std::uint8_t> labels,
                                                    const std::string& labels_path, int num_classes,
                                                    std::optional<SampleShape> expected) {
  if (num_classes < 0) {
    throw DataError(fmt::format("npy source {}: number of classes {} is negative", features_path, num_classes));
  }
  NpyArray f = parse_npy(std::move(features), features_path);
  if (f.dtype != DType::float32 && f.dtype != DType::uint8) {
    throw DataError(fmt::format("{}: features must be float32 or uint8 (np.float32 / np.uint8)", features_path));
  }
  const SampleShape shape = sample_shape(f, features_path, expected);
  const NpyArray l = parse_npy(std::move(labels), labels_path);
  auto decoded = decode_labels(l, labels_path, num_classes);
  if (decoded.size() != f.shape[0]) {
    throw DataError(fmt::format("sample counts differ: {} holds {} samples, {} holds {} labels", features_path,
                                f.shape[0], labels_path, decoded.size()));
  }
  if (num_classes == 0) {  // not given: the largest label + 1
    num_classes = decoded.empty() ? 1 : *std::max_element(decoded.begin(), decoded.end()) + 1;
  }
  return std::make_shared<NpySource>(std::move(f), features_path, std::move(decoded), labels_path, shape, num_classes);
}

}  // namespace tnt::data::detail

namespace tnt::data {

std::shared_ptr<const Source> make_npy_source(const std::filesystem::path& features,
                                              const std::filesystem::path& labels, int num_classes,
                                              std::optional<SampleShape> expected) {
  auto feature_bytes = detail::read_file_bytes(features);
  return detail::npy_source_from_bytes(std::move(feature_bytes), features.string(), detail::read_file_bytes(labels),
                                       labels.string(), num_classes, expected);
}

}  // namespace tnt::data
