#!/usr/bin/env bash
# Quick start, part 1: installs what is missing, builds, runs the demo:
#   1. idem-demo: a ledger consumer on a stream with ~10% redeliveries,
#      checked against the expected balances;
#   2. idem-crashtest: 20 kill cycles and 10 power-loss cycles of the ledger
#      workload against real worker processes, with every invariant checked.
# Arguments are passed to idem-demo (see: build/tools/idem-demo --help).
# Installs and builds only what these two tools need; scripts/test.sh
# installs and builds the rest (the tests, the benchmarks, the Kafka adapter
# and the Prometheus collectors).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --demo
# Unless everything scripts/test.sh installs is there (GoogleTest and Google
# Benchmark among it), configure without the tests and benchmarks, which
# need them; scripts/test.sh turns them back on.
configure=()
scripts/install-deps.sh --check ||
  configure=(-DIDEM_BUILD_TESTS=OFF -DIDEM_BUILD_BENCH=OFF)
TARGETS="idem-demo idem-crashtest" scripts/build.sh "${configure[@]}"

echo "== idem-demo"
build/tools/idem-demo "$@"

echo
echo "== idem-crashtest: 20 kill cycles (sync durability)"
build/tools/idem-crashtest --workload=ledger --mode=kill --cycles=20

echo
echo "== idem-crashtest: 10 power-loss cycles (buffered durability)"
build/tools/idem-crashtest --workload=ledger --mode=powerloss \
  --durability=buffered --cycles=10
