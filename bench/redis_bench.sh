#!/usr/bin/env bash
# Runs build/bench/idem_redis_bench (bench/redis_consumer_bench.cc) against a
# private redis-server: a new temporary directory, a port on 127.0.0.1
# (REDIS_BENCH_PORT, default 56381), no persistence (the plain loops it is
# compared with keep nothing either); stopped and removed at the end.
# Arguments go to the benchmark, e.g. --benchmark_filter=Idem.
set -euo pipefail
cd "$(dirname "$0")/.."
port=${REDIS_BENCH_PORT:-56381}
bench=${BUILD_DIR:-build}/bench/idem_redis_bench
[ -x "$bench" ] || { echo "redis_bench: build $bench first (target idem_redis_bench)" >&2; exit 1; }
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save '' \
  --appendonly no --daemonize no >"$dir/redis.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.1
done
IDEM_BENCH_REDIS_PORT=$port "$bench" "$@"
