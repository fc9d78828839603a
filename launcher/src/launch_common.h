// Pieces shared by launching, --dry-run and --cleanup (internal).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "host_launch.h"
#include "remote_host.h"
#include "tnt/launcher/options.h"
#include "tnt/launcher/plan.h"

namespace tnt::launcher::detail {

std::string current_dir();
// ssh client, options and the path of tnt-launch (the same on every host).
SshSettings ssh_settings(const LaunchOptions& opts);
// `s` quoted for a POSIX shell, unchanged when that is not needed.
std::string shell_word(const std::string& s);
std::chrono::milliseconds ms(double seconds);
// A plan may hold this machine once (e.g. not both "localhost" and its host name).
void require_one_local_host(const JobPlan& plan);
// What `host` runs, without the job token (added only when the job starts).
HostLaunch make_host_launch(const LaunchOptions& opts, const JobPlan& plan, const HostPlan& host);
void print_dry_run(const LaunchOptions& opts, const JobPlan& plan, const SshSettings& ssh);

}  // namespace tnt::launcher::detail
