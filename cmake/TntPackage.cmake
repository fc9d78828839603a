# Install rules and the CMake package: find_package(tnt) gives tnt::core, tnt::transport,
# tnt::collectives and tnt::c (the C API, tnt/tnt.h), for HPC codes that want tnt's
# communication without the trainer, and tnt::mpi, the MPI-subset layer
# (find_package(tnt COMPONENTS mpi); mpi/README.md).
include(CMakePackageConfigHelpers)

install(TARGETS tnt_core tnt_transport tnt_collectives tnt_c tnt_mpi EXPORT tntTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY core/include/ transport/include/ collectives/include/ c/include/ mpi/include/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT tntTargets NAMESPACE tnt:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tnt)

configure_package_config_file(cmake/tntConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/tntConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tnt)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tntConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tntConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/tntConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tnt)
