# idem_check_thread_safety(target...): with clang, compiles each target's own
# sources with clang's thread-safety analysis of the locking annotations
# (ABSL_GUARDED_BY, ..._LOCKS_REQUIRED, the scoped lockables), and a finding,
# like any warning, fails the build (-Wthread-safety -Werror). Called for the
# core (engine/CMakeLists.txt) and the libraries of kafka/, retry/, crash/,
# prometheus/, cli/, brokers/, nats/, rabbitmq/ and redis/. Other compilers
# ignore the annotations. CI's clang build (the AddressSanitizer step of
# .ci/run) builds every such target.
function(idem_check_thread_safety)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    foreach(target IN LISTS ARGN)
      target_compile_options(${target} PRIVATE -Wthread-safety -Werror)
    endforeach()
  endif()
endfunction()
