#!/usr/bin/env bash
# Where a peer's commit path spends its instructions, per delivery:
# callgrind over idem-peers-bench's rows of one peer and one batch size,
# counting only inside the peer's own call (idem: Engine::ProcessBatch,
# the handler and RocksDB calls included; rocksdb: the hand-written loop's
# Client::Run), not the benchmark's loop, store opening or final checks.
# Instruction counts do not depend on what else runs on the machine, so
# this is the figure to compare before and after a change to the commit
# path, and between idem and the loop; wall-clock rates come from
# idem-peers-bench itself.
# Usage: bench/peers/profile.sh [batch] [messages] [peer]
#   bench/peers/profile.sh 1 3000           # idem, one message per call
#   bench/peers/profile.sh 500 20000        # idem, polls of 500
#   bench/peers/profile.sh 1 50000 rocksdb  # the RocksDB loop
# peer: idem (default) or rocksdb. Every row runs all `messages` deliveries
# (the one-sync-per-message rows too, and no time cap cuts a row short).
# Prints each row's instructions per delivery, then the top functions by
# exclusive instructions over all rows. Needs valgrind; the binary is
# ${PEERS_BENCH:-build/bench/peers/idem-peers-bench}. Set KEEP=dir to keep
# the profiles.
set -euo pipefail
cd "$(dirname "$0")/../.."
case "${1:-}" in
  -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
batch=${1:-1}
messages=${2:-3000}
peer=${3:-idem}
case "$peer" in
  idem) call='*EngineImpl::ProcessBatch*'; setup='*IdemTarget::Setup*' ;;
  rocksdb) call='*RocksClient::Run*'; setup='*RocksTarget::Setup*' ;;
  *) echo "profile.sh: peer must be idem or rocksdb, got '$peer'" >&2; exit 2 ;;
esac
bin=${PEERS_BENCH:-build/bench/peers/idem-peers-bench}
out=${KEEP:-$(mktemp -d)}
mkdir -p "$out"
[[ -n ${KEEP:-} ]] || trap 'rm -rf "$out"' EXIT

# A dump before each row's setup: part k+1 holds row k, the last file the
# last row. Names uncompressed, so that each part reads on its own.
valgrind --tool=callgrind --toggle-collect="$call" --dump-before="$setup" \
  --compress-strings=no --compress-pos=no \
  --callgrind-out-file="$out/callgrind.out" "$bin" --only="$peer" \
  --only_batch="$batch" --batch="$batch" --messages="$messages" \
  --slow_messages="$messages" --clients=0 --rounds=1 --duration=100000s \
  --dir="$out/stores" >"$out/table.txt" 2>"$out/valgrind.txt"

mapfile -t rows < <(grep "^| $peer" "$out/table.txt" |
  awk -F'|' '{ gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $3);
               print $2 " (" $3 ")" }')
parts=()
for ((k = 2; k <= ${#rows[@]}; ++k)); do parts+=("$out/callgrind.out.$k"); done
parts+=("$out/callgrind.out")
echo "$peer, batch $batch, $messages deliveries per row:" \
  "instructions per delivery inside the peer's call"
for i in "${!rows[@]}"; do
  total=$(awk '/^summary:/ { print $2 }' "${parts[$i]}")
  printf '%8d  %s\n' $((total / messages)) "${rows[$i]}"
done
echo
# Exclusive instructions per function over every row, as shares of the
# total: a cost line belongs to the last fn= above it, except the line
# after calls=, which is the callee's inclusive cost.
awk '/^fn=/ { fn = substr($0, 4); call = 0; next }
     /^calls=/ { call = 1; next }
     /^[0-9+-]/ { if (!call) { self[fn] += $2; total += $2 }; call = 0; next }
     END { for (f in self) printf "%5.1f%%  %s\n", 100 * self[f] / total, f }' \
  "${parts[@]}" | sort -rn | head -25 | cut -c1-160
