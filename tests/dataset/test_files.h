#pragma once
// Small IDX / CIFAR-10 files written into a per-test temporary directory.
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tnt::data::test {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tnt-dataset-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes, bool gzip = false) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (f == nullptr) throw std::runtime_error("gzopen " + path.string());
    if (!bytes.empty()) gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
    return;
  }
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// IDX bytes: {0, 0, type, ndims} then dims (big endian) then data.
inline std::vector<std::uint8_t> idx_bytes(const std::vector<std::uint32_t>& dims,
                                           const std::vector<std::uint8_t>& data, std::uint8_t type = 0x08) {
  std::vector<std::uint8_t> b{0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (auto d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<std::uint8_t>(d >> shift));
  }
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// n images of h×w with pixel (i, k) = (i * 7 + k) mod 256 and label i mod classes.
struct IdxPair {
  std::filesystem::path images, labels;
};
inline IdxPair write_mnist_like(const std::filesystem::path& dir, const std::string& prefix, std::uint32_t n,
                                std::uint32_t h, std::uint32_t w, bool gzip, int classes = 10) {
  std::vector<std::uint8_t> pixels(std::size_t{n} * h * w), labels(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < std::size_t{h} * w; ++k) {
      pixels[i * h * w + k] = static_cast<std::uint8_t>((i * 7 + k) % 256);
    }
    labels[i] = static_cast<std::uint8_t>(i % static_cast<std::size_t>(classes));
  }
  const std::string suffix = gzip ? ".gz" : "";
  IdxPair p{dir / (prefix + "-images-idx3-ubyte" + suffix), dir / (prefix + "-labels-idx1-ubyte" + suffix)};
  write_bytes(p.images, idx_bytes({n, h, w}, pixels), gzip);
  write_bytes(p.labels, idx_bytes({n}, labels), gzip);
  return p;
}

// CIFAR-10 records: label r mod 10, pixel k of record r = (r + k) mod 256.
inline std::vector<std::uint8_t> cifar_bytes(std::size_t records, std::size_t first = 0) {
  std::vector<std::uint8_t> b;
  for (std::size_t r = first; r < first + records; ++r) {
    b.push_back(static_cast<std::uint8_t>(r % 10));
    for (std::size_t k = 0; k < 3072; ++k) b.push_back(static_cast<std::uint8_t>((r + k) % 256));
  }
  return b;
}

}  // namespace tnt::data::test
