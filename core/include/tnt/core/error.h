#pragma once
// tnt's one error family. Every exception that leaves a tnt library through its public
// interface is a tnt::Error (or derives from one), so a caller can catch one type, and the
// command-line tools map each kind to an exit status (exit_status_of).
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tnt {

// Exit statuses of tnt's command-line tools. 0 is success; 1 a failure of the run itself.
enum class ExitStatus : int {
  failure = 1,  // the run failed: I/O, a peer, the numbers (tnt::Error, JobError, ...)
  usage = 2,    // what the user asked for cannot be done as written (ConfigError)
};

// Every failure tnt reports is a tnt::Error whose message says what went wrong, where (rank,
// host, address, file) and, where it helps, what to do about it.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  virtual ExitStatus exit_status() const noexcept { return ExitStatus::failure; }
};

// A bad setting: an environment variable, option, argument, model or run description that
// cannot be used as written.
class ConfigError : public Error {
 public:
  using Error::Error;
  ExitStatus exit_status() const noexcept override { return ExitStatus::usage; }
};

// The job cannot go on: a peer was lost or refused us, a wait timed out, or the ranks disagree
// about the job. Sticky: once raised, every later operation raises it too.
class JobError : public Error {
 public:
  using Error::Error;
};

// A point-to-point receive whose message was larger than its buffer: the receive keeps what fits
// and fails alone; the job goes on (MPI_ERR_TRUNCATE).
class TruncationError : public Error {
 public:
  using Error::Error;
};

// Input data that cannot be used: a file missing, truncated, of the wrong format or shape.
class DataError : public Error {
 public:
  using Error::Error;
};

// A call made in the wrong order (backward() before forward(), spawn() after start()), or an
// invariant broken inside tnt: a bug to report rather than a condition to handle.
class LogicError : public Error {
 public:
  using Error::Error;
};

// The exit status a command-line tool returns for an exception that ended it: the Error's own,
// and ExitStatus::failure for anything else.
int exit_status_of(const std::exception& error) noexcept;

// Outside text to quote in a message: `text` itself when it has at most `limit` characters, else
// its first `limit` characters, "..." and how long it was. A message never echoes megabytes of a
// hostfile line, a model file or an argument back to the terminal.
inline constexpr std::size_t kQuoteLimit = 200;
std::string quote_cut(std::string_view text, std::size_t limit = kQuoteLimit);

}  // namespace tnt
