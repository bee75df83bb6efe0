#!/usr/bin/env bash
# Quick start, part 2: installs what is missing, builds, runs every test.
# Arguments are passed to ctest, e.g. -L unit or -R Engine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
exec ctest --output-on-failure -j"$(nproc)" "$@"
