#!/usr/bin/env bash
# Quick start, part 2: installs what is missing, builds, runs every test.
# Arguments are passed to ctest, e.g. -L unit or -R Engine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Every target; the tests and benchmarks explicitly, as scripts/demo.sh may
# have configured build/ without them.
# The Python package too (python/, label python), from the same build.
scripts/build.sh -DIDEM_BUILD_TESTS=ON -DIDEM_BUILD_BENCH=ON -DIDEM_BUILD_PYTHON=ON
# install-deps.sh installs librdkafka-dev and prometheus-cpp-dev; if the
# build still did not find one, its suites are missing: say so rather than
# pass without them, and fail under CI (CI=true), which must run them all.
missing=0
# The broker adapters too (install-deps.sh installs libhiredis-dev,
# libnats-dev and librabbitmq-dev; their suites, label brokers, start their
# servers).
# And the Python package (python3-dev, pybind11-dev; its suites need
# python3-pytest, and fail without it).
for part in idem::kafka idem::prometheus idem::redis idem::nats \
            idem::rabbitmq idem::python; do
  if grep -q "$part is not built" build/build.log; then
    echo "test: $part is not built: its suites do not run" >&2
    missing=1
  fi
done
if [ "$missing" = 1 ] && [ "${CI:-}" = true ]; then
  echo "test: CI needs every optional part built" >&2
  exit 1
fi
cd build
# Eight test slots per core: a busy test takes eight, one that mostly waits
# (the Kafka suites) one (tests/CMakeLists.txt, "Test slots").
exec ctest --output-on-failure -j"$((8 * $(nproc)))" "$@"
