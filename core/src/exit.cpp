#include "tnt/core/exit.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tnt {

void exit_now(int status) {
  spdlog::default_logger()->flush();
  std::fflush(stdout);
  std::fflush(stderr);
  // libomp's name for this process's registration (__kmp_reg_status_name); gone already where
  // another OpenMP runtime, or none, is loaded.
  const std::string openmp_registration =
      "/dev/shm/__KMP_REGISTERED_LIB_" + std::to_string(::getpid()) + "_" + std::to_string(::getuid());
  ::unlink(openmp_registration.c_str());
  std::_Exit(status);
}

}  // namespace tnt
