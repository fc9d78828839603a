#pragma once
// Errors raised by tnt::data. Every message names the file or value at fault and what is wrong.
#include <stdexcept>
#include <string>

namespace tnt::data {

class DataError : public std::runtime_error {
 public:
  explicit DataError(const std::string& what) : std::runtime_error("tnt::data: " + what) {}
};

}  // namespace tnt::data
