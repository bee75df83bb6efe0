#!/usr/bin/env python3
"""The CPU a broker adapter adds per message, over several runs.

Runs build/bench/idem_<broker>_bench (bench/<broker>_consumer_bench.cc) with
batch 500 a number of times. Each run measures, on one private server:
  idem      BM_IdemBuffered/500  idem's consumer, kBuffered, one WaitDurable
                                 per batch
  ack_each  BM_PlainAckEach/500  a plain loop acknowledging each message
  ack_batch BM_PlainAckBatch/500 a plain loop acknowledging each batch
  engine    BM_EngineOnly/500    the same messages straight to the engine
Per message: the benchmark process's CPU time (user + sys of all its
threads; the server is a process of its own) / the messages of an iteration.
What the adapter adds, within each run: idem - ack_batch - engine (the
target's figure), and idem - ack_each - engine beside it. Reports every
run and the medians; progress on stderr.

Usage: bench/adapter_cost.py nats|redis|rabbitmq [--runs N] [--json]
       [--build DIR]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

BENCHMARKS = {
    "idem": "BM_IdemBuffered/500",
    "ack_each": "BM_PlainAckEach/500",
    "ack_batch": "BM_PlainAckBatch/500",
    "engine": "BM_EngineOnly/500",
}
# bench/broker_bench.h: kBrokerBenchMessages.
MESSAGES_PER_ITERATION = 20000


def run_once(binary):
    """One run of the four benchmarks; µs of CPU per message of each."""
    pattern = "BM_(IdemBuffered|PlainAckEach|PlainAckBatch|EngineOnly)/500/"
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(
            [binary, "--benchmark_filter=" + pattern,
             "--benchmark_out=" + out.name, "--benchmark_out_format=json"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)
        rows = {b["name"].split("/iterations")[0]: b
                for b in json.load(out)["benchmarks"]}
    picked = {}
    for key, name in BENCHMARKS.items():
        row = next((row for row_name, row in rows.items()
                    if row_name.startswith(name)), None)
        if row is None or row.get("error_occurred"):
            reason = row.get("error_message") if row else "missing"
            raise RuntimeError(f"{name} did not run: {reason}")
        if row["time_unit"] != "ms":
            raise RuntimeError(f"{name}: unexpected unit {row['time_unit']}")
        picked[key] = row
    per_message = {key: row["cpu_time"] * 1000.0 / MESSAGES_PER_ITERATION
                   for key, row in picked.items()}
    # Messages per second of idem over the batched-ack loop's.
    per_message["wall_ratio_to_ack_batch"] = (
        picked["ack_batch"]["real_time"] / picked["idem"]["real_time"])
    per_message["own_less_ack_batch"] = (
        per_message["idem"] - per_message["ack_batch"] - per_message["engine"])
    per_message["own_less_ack_each"] = (
        per_message["idem"] - per_message["ack_each"] - per_message["engine"])
    return per_message


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("broker", choices=["nats", "redis", "rabbitmq"])
    parser.add_argument("--runs", type=int, default=5,
                        help="runs of the four benchmarks (default 5)")
    parser.add_argument("--build", default="build",
                        help="the build directory (default build)")
    parser.add_argument("--json", action="store_true",
                        help="print the report as one JSON object")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    binary = os.path.join(args.build, "bench", f"idem_{args.broker}_bench")
    if not os.access(binary, os.X_OK):
        print(f"adapter_cost: build {binary} first "
              f"(target idem_{args.broker}_bench)", file=sys.stderr)
        return 1
    runs = []
    for i in range(args.runs):
        try:
            runs.append(run_once(binary))
        except subprocess.CalledProcessError as e:
            print(f"adapter_cost: run {i + 1} failed: {e}\n{e.stderr}",
                  file=sys.stderr)
            return 1
        except RuntimeError as e:
            print(f"adapter_cost: run {i + 1} failed: {e}", file=sys.stderr)
            return 1
        print(f"adapter_cost: run {i + 1}/{args.runs}: the adapter's own "
              f"{runs[-1]['own_less_ack_batch']:.2f} µs per message",
              file=sys.stderr)
    keys = list(runs[0].keys())
    medians = {k: statistics.median(r[k] for r in runs) for k in keys}
    report = {"broker": args.broker, "unit": "µs of CPU per message",
              "runs": runs, "median": medians,
              "runs_at_or_below_1us": sum(
                  r["own_less_ack_batch"] <= 1.0 for r in runs)}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.broker}: µs of CPU per message, {args.runs} runs, batch 500")
    print(f"{'':28}{'median':>8}{'min':>8}{'max':>8}")
    for k in keys:
        values = [r[k] for r in runs]
        print(f"{k:28}{medians[k]:8.2f}{min(values):8.2f}{max(values):8.2f}")
    print(f"runs with the adapter's own (less ack_batch) at or below 1 µs: "
          f"{report['runs_at_or_below_1us']} of {args.runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
