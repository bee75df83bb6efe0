#!/usr/bin/env bash
# Quick start, part 1: installs what is missing, builds, runs the demo:
#   1. idem-demo: a ledger consumer on a stream with ~10% redeliveries,
#      checked against the expected balances;
#   2. idem-crashtest: 20 kill cycles and 10 power-loss cycles of the ledger
#      workload against real worker processes, with every invariant checked.
# Arguments are passed to idem-demo (see: build/tools/idem-demo --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh

echo "== idem-demo"
build/tools/idem-demo "$@"

echo
echo "== idem-crashtest: 20 kill cycles (sync durability)"
build/tools/idem-crashtest --workload=ledger --mode=kill --cycles=20

echo
echo "== idem-crashtest: 10 power-loss cycles (buffered durability)"
build/tools/idem-crashtest --workload=ledger --mode=powerloss \
  --durability=buffered --cycles=10
