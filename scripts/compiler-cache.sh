# Sourced by scripts/build.sh and scripts/fuzz.sh: sets cache_flags to the
# cmake flags that put ccache (installed by install-deps.sh) in front of the
# compilers, or to nothing without it. CCACHE_BASEDIR is the checkout, so
# paths inside it are hashed relative to it; CCACHE_NOHASHDIR keeps ccache
# from hashing the compiler's working directory, which it otherwise does for
# every -g compile (RelWithDebInfo). Together they let a fresh clone in
# another folder reuse what an earlier build compiled (the units of eight
# files, IDEM_UNITY_BUILD, include each file by its path relative to the
# checkout: cmake/idem_unity.cmake). The cost: a cached
# object's debug info names the directory of the build that first compiled
# it (only a debugger looking for sources notices). The launcher sets both
# itself (through env), so that `cmake --build` run by hand in a build
# directory configured here hits the cache as the scripts' builds do.
cache_flags=()
if command -v ccache >/dev/null; then
  launcher="env;CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}"
  launcher+=";CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1};ccache"
  cache_flags=("-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher"
               "-DCMAKE_C_COMPILER_LAUNCHER=$launcher")
fi
