"""Threads, the GIL and reference counting in the idem package."""

import gc
import os
import subprocess
import sys
import textwrap
import threading
import time

import idem
import pytest


def test_handlers_of_two_threads_overlap(engine):
    """Two threads' handlers that sleep run at the same time: the engine
    releases the GIL outside handlers, and time.sleep inside them."""
    spans = {}

    def handler(txn, message):
        start = time.monotonic()
        time.sleep(0.3)
        spans[message.id] = (start, time.monotonic())
        txn.put(b"k:" + message.id, b"1")

    threads = [
        threading.Thread(target=engine.process, args=(name, handler))
        for name in ("a", "b")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    (a_start, a_end), (b_start, b_end) = spans[b"a"], spans[b"b"]
    assert a_start < b_end and b_start < a_end, spans
    assert engine.get_state("k:a") == b"1" and engine.get_state("k:b") == b"1"


def test_concurrent_increments_from_threads_are_serializable(engine):
    """Handlers of parallel process calls that read and write one key: the
    engine reruns a handler whose read another commit changed, so no
    increment is lost."""
    threads, per_thread = 4, 40

    def increment(txn, message):
        value = int(txn.get("count") or b"0")
        time.sleep(0.001)  # widen the window between read and commit
        txn.put("count", str(value + 1).encode())

    def work(t):
        for i in range(per_thread):
            engine.process(f"{t}-{i}", increment)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert engine.get_state("count") == str(threads * per_thread).encode()


# Thread a's handler waits for an event; thread b delivers the same ID, so
# the engine makes b wait for a's outcome; then the main thread sets the
# event. The engine must not hold the GIL while b waits, or the main thread
# never runs again. Run in a child process, since the broken variant hangs.
SAME_ID_SCENARIO = textwrap.dedent("""
    import sys, threading, time
    import idem
    from idem import _idem
    _idem._set_release_gil_for_testing(sys.argv[2] == "release")
    engine = idem.Engine.open(sys.argv[1])
    started, go, calling = (threading.Event(), threading.Event(),
                            threading.Event())
    outcomes = {}
    def slow(txn, message):
        started.set()
        go.wait(60)
        txn.put("k", b"1")
    def deliver(name, handler):
        if name == "b":
            calling.set()
        outcomes[name] = engine.process("same-id", handler).outcome
    a = threading.Thread(target=deliver, args=("a", slow))
    a.start()
    started.wait(60)
    b = threading.Thread(target=deliver, args=("b", slow))
    b.start()
    calling.wait(60)
    time.sleep(0.3)  # b enters the engine and waits for a's outcome
    go.set()
    a.join(); b.join()
    assert outcomes == {"a": idem.Outcome.PROCESSED,
                        "b": idem.Outcome.DUPLICATE}, outcomes
    print("ok")
""")


def run_same_id_scenario(store, mode, timeout):
    return subprocess.run(
        [sys.executable, "-c", SAME_ID_SCENARIO, store, mode],
        capture_output=True, text=True, timeout=timeout,
        env=dict(os.environ))


def test_engine_releases_the_gil_while_a_delivery_waits(store):
    done = run_same_id_scenario(store, "release", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_holding_the_gil_while_waiting_would_deadlock(store):
    """The twin of the test above: with the GIL kept through the engine
    call (a broken build), the same scenario hangs."""
    with pytest.raises(subprocess.TimeoutExpired):
        run_same_id_scenario(store, "hold", timeout=5)


def test_a_handler_that_empties_the_batch_list_does_not_free_messages(engine):
    messages = [idem.Message(f"m{i}", b"x" * 100) for i in range(50)]
    ids = [m.id for m in messages]

    def handler(txn, message):
        messages.clear()
        gc.collect()
        txn.put(message.id, message.payload)

    results = engine.process_batch(messages, handler)
    assert len(results) == 50
    assert all(engine.get_state(i) == b"x" * 100 for i in ids)


def test_calls_leak_no_references(engine):
    def handler(txn, message):
        txn.put("k", message.payload)

    message = idem.Message("m", b"p")
    before = (sys.getrefcount(handler), sys.getrefcount(message))
    for i in range(200):
        engine.process(f"id{i}", handler, payload=b"p")
        engine.process_batch([message], handler)
        engine.process("fails", lambda t, m: 1 / 0)
    gc.collect()
    assert (sys.getrefcount(handler), sys.getrefcount(message)) == before


def test_results_and_messages_outlive_their_engine(store):
    engine = idem.Engine.open(store)
    message = idem.Message("a", b"1")
    results = engine.process_batch(
        [message, idem.Message("b")],
        lambda t, m: t.set_result(b"r") if m.id == b"a" else 1 / 0)
    engine.close()
    del engine
    gc.collect()
    assert results[0].value == b"r"
    assert isinstance(results[1].error, ZeroDivisionError)
    assert message.payload == b"1"


def test_an_engine_dropped_without_close_releases_its_store(store):
    engine = idem.Engine.open(store)
    engine.process("a", lambda t, m: t.put("k", b"1"))
    del engine
    gc.collect()
    with idem.Engine.open(store) as again:
        assert again.get_state("k") == b"1"


def test_close_waits_for_a_call_in_progress_on_another_thread(store):
    engine = idem.Engine.open(store)
    started = threading.Event()
    outcome = []

    def slow(txn, message):
        started.set()
        time.sleep(0.3)
        txn.put("k", b"1")

    t = threading.Thread(
        target=lambda: outcome.append(engine.process("a", slow).outcome))
    t.start()
    started.wait(30)
    engine.close()
    t.join(30)
    assert outcome == [idem.Outcome.PROCESSED]
    with idem.Engine.open(store) as again:
        assert again.get_state("k") == b"1"
