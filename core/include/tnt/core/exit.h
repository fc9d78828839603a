#pragma once
// Ending a process at once, after a failure.

namespace tnt {

// Flushes the logs and stdio and ends the process with `status` at once: no destructor or exit
// handler runs (after a failure peers may be gone, and nothing left is worth waiting for). What
// an exit handler would have cleaned up outside the process is cleaned up here: LLVM's OpenMP
// runtime (linked by clang builds) registers each process in /dev/shm and removes that file only
// in an exit handler.
[[noreturn]] void exit_now(int status);

}  // namespace tnt
