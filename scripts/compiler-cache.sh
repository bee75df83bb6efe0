# Sourced by scripts/build.sh and scripts/fuzz.sh: sets cache_flags to the
# cmake flags that put ccache (installed by install-deps.sh) in front of the
# compilers, or to nothing without it. CCACHE_BASEDIR is the checkout, so a
# fresh clone elsewhere reuses what an earlier build compiled; the cache is
# content-addressed, so a hit is the same object file a compile would give.
cache_flags=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
  cache_flags=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache
               -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
