#!/usr/bin/env bash
# Quick start, part 1: installs what is missing, builds, runs the demo.
# Arguments are passed to idem-demo (see: build/tools/idem-demo --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec build/tools/idem-demo "$@"
