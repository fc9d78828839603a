#pragma once
#include <stdexcept>
#include <string>

namespace tnt {

// Every failure tnt reports is a tnt::Error whose message says what went wrong, where
// (rank, host, address, file) and, where it helps, what to do about it.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A bad setting: an environment variable, option or argument that cannot be used.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// The job cannot go on: a peer was lost or refused us, a wait timed out, or the
// ranks disagree about the job. Sticky: once raised, every later operation raises it too.
class JobError : public Error {
 public:
  using Error::Error;
};

}  // namespace tnt
