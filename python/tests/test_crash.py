"""Crash test from Python: a worker process consuming the ledger stream
through idem (crash_worker.py) is SIGKILLed mid-stream several times and
restarted on the same store; at the end every payment must have been
applied exactly once, and no message whose batch the worker acknowledged
may have been lost (a restart resumes after every acknowledged offset)."""

import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import idem
import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "examples" / "python"))
import ledger  # noqa: E402

MESSAGES = 3000
BATCH = 25
KILLS = 10


def start_worker(store, messages, ack_early, buffered):
    args = [sys.executable, str(HERE / "crash_worker.py"), store,
            str(messages), str(BATCH)]
    if ack_early:
        args.append("--ack-early")
    if buffered:
        args.append("--buffered")
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ))


def read_line(worker, deadline):
    if time.monotonic() > deadline:
        raise AssertionError("the worker made no progress in time")
    line = worker.stdout.readline()
    if not line:
        raise AssertionError(f"the worker exited early: {worker.wait()}")
    return line.split()


def run_cycles(store, rng, messages=MESSAGES, ack_early=False,
               buffered=False):
    """Runs KILLS killed workers and one to the end; returns the problems
    found (acknowledged offsets a restart did not resume after, then the
    ledger's)."""
    problems = []
    acked = -1
    for cycle in range(KILLS + 1):
        worker = start_worker(store, messages, ack_early, buffered)
        deadline = time.monotonic() + 120
        try:
            word, resume = read_line(worker, deadline)
            assert word == "resume"
            if int(resume) <= acked:
                problems.append(f"cycle {cycle}: resumed at {resume}, but "
                                f"offset {acked} was acknowledged")
            if cycle == KILLS:
                while (line := read_line(worker, deadline)) != ["done"]:
                    acked = int(line[1])
                assert worker.wait(timeout=60) == 0
                break
            # Let it acknowledge a few batches, then kill it inside one.
            for _ in range(rng.randint(1, 6)):
                line = read_line(worker, deadline)
                if line == ["done"]:
                    break
                acked = int(line[1])
            time.sleep(rng.uniform(0, 0.01))
        finally:
            if worker.poll() is None:
                worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=60)
            worker.stdout.close()
    with idem.Engine.open(store) as engine:
        problems += ledger.check(engine, ledger.stream(messages))
        if engine.committed_offset(ledger.SOURCE) != messages - 1:
            problems.append("the stream's last offset was not committed")
    return problems


@pytest.mark.parametrize("durability", ["sync", "buffered"])
def test_sigkilled_worker_applies_every_payment_exactly_once(store,
                                                             durability):
    """Under "buffered" the worker acknowledges once wait_durable returns."""
    assert run_cycles(store, random.Random(7),
                      buffered=durability == "buffered") == []


def test_acknowledging_before_the_commit_is_caught(store):
    """The twin: a worker that acknowledges a batch before committing it
    loses acknowledged messages when killed, and the check says so."""
    problems = run_cycles(store, random.Random(7), messages=300,
                          ack_early=True)
    assert any("was acknowledged" in p for p in problems), problems
