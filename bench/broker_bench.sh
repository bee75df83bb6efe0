#!/usr/bin/env bash
# Runs one broker's consumer benchmark, build/bench/idem_<broker>_bench
# (bench/<broker>_consumer_bench.cc): idem's consumer against plain
# consume-and-ack loops on one server. The benchmark starts a private server
# of its own (servers/: a temporary directory, a free port on 127.0.0.1) and
# stops it at the end, unless IDEM_BENCH_<BROKER>_PORT names a running one.
# Usage: bench/broker_bench.sh redis|nats|rabbitmq [benchmark arguments],
# e.g. --benchmark_filter=Idem. BUILD_DIR names the build (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: bench/broker_bench.sh redis|nats|rabbitmq [benchmark arguments]"
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
broker=$1
shift
case "$broker" in
  redis | nats | rabbitmq) ;;
  -h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "broker_bench: unknown broker '$broker'; $usage" >&2; exit 2 ;;
esac
bench=${BUILD_DIR:-build}/bench/idem_${broker}_bench
[ -x "$bench" ] || {
  echo "broker_bench: build $bench first (target idem_${broker}_bench)" >&2
  exit 1
}
exec "$bench" "$@"
