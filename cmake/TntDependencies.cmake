# Every dependency comes from Debian 12's packages (scripts/install-deps.sh installs them).
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS system)
find_package(CapnProto CONFIG REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(PkgConfig REQUIRED)

# Ranks started by mpirun (or srun --mpi=pmix) find rank 0 through PMIx (transport/src/pmix_exchange.cpp).
pkg_check_modules(PMIX REQUIRED IMPORTED_TARGET pmix)

if(TNT_WITH_IB)
  # Connections are set up over tnt's authenticated TCP side channel, so rdmacm is not needed.
  pkg_check_modules(IBVERBS REQUIRED IMPORTED_TARGET libibverbs)
endif()

if(TNT_BUILD_TRAINER)
  find_package(dnnl CONFIG REQUIRED)
  find_package(tomlplusplus CONFIG REQUIRED)
  # ONNX import and export (compute/): Debian's ONNX package needs protobuf's targets found first.
  find_package(Protobuf REQUIRED)
  find_package(ONNX CONFIG REQUIRED)
endif()

# libnuma ships only the library and header, no CMake or pkg-config file.
find_library(NUMA_LIBRARY numa REQUIRED)
find_path(NUMA_INCLUDE_DIR numa.h REQUIRED)
add_library(tnt_numa INTERFACE)
target_link_libraries(tnt_numa INTERFACE ${NUMA_LIBRARY})
target_include_directories(tnt_numa INTERFACE ${NUMA_INCLUDE_DIR})

if(TNT_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
  include(GoogleTest)
endif()
if(TNT_BUILD_BENCH)
  find_package(benchmark CONFIG REQUIRED)
  find_package(MPI COMPONENTS C QUIET)
endif()
