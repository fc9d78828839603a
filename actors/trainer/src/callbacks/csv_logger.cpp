// CSVLogger: the per-epoch figures as CSV (master rank). FitOptions::csv_path and tnt-train's
// [output] csv are shorthands for it.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "../fit_parts.h"
#include "tnt/core/error.h"
#include "tnt/trainer/callbacks.h"

namespace tnt::trainer {

namespace {

// Figures after the logs' own: the rate of the next step, training time and throughput.
// The last is samples_per_second, or target_tokens_per_second with sentence pairs.
constexpr const char* kTimingColumns[] = {"learning_rate", "train_seconds", "per_second"};

// The columns of an existing file's header (appending keeps them), or none.
std::vector<std::string> header_of(const std::string& path, char separator) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line) || line.empty()) return {};
  std::vector<std::string> columns;
  std::stringstream s(line);
  for (std::string field; std::getline(s, field, separator);) columns.push_back(field);
  return columns;
}

}  // namespace

CSVLogger::CSVLogger(CsvLoggerOptions options) : options_(std::move(options)) {
  if (options_.filename.empty()) throw ConfigError("CSVLogger: filename is empty");
}

CSVLogger::~CSVLogger() {
  if (file_) std::fclose(file_);
}

void CSVLogger::on_train_begin() {
  columns_.clear();
  samples_at_start_ = samples_at_last_batch_ = run().samples_trained();
  epoch_start_ = std::chrono::steady_clock::now();
  train_ns_ = 0;
  if (run().rank() != 0 || file_) return;
  const bool append = options_.append && std::filesystem::exists(options_.filename);
  if (append) columns_ = header_of(options_.filename, options_.separator);
  if (append && columns_.empty()) {
    throw DataError(fmt::format("CSVLogger: '{}' has no header line to append under", options_.filename));
  }
  file_ = std::fopen(options_.filename.c_str(), append ? "a" : "w");
  if (!file_) throw Error(fmt::format("cannot open CSV file '{}': {}", options_.filename, std::strerror(errno)));
}

void CSVLogger::on_epoch_begin(std::size_t) {
  epoch_start_ = std::chrono::steady_clock::now();
  samples_at_start_ = samples_at_last_batch_ = run().samples_trained();
  train_ns_ = 0;
}

void CSVLogger::on_batch_end(std::size_t, std::size_t, const Logs&) {
  // The last batch's time is the end of training in the epoch (validation comes after).
  train_ns_ =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - epoch_start_).count();
  samples_at_last_batch_ = run().samples_trained();
}

void CSVLogger::on_epoch_end(std::size_t epoch, const Logs& logs) {
  if (!file_) return;
  const char sep = options_.separator;
  if (columns_.empty()) {
    columns_.push_back("epoch");
    for (const auto& [key, value] : ordered(logs)) columns_.push_back(key);
    for (const std::string c : kTimingColumns) {
      columns_.push_back(c == "per_second" ? std::string(run().sample_unit()) + "_per_second" : c);
    }
    std::string header;
    for (const auto& c : columns_) header += (header.empty() ? "" : std::string(1, sep)) + c;
    fmt::print(file_, "{}\n", header);
  }
  const double seconds = static_cast<double>(train_ns_.load()) * 1e-9;
  const double samples = samples_at_last_batch_.load() - samples_at_start_;
  std::set<std::string> unused;
  for (const auto& [key, value] : logs) unused.insert(key);
  std::string line;
  for (const auto& column : columns_) {
    std::string field;
    if (column == "epoch") {
      field = fmt::format("{}", epoch + 1);
    } else if (column == "learning_rate") {
      field = fmt::format("{:.6g}", run().learning_rate());
    } else if (column == "train_seconds") {
      field = fmt::format("{:.3f}", seconds);
    } else if (column.ends_with("_per_second") && column == columns_.back()) {
      field = fmt::format("{:.1f}", seconds > 0 ? samples / seconds : 0.0);
    } else if (const auto it = logs.find(column); it != logs.end()) {
      field = fmt::format("{:.6f}", it->second);
      unused.erase(column);
    }
    line += (column == columns_.front() ? "" : std::string(1, sep)) + field;
  }
  fmt::print(file_, "{}\n", line);
  std::fflush(file_);
  for (const auto& key : unused) {
    if (std::find(ignored_.begin(), ignored_.end(), key) != ignored_.end()) continue;
    spdlog::warn("CSVLogger: '{}' has no column in {} (its columns come from the first epoch)", key, options_.filename);
    ignored_.push_back(key);
  }
}

void CSVLogger::on_train_end(const Logs&) {
  if (file_) std::fclose(file_);
  file_ = nullptr;
}

}  // namespace tnt::trainer
