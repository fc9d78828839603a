#pragma once
// Errors raised by tnt::data. Every message names the file or value at fault and what is wrong.
#include <string>

#include "tnt/core/error.h"

namespace tnt::data {

class DataError : public tnt::DataError {
 public:
  explicit DataError(const std::string& what) : tnt::DataError("tnt::data: " + what) {}
};

}  // namespace tnt::data
