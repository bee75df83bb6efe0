"""A worker process for test_crash.py: consumes the ledger stream
(examples/python/ledger.py) through idem from where the store's committed
offset says, one batch at a time, and after each batch's process_batch
returns (kSync: durable) prints "acked <last offset>" as a consumer would
acknowledge it to its broker. Prints "resume <offset>" first and "done" at
the end of the stream. The test SIGKILLs it mid-stream.

    crash_worker.py STORE MESSAGES BATCH [--ack-early] [--buffered]

--buffered opens the engine with durability "buffered" and acknowledges a
batch once engine.wait_durable() returns.

--ack-early is a broken worker for the test's twin: it acknowledges a batch
before processing it (and pauses between the two), so a kill loses
acknowledged messages.
"""

import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] /
                       "examples" / "python"))

import idem  # noqa: E402
import ledger  # noqa: E402


def main(store, messages, batch, ack_early, buffered):
    deliveries = ledger.stream(messages)
    durability = "buffered" if buffered else "sync"
    with idem.Engine.open(store, durability=durability) as engine:
        start = ledger.resume_offset(engine)
        print(f"resume {start}", flush=True)
        for chunk in ledger.batches(deliveries[start:], batch):
            last = chunk[-1].offset
            if ack_early:
                print(f"acked {last}", flush=True)
                time.sleep(0.2)
            engine.process_batch(chunk, ledger.apply_payment)
            if buffered:
                engine.wait_durable()
            if not ack_early:
                print(f"acked {last}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
         "--ack-early" in sys.argv[4:], "--buffered" in sys.argv[4:])
