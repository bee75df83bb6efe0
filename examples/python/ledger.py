#!/usr/bin/env python3
"""The demo's ledger in Python: payments between accounts, through idem.

A seeded stream of payments ("<from> <to> <amount>"), about 10% of them
delivered again at a later offset (as a broker redelivers after a crash or a
rebalance), is processed in batches. Each payment moves money between two
balances in the engine's state and marks itself applied, in the same atomic
commit as its dedupe record and the stream's offset. At the end the ledger
is checked against the sum of the unique payments: every payment applied
exactly once, whatever was redelivered.

    python3 examples/python/ledger.py [--store DIR] [--messages N]

The functions are also what python/tests/crash_worker.py runs, SIGKILLed
mid-stream, in the package's crash test.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from typing import Iterator, NamedTuple

import idem

SOURCE = "ledger"
ACCOUNTS = 20


class Delivery(NamedTuple):
    offset: int
    id: str
    payload: bytes


def stream(count: int, seed: int = 1) -> list[Delivery]:
    """``count`` deliveries (offsets 0..count-1): payments, about 10% of
    them redeliveries of an earlier payment with the same ID and payload."""
    rng = random.Random(seed)
    deliveries: list[Delivery] = []
    payments = 0
    for offset in range(count):
        if deliveries and rng.random() < 0.1:
            earlier = deliveries[rng.randrange(len(deliveries))]
            deliveries.append(Delivery(offset, earlier.id, earlier.payload))
            continue
        source, target = rng.sample(range(ACCOUNTS), 2)
        amount = rng.randint(1, 100)
        payload = f"{source} {target} {amount}".encode()
        deliveries.append(Delivery(offset, f"payment-{payments}", payload))
        payments += 1
    return deliveries


def apply_payment(txn: idem.Txn, message: idem.Message) -> None:
    """The handler: moves the amount and marks the payment applied (a
    counter, so a second application would show)."""
    source, target, amount = (int(f) for f in message.payload.split())
    for account, delta in ((source, -amount), (target, amount)):
        key = f"balance/{account}"
        txn.put(key, str(int(txn.get(key) or b"0") + delta).encode())
    applied = b"applied/" + message.id
    txn.put(applied, str(int(txn.get(applied) or b"0") + 1).encode())
    txn.set_result(b"ok")


def batches(deliveries: list[Delivery], size: int) -> Iterator[list[idem.Message]]:
    for start in range(0, len(deliveries), size):
        yield [
            idem.Message(d.id, d.payload, source=SOURCE, offset=d.offset)
            for d in deliveries[start:start + size]
        ]


def resume_offset(engine: idem.Engine) -> int:
    """Where to resume: the offset after the last committed one."""
    committed = engine.committed_offset(SOURCE)
    return 0 if committed is None else committed + 1


def expected_balances(deliveries: list[Delivery]) -> dict[int, int]:
    balances = {a: 0 for a in range(ACCOUNTS)}
    seen: set[str] = set()
    for d in deliveries:
        if d.id in seen:
            continue
        seen.add(d.id)
        source, target, amount = (int(f) for f in d.payload.split())
        balances[source] -= amount
        balances[target] += amount
    return balances


def check(engine: idem.Engine, deliveries: list[Delivery]) -> list[str]:
    """What is wrong with the ledger in ``engine`` after all of
    ``deliveries`` (empty when every payment was applied exactly once)."""
    problems = []
    for account, want in expected_balances(deliveries).items():
        got = int(engine.get_state(f"balance/{account}") or b"0")
        if got != want:
            problems.append(f"account {account}: balance {got}, want {want}")
    for payment in sorted({d.id for d in deliveries}):
        applied = engine.get_state(f"applied/{payment}")
        if applied != b"1":
            problems.append(f"{payment} applied {applied!r} times, want 1")
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", help="store directory (default: a new "
                        "temporary one)")
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args(argv)
    if args.messages < 1 or args.batch < 1:
        parser.error("--messages and --batch must be >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        path = args.store or f"{tmp}/store"
        deliveries = stream(args.messages)
        counts = {outcome: 0 for outcome in idem.Outcome.__members__.values()}
        with idem.Engine.open(path) as engine:
            start = resume_offset(engine)
            for batch in batches(deliveries[start:], args.batch):
                for result in engine.process_batch(batch, apply_payment):
                    counts[result.outcome] += 1
            problems = check(engine, deliveries)
        print(f"ledger: {args.messages} deliveries from offset {start}: "
              f"{counts[idem.Outcome.PROCESSED]} processed, "
              f"{counts[idem.Outcome.DUPLICATE]} duplicates, "
              f"{counts[idem.Outcome.FAILED]} failed")
    for p in problems:
        print(f"ledger: {p}", file=sys.stderr)
    print("ledger: every payment applied exactly once" if not problems else
          "ledger: CHECK FAILED")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
