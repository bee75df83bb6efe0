#!/usr/bin/env bash
# Where the engine's commit path spends its instructions, per delivery:
# callgrind over idem-peers-bench's idem rows of one batch size, counting
# only inside Engine::ProcessBatch (the handler and RocksDB calls included;
# the benchmark's own loop, store opening and final checks excluded).
# Instruction counts do not depend on what else runs on the machine, so
# this is the figure to compare before and after a change to the commit
# path; wall-clock rates come from idem-peers-bench itself.
# Usage: bench/peers/profile.sh [batch] [messages]   (defaults: 1 3000)
#   bench/peers/profile.sh 1 3000      # one message per ProcessBatch
#   bench/peers/profile.sh 500 20000   # polls of 500
# Prints the instructions per delivery and the top functions by exclusive
# instructions. Needs valgrind; the binary is ${PEERS_BENCH:-
# build/bench/peers/idem-peers-bench}. Set KEEP=dir to keep the profile.
set -euo pipefail
cd "$(dirname "$0")/../.."
case "${1:-}" in
  -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
batch=${1:-1}
messages=${2:-3000}
bin=${PEERS_BENCH:-build/bench/peers/idem-peers-bench}
out=${KEEP:-$(mktemp -d)}
mkdir -p "$out"
[[ -n ${KEEP:-} ]] || trap 'rm -rf "$out"' EXIT

# Every idem row of this batch size, each over all `messages` deliveries
# (the one-sync-per-message rows too, and no time cap cuts a row short).
valgrind --tool=callgrind --toggle-collect='*EngineImpl::ProcessBatch*' \
  --callgrind-out-file="$out/callgrind.out" "$bin" --only=idem \
  --only_batch="$batch" --batch="$batch" --messages="$messages" \
  --slow_messages="$messages" --clients=0 --rounds=1 --duration=100000s \
  --dir="$out/stores" >"$out/table.txt" 2>"$out/valgrind.txt"

rows=$(grep -c '^| idem' "$out/table.txt")
total=$(callgrind_annotate "$out/callgrind.out" |
  awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
deliveries=$((rows * messages))
echo "batch $batch: $rows idem rows x $messages deliveries;" \
  "$((total / deliveries)) instructions per delivery in ProcessBatch"
echo
# Exclusive instructions per function, as a share of the total.
callgrind_annotate "$out/callgrind.out" |
  sed -n '/file:function/,$p' | sed -n '3,27p' | cut -c1-160
