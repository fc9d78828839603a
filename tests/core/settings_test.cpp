// The TNT_* settings table: every kind parses what it should, refuses the rest with an error that
// names the variable, and gives its default when the variable is unset or empty.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <string>

#include "tnt/core/error.h"
#include "tnt/core/settings.h"

namespace tnt::settings {
namespace {

// Sets a variable for one test and restores what was there before.
class ScopedEnv {
 public:
  ScopedEnv(std::string_view name, const char* value) : name_(name) {
    if (const char* old = getenv(name_.c_str())) old_ = old;
    if (value) {
      setenv(name_.c_str(), value, 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// The message of the ConfigError that `read` throws, or "" when it throws none.
template <class Read>
std::string refusal(Read read) {
  try {
    read();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

constexpr Flag kTestFlag{"TNT_UNIT_TEST_FLAG", false, "a flag"};
constexpr Integer kTestInteger{"TNT_UNIT_TEST_INTEGER", 7, -3, 100, "an integer"};

TEST(Settings, FlagsAcceptEverySpellingOfTrueAndFalse) {
  for (const char* yes : {"1", "true", "TRUE", "True", "yes", "YES", "on", "On"}) {
    ScopedEnv env(kTestFlag.name, yes);
    EXPECT_TRUE(kTestFlag.read()) << yes;
  }
  for (const char* no : {"0", "false", "FALSE", "no", "No", "off", "OFF"}) {
    ScopedEnv env(kTestFlag.name, no);
    EXPECT_FALSE(kTestFlag.read()) << no;
  }
}

TEST(Settings, UnsetOrEmptyGivesTheDefault) {
  for (const char* value : {static_cast<const char*>(nullptr), ""}) {
    ScopedEnv flag(kTestFlag.name, value);
    ScopedEnv integer(kTestInteger.name, value);
    EXPECT_FALSE(kTestFlag.read());
    EXPECT_EQ(kTestInteger.read(), 7);
  }
}

TEST(Settings, AnythingElseIsAnErrorNamingTheVariable) {
  ScopedEnv env(kTestFlag.name, "maybe");
  const std::string message = refusal([] { kTestFlag.read(); });
  EXPECT_NE(message.find("TNT_UNIT_TEST_FLAG='maybe'"), std::string::npos) << message;
  EXPECT_NE(message.find("yes/no"), std::string::npos) << message;
}

TEST(Settings, TheOutputFlagMeansFalseWhenItSaysFalse) {
  // Issue: TNT_OUTPUT_ON_ALL_DEVICES=false turned output on.
  ScopedEnv env(kOutputOnAllDevices.name, "false");
  EXPECT_FALSE(kOutputOnAllDevices.read());
}

TEST(Settings, IntegersKeepToTheirRange) {
  {
    ScopedEnv env(kTestInteger.name, "-3");
    EXPECT_EQ(kTestInteger.read(), -3);
  }
  for (const char* bad : {"101", "-4", "12abc", "1.5", " 3", "x"}) {
    ScopedEnv env(kTestInteger.name, bad);
    const std::string message = refusal([] { kTestInteger.read(); });
    EXPECT_NE(message.find(std::string("TNT_UNIT_TEST_INTEGER='") + bad + "' is not an integer in [-3, 100]"),
              std::string::npos)
        << message;
  }
  ScopedEnv env(kTestInteger.name, "50");
  EXPECT_NE(refusal([] { kTestInteger.read(0, 9); }).find("in [0, 9]"), std::string::npos);
}

TEST(Settings, KibReadsBytesAndRefusesZeroWhereZeroMeansNothing) {
  {
    ScopedEnv env(kFusionThresholdKb.name, nullptr);
    EXPECT_EQ(kFusionThresholdKb.read(), 32u * 1024);
  }
  {
    ScopedEnv env(kSegmentKb.name, "64");
    EXPECT_EQ(kSegmentKb.read(), 64u * 1024);
  }
  ScopedEnv env(kFusionThresholdKb.name, "0");
  const std::string message = refusal([] { kFusionThresholdKb.read(); });
  EXPECT_NE(message.find("TNT_FUSION_THRESHOLD_KB='0' is not a size in KiB in [1,"), std::string::npos) << message;
}

TEST(Settings, SecondsAreDecimalAndPositive) {
  {
    ScopedEnv env(kPeerTimeoutS.name, "0.25");
    EXPECT_EQ(kPeerTimeoutS.read(), std::chrono::milliseconds(250));
  }
  for (const char* bad : {"0", "-1", "nan", "inf", "5s", "1e9"}) {
    ScopedEnv env(kPeerTimeoutS.name, bad);
    EXPECT_NE(refusal([] { kPeerTimeoutS.read(); }).find("TNT_PEER_TIMEOUT_S"), std::string::npos) << bad;
  }
}

TEST(Settings, ChoicesIgnoreCaseAndAnswerInTheirOwnSpelling) {
  {
    ScopedEnv env(kLogLevel.name, "warning");
    EXPECT_EQ(kLogLevel.read(), "WARNING");
  }
  {
    ScopedEnv env(kTransport.name, "IB");
    EXPECT_EQ(kTransport.read(), "ib");
  }
  // Issue: an unknown TNT_LOG_LEVEL silently became INFO.
  ScopedEnv env(kLogLevel.name, "LOUD");
  const std::string message = refusal([] { kLogLevel.read(); });
  EXPECT_NE(message.find("TNT_LOG_LEVEL='LOUD' is not one of TRACE|DEBUG|INFO|WARNING|ERROR"), std::string::npos)
      << message;
}

TEST(Settings, TextCanTellEmptyFromUnsetWhereEmptyMeansSomething) {
  {
    ScopedEnv env(kTcpCongestion.name, nullptr);
    EXPECT_EQ(kTcpCongestion.read(), "reno");
  }
  {
    ScopedEnv env(kTcpCongestion.name, "");
    EXPECT_EQ(kTcpCongestion.read(), "");  // the system's own
  }
  ScopedEnv env(kMasterAddr.name, "");
  EXPECT_EQ(kMasterAddr.read(), "127.0.0.1");
}

}  // namespace
}  // namespace tnt::settings
