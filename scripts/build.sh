#!/usr/bin/env bash
# Configures and builds idem into ${BUILD_DIR:-build} (RelWithDebInfo).
# Extra arguments go to cmake's configure step, e.g. -DIDEM_SANITIZE=ON.
# TARGETS, space-separated, builds only those targets (and what they link),
# e.g. TARGETS="idem-demo idem-crashtest"; unset or empty: every target.
# IDEM_DEBUG_INFO=0 builds without debug info (-O2 -DNDEBUG, build type
# Release): about 30% less compile time, which CI takes (.ci/run).
# Each target compiles eight files to a compiler run (IDEM_UNITY_BUILD, the
# top-level CMakeLists.txt): two thirds of the compile time from scratch;
# IDEM_UNITY_BUILD=0 compiles each file alone, quicker when editing one.
# Quiet on success; prints the build log on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
read -ra targets <<<"${TARGETS:-}"
target_flags=()
[ ${#targets[@]} -eq 0 ] || target_flags=(--target "${targets[@]}")
start=$(date +%s)
echo "build: configuring and building ${targets[*]:-everything} in $build_dir/" \
  "(log: $build_dir/build.log)" >&2
mkdir -p "$build_dir"
source scripts/compiler-cache.sh
type_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [ "${IDEM_DEBUG_INFO:-1}" = 0 ]; then
  type_flags=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG"
              "-DCMAKE_C_FLAGS_RELEASE=-O2 -DNDEBUG")
fi
unity_flag=-DIDEM_UNITY_BUILD=ON
[ "${IDEM_UNITY_BUILD:-1}" = 0 ] && unity_flag=-DIDEM_UNITY_BUILD=OFF
if ! { cmake -S . -B "$build_dir" "${type_flags[@]}" "$unity_flag" \
         "${cache_flags[@]}" "$@" &&
       cmake --build "$build_dir" "${target_flags[@]}" -j"$(nproc)"; } \
     >"$build_dir/build.log" 2>&1; then
  tail -n 60 "$build_dir/build.log" >&2
  echo "build: FAILED (full log: $build_dir/build.log)" >&2
  exit 1
fi
grep -E 'warning:' "$build_dir/build.log" >&2 || true
echo "build: done in $(( $(date +%s) - start )) s" >&2
