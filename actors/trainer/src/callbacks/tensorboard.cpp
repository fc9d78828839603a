// TensorBoard: event files as TensorBoard reads them, written here without TensorFlow.
//
// Note [TensorBoard event files]: an event file is a sequence of TFRecords, each
//   uint64 length (little-endian), uint32 masked CRC32C of those 8 bytes,
//   length bytes of data, uint32 masked CRC32C of the data,
// where masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 and CRC32C is the Castagnoli
// CRC (reflected polynomial 0x82f63b78). Each record's data is a serialized tensorflow.Event
// protobuf: wall_time (field 1, double), step (2, int64), and either file_version (3, string:
// "brain.Event:2", the first record) or summary (5, Summary). A Summary holds repeated value
// (1, Value), each with tag (1, string) and simple_value (2, float): a scalar, which
// TensorBoard's scalar dashboard shows. The messages are encoded by hand: five fields do not
// justify a protobuf dependency. TensorBoard finds files whose name holds "tfevents" in each
// run folder (LOG_DIR/train, LOG_DIR/validation), as Keras writes them.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <boost/crc.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "tnt/core/error.h"
#include "tnt/core/settings.h"
#include "tnt/trainer/callbacks.h"

namespace tnt::trainer {

namespace {

uint32_t masked_crc32c(const std::string& bytes) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(bytes.data(), bytes.size());
  const uint32_t c = crc.checksum();
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

template <class T>
void put_little_endian(std::string& out, T v) {
  for (std::size_t i = 0; i < sizeof v; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void put_bytes_field(std::string& out, int field, const std::string& bytes) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | 2);
  put_varint(out, bytes.size());
  out += bytes;
}

std::string event(double wall_time, int64_t step) {
  std::string e;
  e += static_cast<char>(1 << 3 | 1);  // wall_time, fixed64
  put_little_endian(e, std::bit_cast<uint64_t>(wall_time));
  e += static_cast<char>(2 << 3 | 0);  // step, varint
  put_varint(e, static_cast<uint64_t>(step));
  return e;
}

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

// One event file in one run folder (Note [TensorBoard event files]).
class TensorBoard::EventWriter {
 public:
  explicit EventWriter(const std::filesystem::path& folder) {
    std::error_code error;
    std::filesystem::create_directories(folder, error);
    if (error) throw Error(fmt::format("TensorBoard: cannot create {}: {}", folder.string(), error.message()));
    std::array<char, 256> host{};
    if (gethostname(host.data(), host.size() - 1) != 0) std::strcpy(host.data(), "localhost");
    path_ = folder / fmt::format("events.out.tfevents.{}.{}.{}.0.v2", static_cast<int64_t>(wall_time()), host.data(),
                                 ::getpid());
    file_ = std::fopen(path_.c_str(), "wb");
    if (!file_) throw Error(fmt::format("TensorBoard: cannot write {}: {}", path_.string(), std::strerror(errno)));
    std::string first = event(wall_time(), 0);
    put_bytes_field(first, 3, "brain.Event:2");
    record(first);
  }
  ~EventWriter() { std::fclose(file_); }
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  void scalar(const std::string& tag, int64_t step, double value) {
    std::string v;
    put_bytes_field(v, 1, tag);
    v += static_cast<char>(2 << 3 | 5);  // simple_value, fixed32
    put_little_endian(v, std::bit_cast<uint32_t>(static_cast<float>(value)));
    std::string summary;
    put_bytes_field(summary, 1, v);
    std::string e = event(wall_time(), step);
    put_bytes_field(e, 5, summary);
    record(e);
  }
  void flush() { std::fflush(file_); }

 private:
  void record(const std::string& data) {
    std::string header;
    put_little_endian(header, static_cast<uint64_t>(data.size()));
    std::string framed = header;
    put_little_endian(framed, masked_crc32c(header));
    framed += data;
    put_little_endian(framed, masked_crc32c(data));
    if (std::fwrite(framed.data(), 1, framed.size(), file_) != framed.size()) {
      throw Error(fmt::format("TensorBoard: cannot write {}: {}", path_.string(), std::strerror(errno)));
    }
  }
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

TensorBoard::TensorBoard(TensorBoardOptions options) : options_(std::move(options)) {
  if (options_.log_dir.empty()) throw ConfigError("TensorBoard: log_dir is empty");
}

TensorBoard::~TensorBoard() = default;

void TensorBoard::on_train_begin() {
  const RunControl& r = run();
  const bool everyone = settings::kTensorBoardOnAllDevices.read();
  if (r.rank() != 0 && !everyone) return;
  std::filesystem::path root = options_.log_dir;
  if (everyone) root /= fmt::format("rank-{}", r.rank());
  if (!train_) train_ = std::make_unique<EventWriter>(root / "train");
  if (!validation_) validation_ = std::make_unique<EventWriter>(root / "validation");
  samples_at_last_update_ = r.samples_trained();
  last_update_ = std::chrono::steady_clock::now();
}

void TensorBoard::on_epoch_begin(std::size_t) {
  epoch_start_ = std::chrono::steady_clock::now();
  samples_at_epoch_start_ = samples_at_last_batch_ = run().samples_trained();
  train_ns_ = 0;
}

void TensorBoard::on_batch_end(std::size_t, std::size_t, const Logs& logs) {
  const RunControl& r = run();
  const auto now = std::chrono::steady_clock::now();
  train_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(now - epoch_start_).count();
  samples_at_last_batch_ = r.samples_trained();
  const auto step = static_cast<int64_t>(r.optimizer_steps());
  if (!train_ || options_.update_freq == 0 || step % static_cast<int64_t>(options_.update_freq) != 0) return;
  for (const auto& [key, value] : logs) train_->scalar("batch_" + key, step, value);
  train_->scalar("batch_learning_rate", step, r.learning_rate());
  const double seconds = std::chrono::duration<double>(now - last_update_).count();
  if (seconds > 0) {
    train_->scalar(fmt::format("batch_{}_per_second", r.sample_unit()), step,
                   (samples_at_last_batch_ - samples_at_last_update_) / seconds);
  }
  samples_at_last_update_ = samples_at_last_batch_;
  last_update_ = now;
  train_->flush();
}

void TensorBoard::on_epoch_end(std::size_t epoch, const Logs& logs) {
  if (!train_) return;
  const auto step = static_cast<int64_t>(epoch);
  for (const auto& [key, value] : logs) {
    if (key.starts_with("val_")) {
      validation_->scalar("epoch_" + key.substr(4), step, value);
    } else {
      train_->scalar("epoch_" + key, step, value);
    }
  }
  train_->scalar("epoch_learning_rate", step, run().learning_rate());
  const double seconds = static_cast<double>(train_ns_.load()) * 1e-9;
  if (seconds > 0) {
    train_->scalar(fmt::format("epoch_{}_per_second", run().sample_unit()), step,
                   (samples_at_last_batch_ - samples_at_epoch_start_) / seconds);
  }
  train_->flush();
  validation_->flush();
}

void TensorBoard::on_train_end(const Logs&) {
  train_.reset();
  validation_.reset();
}

}  // namespace tnt::trainer
