#!/usr/bin/env bash
# Builds the fuzz targets of the on-disk decoders (tests/fuzz/) with clang,
# libFuzzer, ASan and UBSan in ${BUILD_DIR:-build-fuzz}/ (the core library and
# the targets only), then runs every target for its share of SECONDS
# (default 30, split evenly; at least 1 s each).
# Usage: scripts/fuzz.sh [seconds]
#        scripts/fuzz.sh --build-only   (builds the targets, runs nothing)
#
# Each target starts from its seeds (written by the target itself into
# <build>/fuzz/corpus/<target>/, which also keeps what the run adds) and from
# tests/fuzz/corpus/<target>/ if that exists (inputs kept for regressions).
# Exits non-zero if any target crashed or broke a property; the input that
# did is kept under <build>/fuzz/artifacts/<target>/ and its path printed.
# Reproduce with: <build>/tests/fuzz/<target> <input>
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
seconds=${1:-30}
if [ "$seconds" = --build-only ]; then
  build_only=1
  seconds=1
fi
if ! [[ $seconds =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: scripts/fuzz.sh [seconds | --build-only]  (seconds: a whole number, >= 1)" >&2
  exit 2
fi
build_dir=${BUILD_DIR:-build-fuzz}
start=$(date +%s)

echo "fuzz: building the targets in $build_dir/ (log: $build_dir/build.log)"
mkdir -p "$build_dir"
source scripts/compiler-cache.sh
# -O1 with line tables: the usual libFuzzer setting, and readable stacks.
if ! { cmake -S . -B "$build_dir" -DCMAKE_CXX_COMPILER=clang++ \
         "${cache_flags[@]}" \
         -DIDEM_FUZZ=ON -DIDEM_BUILD_TESTS=OFF -DIDEM_BUILD_TOOLS=OFF \
         -DIDEM_BUILD_BENCH=OFF -DIDEM_UNITY_BUILD=ON \
         -DCMAKE_BUILD_TYPE=Release \
         "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -gline-tables-only" &&
       cmake --build "$build_dir" -j"${JOBS:-$(nproc)}" --target idem_fuzzers
     } >"$build_dir/build.log" 2>&1; then
  tail -n 60 "$build_dir/build.log" >&2
  echo "fuzz: build FAILED (full log: $build_dir/build.log)" >&2
  exit 1
fi
grep -E 'warning:' "$build_dir/build.log" >&2 || true
echo "fuzz: built in $(( $(date +%s) - start )) s"
[ "$build_only" = 0 ] || exit 0

mapfile -t targets < "$build_dir/tests/fuzz/fuzz_targets.txt"
share=$(( seconds / ${#targets[@]} ))
[ "$share" -ge 1 ] || share=1
failed=()
for target in "${targets[@]}"; do
  [ -n "$target" ] || continue
  binary="$build_dir/tests/fuzz/$target"
  corpus="$build_dir/fuzz/corpus/$target"
  artifacts="$build_dir/fuzz/artifacts/$target/"
  log="$build_dir/fuzz/$target.log"
  mkdir -p "$corpus" "$artifacts"
  if ! "$binary" --write_seeds="$corpus" >"$log" 2>&1; then
    cat "$log" >&2
    echo "fuzz:   FAILED: $target: a seed breaks its properties" >&2
    failed+=("$target")
    continue
  fi
  dirs=("$corpus")
  [ -d "tests/fuzz/corpus/$target" ] && dirs+=("tests/fuzz/corpus/$target")
  echo "fuzz: $target for $share s"
  if "$binary" -max_total_time="$share" -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$artifacts" "${dirs[@]}" \
       >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
    echo "fuzz:   ok: ${runs:-?} inputs, $cov, corpus $(ls "$corpus" | wc -l) files"
  else
    grep -v '^#' "$log" | tail -n 40 >&2
    input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    echo "fuzz:   FAILED: $target (log: $log)" >&2
    echo "fuzz:   input kept at: ${input:-none written}" >&2
    echo "fuzz:   reproduce: $binary ${input:-<input>}" >&2
    failed+=("$target")
  fi
done

echo "fuzz: finished in $(( $(date +%s) - start )) s"
[ ${#failed[@]} -eq 0 ] || echo "fuzz: failed: ${failed[*]}" >&2
echo "fuzz: $(( ${#targets[@]} - ${#failed[@]} )) passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
