#pragma once
#include <memory>

#include <spdlog/spdlog.h>

namespace tnt {

// Sets up tnt's default spdlog logger: "[tnt <time> rank R] LEVEL message", with
// Tarantella's level names (DEBUG, INFO, WARNING, ERROR). The level comes from
// TNT_LOG_LEVEL (default INFO). Ranks other than the master log only ERRORs unless
// TNT_LOG_ON_ALL_DEVICES is true. Safe to call more than once (the last call wins). Throws
// ConfigError for a level or flag it cannot read.
void init_logging(int rank, int size);

// What a tool logs before init_logging can run (before it knows its rank, or when finding it
// fails): the same format without a rank, on stderr, without colours; spdlog's own default
// logger would write to stdout in colour. Reads no setting, so it cannot fail.
void init_startup_logging();

}  // namespace tnt
