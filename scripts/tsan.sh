#!/usr/bin/env bash
# Builds the core library, the Kafka library and their concurrency tests,
# and the NATS consumer's tests (whose consumer fetches the next batch on a
# thread of its own), with clang and ThreadSanitizer in
# ${BUILD_DIR:-build-tsan}/ (nothing else: no tools, benchmarks or
# Prometheus), then runs each test binary with a time bound. Exits non-zero
# on a build failure, a failed test or a TSan report (halt_on_error).
# Suppressions (tests/tsan/suppressions.txt) cover third-party code only:
# idem's own code must be race-free. RocksDB and Abseil are Debian's, not
# instrumented; tests/tsan/absl_mutex_annotations.cc makes absl::Mutex
# visible, and ignore_noninstrumented_modules=1 keeps the pthread locks
# RocksDB takes visible while ignoring the libc accesses it makes (its
# memtable's copies, ordered by atomics TSan cannot see). RocksDB is linked
# as its shared library: ThreadSanitizer needs position-independent code.
# Usage: scripts/tsan.sh [--build-only]  (--build-only: builds, runs nothing)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build-tsan}
build_only=0
case "${1:-}" in
  "") ;;
  --build-only) build_only=1 ;;
  *) echo "usage: scripts/tsan.sh [--build-only]" >&2; exit 2 ;;
esac
# First two binaries: the engine's concurrency_test, parallel_commit_test,
# inflight_ids_test, commit_queue_test, state_versions_test,
# state_serializable_test (scans validated as ranges, range deletions),
# commit_time_watermark_test (commits registering and ending while removal
# horizons are taken) and engine_commit_test (the path of a commit that
# writes nothing, a throw between queueing and landing, bounded reruns,
# CompactExpired during a slow handler, also in a store whose state
# expires, a merge in flight while CompactExpired sets its removal horizon,
# a reopen after a failed write while a commit that read its value is in
# flight, commits racing the expiry sweep's bucket drops and reopens, whose
# flushes and log purges run on RocksDB's background threads through idem's
# info log and file wrappers; its broken twins are left out here to bound
# the run), and the sharded engine's batches across shards from parallel
# threads (sharded_engine_concurrency_test; its broken twin left out too),
# and the
# Kafka consumer's workers (kafka_parallel_runner_test: lanes, and groups
# through a real engine; the consumer itself cannot run under TSan with
# Debian's librdkafka, see tests/CMakeLists.txt).
# Then, where libnats-dev is installed, the NATS consumer's suite against a
# private nats-server (tests/brokers/nats_consumer_test.cc): its prefetch
# thread (brokers/background_call.h, kept from batch to batch) shares a
# redelivery counter with the consumer's thread, which
# StatsReadWhileTheNextBatchIsFetchedCountRedeliveries reads while a fetch
# runs ahead; and tests/brokers/nats_redelivery_test.cc, whose +WPI thread
# (nats/in_progress.h) takes the batches the loop and the prefetch hold.
# nats.c's own threads are created with pthread_create, which
# ThreadSanitizer intercepts. Its kill test too (not its broken twin):
# consumer processes (tests/brokers/broker_consumer_child.cc, built with
# TSan) SIGKILLed and their stores reopened, whose recovery hands work to
# RocksDB's background threads at once.
tests=(idem_concurrency_tests idem_kafka_concurrency_tests)
declare -A test_path=() test_args=()
test_args[idem_concurrency_tests]=--gtest_filter=-EngineCommitBrokenVariantTest.*:ShardedEngineConcurrencyBrokenVariantTest.*
start=$(date +%s)
echo "tsan: configuring and building in $build_dir/ (log: $build_dir/build.log)"
mkdir -p "$build_dir"
source scripts/compiler-cache.sh
# Slow tests are configured (the NATS suite is one) but only the binaries
# named below are built.
if ! cmake -S . -B "$build_dir" -DCMAKE_CXX_COMPILER=clang++ \
       "${cache_flags[@]}" -DIDEM_TSAN=ON -DIDEM_ROCKSDB_SHARED=ON \
       -DIDEM_BUILD_TOOLS=OFF -DIDEM_BUILD_BENCH=OFF \
       -DIDEM_BUILD_SLOW_TESTS=ON -DIDEM_WITH_KAFKA=ON \
       -DIDEM_WITH_PROMETHEUS=OFF -DIDEM_WITH_REDIS=OFF \
       -DIDEM_WITH_RABBITMQ=OFF -DIDEM_UNITY_BUILD=ON \
       -DCMAKE_BUILD_TYPE=Release \
       "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -gline-tables-only" \
       >"$build_dir/build.log" 2>&1; then
  tail -n 60 "$build_dir/build.log" >&2
  echo "tsan: configure FAILED (full log: $build_dir/build.log)" >&2
  exit 1
fi
# grep reads the whole list (not -q): under pipefail, a grep that quits at
# its first match lets cmake die of SIGPIPE and the test read as missing.
if cmake --build "$build_dir" --target help 2>/dev/null |
     grep ' nats_consumer_test$' >/dev/null; then
  tests+=(nats_consumer_test)
  test_path[nats_consumer_test]=brokers/nats_consumer_test
  # The kill test's broken twin (acks on receipt) needs a kill to land
  # between an ack and its commit, which TSan's slowdown makes rare.
  test_args[nats_consumer_test]=--gtest_filter=-*/AckOnReceive
  tests+=(nats_redelivery_test)
  test_path[nats_redelivery_test]=brokers/nats_redelivery_test
else
  echo "tsan: libnats not found: the NATS consumer's tests are not run"
fi
echo "tsan: building ${tests[*]}"
if ! cmake --build "$build_dir" -j"${JOBS:-$(nproc)}" --target "${tests[@]}" \
     >>"$build_dir/build.log" 2>&1; then
  tail -n 60 "$build_dir/build.log" >&2
  echo "tsan: build FAILED (full log: $build_dir/build.log)" >&2
  exit 1
fi
echo "tsan: built in $(( $(date +%s) - start )) s"
[ "$build_only" = 0 ] || exit 0
failed=()
for t in "${tests[@]}"; do
  log="$build_dir/$t.tsan.log"
  if TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ignore_noninstrumented_modules=1 suppressions=$PWD/tests/tsan/suppressions.txt" \
       timeout "${TSAN_TIMEOUT:-300}" "$build_dir/tests/${test_path[$t]:-$t}" \
         ${test_args[$t]:+"${test_args[$t]}"} >"$log" 2>&1; then
    echo "tsan:   ok: $t"
  else
    tail -n 80 "$log" >&2
    echo "tsan:   FAILED: $t (log: $log)" >&2
    failed+=("$t")
  fi
done
echo "tsan: finished in $(( $(date +%s) - start )) s"
[ ${#failed[@]} -eq 0 ]
