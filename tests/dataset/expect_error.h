#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "tnt/dataset/error.h"

// Runs `fn`, expects an exception of type E whose message contains every one of `parts`.
template <typename E, typename Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception of the expected type thrown";
  } catch (const E& e) {
    const std::string message = e.what();
    for (const auto& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "message lacks '" << part << "': " << message;
    }
  }
}

// Runs `fn`, expects a DataError whose message contains every one of `parts`.
template <typename Fn>
void expect_data_error(Fn&& fn, std::initializer_list<std::string> parts) {
  expect_error<tnt::data::DataError>(std::forward<Fn>(fn), parts);
}
