#!/usr/bin/env bash
# Checks the README's C++ example the way a user would meet it: copies the cpp
# block that follows the "Checked by scripts/check-readme-example.sh" marker,
# verbatim, into a source file, builds it with tests/readme_example/ against
# idem, runs it and compares what it prints with the README's text block after
# it. Exits 0 only if every step succeeds.
#
# Arguments go to cmake's configure step and say how to find idem. Without
# any, the installed package in build/install (find_package(idem CONFIG), as a
# user would), which CI makes with `cmake --install build --prefix
# build/install`. Otherwise, for example:
#   scripts/check-readme-example.sh -DCMAKE_PREFIX_PATH=<install prefix>
#   scripts/check-readme-example.sh -DIDEM_SOURCE_DIR=<checkout>  (add_subdirectory)
# Builds in ${BUILD_DIR:-build-readme-example}; quiet on success.
set -euo pipefail
cd "$(dirname "$0")/.."
if (( ! $# )); then
  [[ -d build/install ]] ||
    { echo "check-readme-example: no idem in build/install; run scripts/build.sh," \
           "then cmake --install build --prefix build/install" >&2; exit 1; }
  set -- -DCMAKE_PREFIX_PATH="$PWD/build/install"
fi
mkdir -p "${BUILD_DIR:-build-readme-example}"
build_dir=$(cd "${BUILD_DIR:-build-readme-example}" && pwd)
source_file=$build_dir/readme_example.cc
expected=$build_dir/expected_output.txt
actual=$build_dir/actual_output.txt
rm -f "$source_file" "$expected" "$actual"

fail() { echo "check-readme-example: FAILED: $*" >&2; exit 1; }

awk -v source_file="$source_file" -v expected="$expected" '
  /^<!-- Checked by scripts\/check-readme-example\.sh/ { state = 1; next }
  state == 1 && /^```cpp$/   { state = 2; next }
  state == 2 && /^```$/      { state = 3; next }
  state == 2                 { print > source_file; next }
  state == 3 && /^```text$/  { state = 4; next }
  state == 4 && /^```$/      { state = 5; exit }
  state == 4                 { print > expected }
  END { exit state == 5 ? 0 : 1 }
' README.md || fail "README.md has no marked cpp block followed by a text block"
[[ -s $source_file && -s $expected ]] || fail "an empty block in README.md"

echo "check-readme-example: building in $build_dir/ (log: $build_dir/build.log)" >&2
if ! { cmake -S tests/readme_example -B "$build_dir" -DIDEM_SOURCE_DIR= \
         -DREADME_EXAMPLE_SOURCE="$source_file" "$@" &&
       cmake --build "$build_dir" --target readme_example -j"$(nproc)"; } \
     >"$build_dir/build.log" 2>&1; then
  tail -n 60 "$build_dir/build.log" >&2
  fail "the example does not build (full log: $build_dir/build.log)"
fi

# The example makes its store under TMPDIR and must remove it.
rm -rf "$build_dir/tmp" && mkdir "$build_dir/tmp"
status=0
TMPDIR=$build_dir/tmp "$build_dir/readme_example" >"$actual" || status=$?
(( status == 0 )) || fail "the example exited with status $status"
diff -u --label "README.md (expected)" --label "example output" "$expected" "$actual" >&2 ||
  fail "the example does not print what README.md shows"
[[ -z $(ls -A "$build_dir/tmp") ]] || fail "the example left files in $build_dir/tmp"
echo "check-readme-example: the README's example builds, runs and prints what README.md shows" >&2
