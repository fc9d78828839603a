# Install rules and the CMake package: find_package(tnt) gives tnt::transport and tnt::collectives.
include(CMakePackageConfigHelpers)
