# tnt_hot_path(target): the shared libraries on a message's path (core, transport, collectives,
# the C API and the MPI layer) are built without semantic interposition. With -fPIC, GCC otherwise
# assumes any of a library's exported functions may be replaced at load time, so it neither inlines
# them nor calls them directly inside the library: an MPI_Send called the handle lookups of its own
# layer through the PLT, uninlined (callgrind, 2026-11-29). tnt does not support interposing its
# own functions; clang builds this way by default.
function(tnt_hot_path target)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -fno-semantic-interposition)
  endif()
endfunction()
