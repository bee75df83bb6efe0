#!/usr/bin/env python3
"""The Python package's cost, in one run, with its ratios:

  1. idem from Python, process_batch of 500 new messages with a handler
     that does one txn.put, against the C++ engine's rate for the same work
     (build/bench/idem_c_api_bench, BM_Cpp/put:1), under durability "sync"
     (one fsync per batch) and "buffered" (no fsync: the CPU cost alone);
  2. the same from Python against what a Python user would write instead:
     the inbox pattern on sqlite3 (INSERT OR IGNORE of the ID plus the state
     update per message, one transaction per batch of 500, WAL,
     synchronous=FULL: like idem's "sync", each batch is on disk, one
     fsync of the log, before the next starts), in alternating rounds, by
     the wall clock and by the calling thread's CPU time per message;
  3. an empty handler from Python against C++ (BM_Cpp/put:0): the
     per-message overhead in microseconds, under both durabilities;
  4. the C API against C++ (BM_CApi against BM_Cpp), from the same binary.

Each Python figure is the best of --rounds rounds of --messages messages on
a fresh store; each batch's messages are built before the clock starts for
it, as the C++ benchmark builds its batches outside the timing. Run from
the checkout after building build/ with -DIDEM_BUILD_PYTHON=ON and
-DIDEM_BUILD_BENCH=ON:

    PYTHONPATH=build/python python3 bench/python/bench.py
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sqlite3
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

import idem

BATCH = 500
VALUE = b"v:0123456789"


class Round(NamedTuple):
    rate: float  # messages per second, wall clock
    cpu_us: float  # CPU time of the calling thread per message


class Clock:
    """Adds up the wall-clock and calling-thread CPU time of its blocks."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    def __enter__(self) -> None:
        self._wall = time.perf_counter()
        self._cpu = time.thread_time()

    def __exit__(self, *exc) -> None:
        self.cpu += time.thread_time() - self._cpu
        self.wall += time.perf_counter() - self._wall

    def round(self, messages: int) -> Round:
        return Round(messages / self.wall, self.cpu * 1e6 / messages)


def put(txn, message):
    txn.put(message.id, VALUE)


def empty(txn, message):
    pass


def idem_round(handler, durability: str, messages: int) -> Round:
    with tempfile.TemporaryDirectory() as tmp:
        with idem.Engine.open(f"{tmp}/store",
                              durability=durability) as engine:
            clock = Clock()
            for first in range(0, messages, BATCH):
                batch = [idem.Message(f"m{i}")
                         for i in range(first, first + BATCH)]
                with clock:
                    engine.process_batch(batch, handler)
    return clock.round(messages)


def sqlite_round(messages: int) -> Round:
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite3.connect(f"{tmp}/inbox.db", isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE inbox (id TEXT PRIMARY KEY)")
        db.execute("CREATE TABLE state (key TEXT PRIMARY KEY, value BLOB)")
        clock = Clock()
        for first in range(0, messages, BATCH):
            batch = [f"m{i}" for i in range(first, first + BATCH)]
            with clock:
                db.execute("BEGIN")
                for message_id in batch:
                    cursor = db.execute(
                        "INSERT OR IGNORE INTO inbox (id) VALUES (?)",
                        (message_id,))
                    if cursor.rowcount == 1:  # new: apply its effect
                        db.execute(
                            "INSERT OR REPLACE INTO state (key, value) "
                            "VALUES (?, ?)", (message_id, VALUE))
                db.execute("COMMIT")  # synchronous=FULL: fsyncs the WAL
        db.close()
    return clock.round(messages)


def best(rounds: list[Round]) -> Round:
    return Round(max(r.rate for r in rounds),
                 min(r.cpu_us for r in rounds))


def idem_rate(handler, durability: str, messages: int, rounds: int) -> Round:
    return best([idem_round(handler, durability, messages)
                 for _ in range(rounds)])


def against_sqlite(messages: int, rounds: int) -> tuple[Round, Round]:
    # Alternating rounds, so that a change in the machine's load (its fsync
    # latency above all) falls on both.
    py, lite = [], []
    for _ in range(rounds):
        lite.append(sqlite_round(messages))
        py.append(idem_round(put, "sync", messages))
    return best(py), best(lite)


def cpp_rates(binary: pathlib.Path, min_time: float) -> dict[str, float]:
    # Three repetitions of each, in random order, so that a change in the
    # machine's load (its fsync latency above all) spreads over both APIs;
    # the medians are compared.
    out = subprocess.run(
        [str(binary), f"--benchmark_min_time={min_time}",
         "--benchmark_repetitions=3",
         "--benchmark_enable_random_interleaving=true",
         "--benchmark_report_aggregates_only=true",
         "--benchmark_format=json"],
        check=True, capture_output=True, text=True).stdout
    rates = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"].split("/real_time")[0]
        rates[name] = b["items_per_second"]
        # Messages per second of the calling thread's CPU time: steadier
        # than the wall-clock rate on a loaded machine.
        rates[name + "/cpu"] = BATCH / (b["cpu_time"] * 1e-9)
    return rates


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=50000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min_time", type=float, default=1.0,
                        help="seconds per C++ benchmark and repetition")
    parser.add_argument("--bench_binary", default="build/bench/idem_c_api_bench")
    args = parser.parse_args(argv)
    if args.messages < BATCH or args.messages % BATCH:
        parser.error(f"--messages must be a positive multiple of {BATCH}")
    cpp = cpp_rates(pathlib.Path(args.bench_binary), args.min_time)
    py_sync, lite = against_sqlite(args.messages, args.rounds)
    for durability, flag in (("sync", 0), ("buffered", 1)):
        py = (py_sync if durability == "sync" else
              idem_rate(put, durability, args.messages, args.rounds))
        py_put = py.rate
        py_empty = idem_rate(empty, durability, args.messages,
                             args.rounds).rate
        cpp_put = cpp[f"BM_Cpp/put:1/buffered:{flag}"]
        cpp_empty = cpp[f"BM_Cpp/put:0/buffered:{flag}"]
        c_put = cpp[f"BM_CApi/put:1/buffered:{flag}"]
        c_empty = cpp[f"BM_CApi/put:0/buffered:{flag}"]
        rows = [
            ("C++ ProcessBatch, one Put", cpp_put),
            ("C API, one put", c_put),
            ("Python process_batch, one txn.put", py_put),
            ("C++ ProcessBatch, empty handler", cpp_empty),
            ("C API, empty handler", c_empty),
            ("Python process_batch, empty handler", py_empty),
        ]
        if durability == "sync":
            rows.append(("Python sqlite3 inbox (WAL, synchronous=FULL)",
                         lite.rate))
        print(f"batch {BATCH}, durability {durability}; messages/s")
        for name, rate in rows:
            print(f"  {name:<46} {rate:>12,.0f}")
        print(f"  Python put / C++ put:          {py_put / cpp_put:.2f}x")
        if durability == "sync":
            print(f"  Python idem / sqlite3 inbox:   "
                  f"{py_put / lite.rate:.2f}x")
            print(f"  CPU of the calling thread per message: Python idem "
                  f"{py.cpu_us:.2f} us, sqlite3 inbox {lite.cpu_us:.2f} us "
                  f"({lite.cpu_us / py.cpu_us:.2f}x)")
        print(f"  Python per-message overhead, empty handler: "
              f"{1e6 / py_empty - 1e6 / cpp_empty:+.2f} us "
              f"({1e6 / py_empty:.2f} against {1e6 / cpp_empty:.2f})")
        print(f"  C API cost over C++: put {(cpp_put / c_put - 1) * 100:+.1f}%"
              f", empty {(cpp_empty / c_empty - 1) * 100:+.1f}%")
        cpu = {k: cpp[f"{k}/put:1/buffered:{flag}/cpu"]
               for k in ("BM_Cpp", "BM_CApi")}
        print(f"  C API cost over C++ in the calling thread's CPU time, put: "
              f"{(cpu['BM_Cpp'] / cpu['BM_CApi'] - 1) * 100:+.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
