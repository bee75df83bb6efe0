#!/usr/bin/env bash
# How much of idem's commit path runs one thread at a time: the share of the
# CPU time inside Engine::ProcessBatch that is spent in the group write
# (rocksdb::DBImpl::WriteImpl, which the commit queue's leader runs for every
# commit of its group while no other group can write), split into its
# write-ahead-log part and its memtable part. By Amdahl's law that share s
# bounds what n threads of the same CPU-bound work can reach over one:
# 1 / (s + (1 - s) / n), before any cost of handing commits over.
#
# Samples idem-peers-bench's one-client idem rows of that batch size with
# `perf record` and DWARF call graphs: the never-synced row (kBuffered
# without waiting) with all the deliveries, the rows that sync once per
# message with 100. Samples inside a sync (fdatasync) are left out: waiting
# for the disk is not work that a second thread could share. Samples of
# RocksDB's background threads, the store's opening and the benchmark's
# final checks fall outside Engine::ProcessBatch and do not count. On-CPU time, kernel time included (the log's write(2)); the share
# does not depend much on what else runs, the rates do.
# Usage: bench/peers/serial_share.sh [--json] [batch] [messages]
#   bench/peers/serial_share.sh             # one message per call, 400,000
#   bench/peers/serial_share.sh 500 500000  # polls of 500
# Needs perf (linux-perf, installed if missing); the binary is
# ${PEERS_BENCH:-build/bench/peers/idem-peers-bench}. Set KEEP=dir to keep
# the profile. Exit code 0, 1 if the profile held no sample of the call,
# 2 for bad arguments.
set -euo pipefail
cd "$(dirname "$0")/../.."
json=false
case "${1:-}" in
  -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  --json) json=true; shift ;;
esac
batch=${1:-1}
messages=${2:-400000}
for n in "$batch" "$messages"; do
  if ! [[ $n =~ ^[1-9][0-9]*$ ]]; then
    echo "serial_share.sh: batch and messages must be positive whole" \
      "numbers, got '$n' (see --help)" >&2
    exit 2
  fi
done
# The batched rows take --batch; with batch 1 they would be one-message
# rows that sync each message, so they keep another size and are left out.
batch_rows=$batch
[ "$batch" -ne 1 ] || batch_rows=2
command -v perf >/dev/null || scripts/install-deps.sh linux-perf
bin=${PEERS_BENCH:-build/bench/peers/idem-peers-bench}
out=${KEEP:-$(mktemp -d)}
mkdir -p "$out"
[[ -n ${KEEP:-} ]] || trap 'rm -rf "$out"' EXIT

perf record -q -F 999 --call-graph=dwarf,16384 -o "$out/perf.data" \
  "$bin" --only=idem --only_batch="$batch" --batch="$batch_rows" \
  --messages="$messages" --slow_messages=100 --clients=0 --rounds=1 \
  --duration=100000s --dir="$out/stores" >"$out/table.txt" 2>"$out/perf.txt"
perf script -i "$out/perf.data" 2>/dev/null >"$out/stacks.txt"

# One sample per blank-line-separated stack. A frame line is
# "<address> <symbol>+<offset> (<object>)".
awk -v json="$json" -v batch="$batch" -v messages="$messages" '
  function flush() {
    if (call && !sync) {
      ++calls
      if (write) { ++writes; if (wal) ++wals; else if (mem) ++mems }
    }
    call = write = wal = mem = sync = 0
  }
  /^$/ { flush(); next }
  /EngineImpl::ProcessBatch/ { call = 1 }
  /rocksdb::DBImpl::WriteImpl/ { write = 1 }
  /rocksdb::DBImpl::WriteToWAL/ { wal = 1 }
  /rocksdb::WriteBatchInternal::InsertInto/ { mem = 1 }
  /fdatasync|fsync/ { sync = 1 }
  END {
    flush()
    if (calls == 0) {
      print "serial_share.sh: no sample inside Engine::ProcessBatch" > "/dev/stderr"
      exit 1
    }
    s = writes / calls
    two = 1 / (s + (1 - s) / 2)
    sixteen = 1 / (s + (1 - s) / 16)
    if (json == "true") {
      printf "{\"batch\": %d, \"messages\": %d, \"samples_in_call\": %d, " \
             "\"group_write_share\": %.3f, \"wal_share\": %.3f, " \
             "\"memtable_share\": %.3f, \"amdahl_bound_2_threads\": %.2f, " \
             "\"amdahl_bound_16_threads\": %.2f}\n", batch, messages, calls,
             s, wals / calls, mems / calls, two, sixteen
      exit 0
    }
    printf "idem kBuffered (no wait), batch %d, %d deliveries, 1 client\n",
           batch, messages
    printf "samples inside Engine::ProcessBatch: %d\n", calls
    printf "in the group write (one thread at a time): %.1f%%\n", 100 * s
    printf "  of which the write-ahead log: %.1f%%, the memtables: %.1f%%\n",
           100 * wals / calls, 100 * mems / calls
    printf "Amdahl bound over 1 thread: %.2fx with 2 threads, %.2fx with 16\n",
           two, sixteen
  }' "$out/stacks.txt"
