# Sanitizer and fuzzing builds. Included before any target, so that every target of the
# project (libraries, programs, tests, benchmarks) is instrumented alike.
#
# TNT_SANITIZE=address,undefined | address | undefined | thread: every report is fatal
# (-fno-sanitize-recover=all), so a test whose process hits one fails. scripts/sanitize.sh runs
# the test suite in such builds.
# TNT_FUZZ=ON (clang only): also instruments for libFuzzer and builds the fuzz/ targets; it
# implies TNT_SANITIZE=address,undefined unless another value is given.
set(TNT_SANITIZE "" CACHE STRING "Sanitizers for every target: address,undefined, address, undefined or thread")
option(TNT_FUZZ "Build the libFuzzer targets in fuzz/ (needs clang)" OFF)

if(TNT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TNT_FUZZ=ON needs clang (libFuzzer), but the C++ compiler is ${CMAKE_CXX_COMPILER_ID}: "
                        "configure with -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
  endif()
  if(TNT_SANITIZE STREQUAL "")
    set(TNT_SANITIZE "address,undefined" CACHE STRING "" FORCE)
  endif()
endif()

if(NOT TNT_SANITIZE STREQUAL "")
  set(tnt_known_sanitizers "address,undefined" "undefined,address" "address" "undefined" "thread")
  if(NOT TNT_SANITIZE IN_LIST tnt_known_sanitizers)
    message(FATAL_ERROR "TNT_SANITIZE='${TNT_SANITIZE}': expected one of address,undefined | address | undefined | "
                        "thread")
  endif()
  if(TNT_FUZZ AND TNT_SANITIZE STREQUAL "thread")
    message(FATAL_ERROR "TNT_FUZZ=ON runs with address,undefined, not thread")
  endif()
  # Frame pointers and line tables make the reports' stacks complete and readable at little cost.
  add_compile_options(-fsanitize=${TNT_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer -g1)
  add_link_options(-fsanitize=${TNT_SANITIZE})
  if(TNT_SANITIZE MATCHES "undefined" AND CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    # clang 14's -fsanitize=function cannot compile coroutines ("Cannot represent a difference
    # across sections"); GCC has no such check either. Its vptr check needs UBSan's C++ runtime in
    # every program that links the libraries, which clang's C driver does not link: the C API's
    # and the MPI layer's C programs then fail to link (undefined __ubsan_vptr_type_cache).
    add_compile_options(-fno-sanitize=function -fno-sanitize=vptr)
  endif()
  if(TNT_SANITIZE STREQUAL "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # Boost.Asio's handler fences; its queues synchronise through mutexes that TSan does see.
    add_compile_options(-Wno-tsan)
  endif()
  # What a project built against this tree's installation needs as well (tests/package).
  set(TNT_SANITIZE_FLAGS "-fsanitize=${TNT_SANITIZE}")
endif()

if(TNT_FUZZ)
  # Coverage for libFuzzer in every library; only the fuzz targets link libFuzzer's main.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
