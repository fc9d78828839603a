// Every module's failures are tnt::Errors, so a caller catches one type; the command-line tools
// turn each kind into its exit status.
#include <gtest/gtest.h>

#include <string>

#include "tnt/core/error.h"

#if TNT_TEST_MODULE_ERRORS
#include "tnt/compute/model.h"
#include "tnt/compute/zoo.h"
#include "tnt/dataset/source.h"
#include "tnt/launcher/options.h"
#include "tnt/trainer/trainer.h"
#endif

namespace tnt {
namespace {

// The message of the tnt::Error that `fail` throws; fails the test if it throws anything else.
template <class Fail>
std::string caught(Fail fail) {
  try {
    fail();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a tnt::Error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "nothing was thrown";
  return "";
}

TEST(Errors, EachKindHasItsExitStatus) {
  EXPECT_EQ(exit_status_of(ConfigError("bad option")), 2);
  EXPECT_EQ(exit_status_of(JobError("rank 1 lost")), 1);
  EXPECT_EQ(exit_status_of(DataError("truncated")), 1);
  EXPECT_EQ(exit_status_of(std::runtime_error("not ours")), 1);
}

#if TNT_TEST_MODULE_ERRORS
TEST(Errors, QuotedTextIsCut) {
  EXPECT_EQ(quote_cut("short"), "short");
  EXPECT_EQ(quote_cut(std::string(kQuoteLimit, 'x')), std::string(kQuoteLimit, 'x'));
  EXPECT_EQ(quote_cut(std::string(10'000'000, 'x')), std::string(kQuoteLimit, 'x') + "... (10000000 characters)");
  // Not inside a UTF-8 character: "é" is two bytes, the cut falls between them.
  EXPECT_EQ(quote_cut("ab\xC3\xA9"
                      "cd",
                      3),
            "ab... (6 characters)");
}

TEST(Errors, ComputeFailsWithATntError) {
  const std::string message = caught([] {
    compute::Model(compute::ModelSpec{"x", {4}, {compute::LayerSpec{"nonsense", {}, {}}}});
  });
  EXPECT_NE(message.find("nonsense"), std::string::npos) << message;
}

TEST(Errors, DatasetFailsWithATntError) {
  const std::string message =
      caught([] { data::make_idx_source("/nonexistent/images-idx3-ubyte", "/nonexistent/labels-idx1-ubyte"); });
  EXPECT_NE(message.find("/nonexistent/images-idx3-ubyte"), std::string::npos) << message;
}

TEST(Errors, TheTrainerFailsWithATntError) {
  trainer::Session session;
  trainer::Trainer model(session, compute::zoo::mlp({4}, {3}, 2));
  const std::string message = caught([&] { model.fit(std::shared_ptr<const data::Source>(), {}); });
  EXPECT_NE(message.find("compile() first"), std::string::npos) << message;
}

TEST(Errors, TheLauncherFailsWithATntError) {
  const std::string message = caught([] { launcher::parse_command_line({"tnt-launch", "-n", "0", "--", "true"}); });
  EXPECT_NE(message.find("-n 0"), std::string::npos) << message;
}
#endif

}  // namespace
}  // namespace tnt
