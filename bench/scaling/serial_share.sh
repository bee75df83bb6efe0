#!/usr/bin/env bash
# The measured serial fraction of idem's commit path for CPU-bound handlers:
# on-CPU samples (perf, DWARF call graphs) of idem-scaling-bench running one
# row, W µs of work per message, in batches, and of those samples inside
# Engine::ProcessBatch, the share spent where one thread at a time runs:
#   - rocksdb::DBImpl::WriteImpl: the group write (log append and memtable
#     inserts) the commit queue's leader runs for its whole group;
#   - EngineImpl::QueueCommit: the ordered critical section (order_mu_) that
#     validates reads and assigns outbox positions and versions;
#   - MergeBatches: the leader joining its group's batches;
#   - StateVersions: the version index, under its mutex;
#   - spinlocks (absl's SpinLock, which Abseil's Mutex and its deadlock
#     graph use).
# Samples of a waiter spinning for its group (CommitQueue::SpinBriefly) are
# counted apart: they wait for the serial part, they are not part of it.
# With a shard per thread (fourth argument "sharded", Options::shards =
# threads) each shard's write path, ordered section and version index serve
# one thread: only what every shard shares (the spinlocks) counts as serial.
# With s that share, Amdahl's law gives the speedup on n cores:
#   S(n) = 1 / (s + (1 - s) / n)
# which the script prints for 2, 16 and 32.
#
# Usage: bench/scaling/serial_share.sh [--json] [work_us] [batch] [threads]
#          [sharded]
#   bench/scaling/serial_share.sh                    # W = 20 µs, batch 500,
#                                                    # 1 thread
#   bench/scaling/serial_share.sh 20 500 2           # both sides of a pair
#   bench/scaling/serial_share.sh 20 500 2 sharded   # a shard per thread
# Needs perf (linux-perf, installed if missing); the binary is
# ${SCALING_BENCH:-build/bench/idem-scaling-bench}. Set KEEP=dir to keep the
# profile. Exit code 0, 1 if no sample fell inside ProcessBatch, 2 for bad
# arguments.
set -euo pipefail
cd "$(dirname "$0")/../.."
json=false
case "${1:-}" in
  -h|--help) sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  --json) json=true; shift ;;
esac
work_us=${1:-20}
batch=${2:-500}
threads=${3:-1}
sharded=${4:-}
if [[ -n $sharded && $sharded != sharded ]]; then
  echo "serial_share.sh: the fourth argument is 'sharded' or nothing," \
    "got '$sharded' (see --help)" >&2
  exit 2
fi
rows="--one_shard=true --shard_per_thread=false"
[[ -z $sharded ]] || rows="--one_shard=false --shard_per_thread=true"
for n in "$work_us" "$batch" "$threads"; do
  if ! [[ $n =~ ^[0-9]+$ ]] || [ "$batch" -lt 1 ] || [ "$threads" -lt 1 ]; then
    echo "serial_share.sh: work_us, batch and threads must be whole numbers" \
      "(batch and threads >= 1), got '$work_us' '$batch' '$threads'" \
      "(see --help)" >&2
    exit 2
  fi
done
command -v perf >/dev/null || scripts/install-deps.sh linux-perf
bin=${SCALING_BENCH:-build/bench/idem-scaling-bench}
out=${KEEP:-$(mktemp -d)}
mkdir -p "$out"
[[ -n ${KEEP:-} ]] || trap 'rm -rf "$out"' EXIT

# One thread: the bench's pairs always start with a 1-thread side; with
# threads = 1 the N side is left out by profiling a 2-thread row and
# counting the first side's thread only (perf script names each sample's
# thread: the 1-thread side starts first, so its thread has the lowest id
# of the worker threads).
row_threads=$threads
[ "$threads" -gt 1 ] || row_threads=2
perf record -q -F 999 --call-graph=dwarf,16384 -o "$out/perf.data" \
  "$bin" --work_us="$work_us" --batch="$batch" --threads="$row_threads" \
  --rounds=1 --duration=4s $rows --dir="$out" >"$out/table.txt" \
  2>"$out/perf.txt"
perf script -F comm,tid,ip,sym -i "$out/perf.data" 2>/dev/null \
  >"$out/stacks.txt"

# One sample per blank-line-separated stack; its first line names the
# thread ("<comm> <tid>"), the others are frames.
awk -v json="$json" -v work="$work_us" -v batch="$batch" \
    -v threads="$threads" -v sharded="$sharded" '
  function flush() {
    # One thread: only the 1-thread side; sharded: only the N-thread side
    # (the 1-thread side runs on one shard); otherwise both.
    mine = threads == 1 ? tid == first : (sharded == "" || tid != first)
    if (call && mine) {
      ++calls
      if (spin) ++spins
      else if (serial) ++serials
    }
    call = serial = spin = 0
    header = 1
  }
  BEGIN { header = 1; first = -1 }
  /^$/ { flush(); next }
  header { tid = $2; header = 0; next }
  /EngineImpl::ProcessBatch/ {
    call = 1
    if (first < 0 || tid + 0 < first + 0) first = tid
  }
  /CommitQueue::SpinBriefly/ { spin = 1 }
  /rocksdb::DBImpl::WriteImpl|EngineImpl::QueueCommit|MergeBatches|StateVersions::/ {
    if (sharded == "") serial = 1
  }
  /SpinLock/ { serial = 1 }
  END {
    flush()
    if (calls == 0) {
      print "serial_share.sh: no sample inside Engine::ProcessBatch" > "/dev/stderr"
      exit 1
    }
    s = serials / calls
    n2 = 1 / (s + (1 - s) / 2)
    n16 = 1 / (s + (1 - s) / 16)
    n32 = 1 / (s + (1 - s) / 32)
    if (json == "true") {
      printf "{\"work_us\": %d, \"batch\": %d, \"threads\": %d, " \
             "\"sharded\": %s, " \
             "\"samples_in_call\": %d, \"serial_fraction\": %.4f, " \
             "\"spin_wait_share\": %.4f, \"amdahl_2\": %.2f, " \
             "\"amdahl_16\": %.2f, \"amdahl_32\": %.2f}\n", work, batch,
             threads, sharded == "" ? "false" : "true", calls, s,
             spins / calls, n2, n16, n32
      exit 0
    }
    printf "idem kBuffered, W = %d us, batch %d, %d thread(s)%s\n", work,
           batch, threads, sharded == "" ? "" : ", a shard each"
    printf "samples inside Engine::ProcessBatch: %d\n", calls
    printf "serial (one thread at a time): %.1f%%; spinning for a group: %.1f%%\n",
           100 * s, 100 * spins / calls
    printf "Amdahl: S(2) = %.2fx, S(16) = %.2fx, S(32) = %.2fx\n", n2, n16, n32
  }' "$out/stacks.txt"
