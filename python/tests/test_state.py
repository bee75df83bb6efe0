"""The idem package's state calls beyond single keys (docs/state.md): scans
in a handler and of the committed state, merges, range deletions, and their
errors."""

import threading

import idem
import pytest


def seed(engine, **values):
    def put_all(txn, message):
        for key, value in values.items():
            txn.put(key, value)
    engine.process("seed-" + ",".join(values), put_all)


def test_scan_sees_own_writes_and_the_store_in_order(engine):
    seed(engine, a=b"1", b=b"2", c=b"3", d=b"4")
    seen = {}

    def handler(txn, message):
        txn.delete("b")
        txn.put("bb", b"9")
        seen["range"] = txn.scan("a", "d")
        seen["reverse"] = txn.scan("b", reverse=True, limit=2)
        seen["prefix"] = txn.scan_prefix(b"b")

    result = engine.process("scan", handler)
    assert result.outcome == idem.Outcome.PROCESSED
    assert seen["range"] == [(b"a", b"1"), (b"bb", b"9"), (b"c", b"3")]
    assert seen["reverse"] == [(b"d", b"4"), (b"c", b"3")]
    assert seen["prefix"] == [(b"bb", b"9")]
    assert engine.scan_state() == [(b"a", b"1"), (b"bb", b"9"),
                                   (b"c", b"3"), (b"d", b"4")]
    assert engine.scan_state("b", "d", reverse=True) == [(b"c", b"3"),
                                                         (b"bb", b"9")]
    assert engine.scan_state(limit=1) == [(b"a", b"1")]


def test_bad_scan_ranges_raise_invalid_argument(engine):
    errors = []

    def handler(txn, message):
        with pytest.raises(idem.InvalidArgument):
            txn.scan("b", "a")
        errors.append("raised")

    engine.process("bad-scan", handler)
    assert errors == ["raised"]
    with pytest.raises(idem.InvalidArgument):
        engine.scan_state("b", "a")
    with pytest.raises(TypeError):
        engine.scan_state(42)


def test_merges_fold_and_never_conflict(engine):
    def bump(txn, message):
        txn.merge("hits", idem.MergeOp.ADD_INT64, 1)
        txn.merge("top", idem.MergeOp.MAX_INT64, int(message.payload))
        txn.merge("log", idem.MergeOp.APPEND, message.payload + b";")

    threads = [threading.Thread(
        target=lambda i=i: engine.process(f"m{i}", bump,
                                          payload=str(i).encode()))
        for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert idem.read_int64(engine.get_state("hits")) == 8
    assert idem.read_int64(engine.get_state("top")) == 7
    assert sorted(engine.get_state("log").split(b";")[:-1]) == [
        str(i).encode() for i in range(8)]
    assert engine.stats().handler_reruns == 0
    seen = []
    engine.process("read", lambda txn, m: seen.append(txn.get("hits")))
    assert seen == [idem.int64_operand(8)]


def test_bad_merges_raise_and_fail_the_message(engine):
    def handler(txn, message):
        txn.put("written", b"x")
        with pytest.raises(idem.InvalidArgument):
            txn.merge("n", idem.MergeOp.MAX_INT64, b"short")

    result = engine.process("bad-merge", handler)
    assert result.outcome == idem.Outcome.FAILED
    assert isinstance(result.error, idem.InvalidArgument)
    assert engine.get_state("written") is None


def test_delete_range_removes_its_range(engine):
    seed(engine, a=b"1", b=b"2", b1=b"3", c=b"4")
    engine.process("range", lambda txn, m: txn.delete_range("b", "c"))
    assert engine.scan_state() == [(b"a", b"1"), (b"c", b"4")]

    def bad(txn, message):
        with pytest.raises(idem.InvalidArgument):
            txn.delete_range("b", "")

    assert engine.process("bad-range", bad).outcome == idem.Outcome.FAILED


def test_state_calls_on_a_kept_txn_raise(engine):
    kept = []
    engine.process("keep", lambda txn, m: kept.append(txn))
    (txn,) = kept
    for call in (lambda: txn.scan(""), lambda: txn.scan_prefix(""),
                 lambda: txn.merge("n", idem.MergeOp.APPEND, b"x"),
                 lambda: txn.delete_range("a", "b")):
        with pytest.raises(idem.FailedPrecondition):
            call()


def test_int64_helpers_round_trip():
    for v in (0, 1, -1, 2**63 - 1, -2**63):
        assert idem.read_int64(idem.int64_operand(v)) == v
    assert idem.read_int64(b"short") is None
    assert idem.read_int64(None) is None
