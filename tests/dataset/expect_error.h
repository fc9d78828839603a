#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "tnt/dataset/error.h"

// Runs `fn`, expects a DataError whose message contains every one of `parts`.
template <typename Fn>
void expect_data_error(Fn&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no DataError thrown";
  } catch (const tnt::data::DataError& e) {
    const std::string message = e.what();
    for (const auto& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "message lacks '" << part << "': " << message;
    }
  }
}
