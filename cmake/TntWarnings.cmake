# tnt_target_warnings(target): the project's warning set, applied to its own targets only.
function(tnt_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wno-unused-parameter)
endfunction()
