"""Errors through the idem package: the exception hierarchy, handlers that
raise, bad input, and transactions used outside their handler."""

import threading

import idem
import pytest


def put_one(txn, message):
    txn.put(b"k:" + message.id, b"1")


def test_codes_map_to_the_exception_hierarchy():
    assert issubclass(idem.InvalidArgument, idem.Error)
    assert issubclass(idem.InvalidArgument, ValueError)
    assert issubclass(idem.Unavailable, idem.Error)
    names = {
        1: idem.Cancelled, 2: idem.Unknown, 3: idem.InvalidArgument,
        4: idem.DeadlineExceeded, 5: idem.NotFound, 6: idem.AlreadyExists,
        7: idem.PermissionDenied, 8: idem.ResourceExhausted,
        9: idem.FailedPrecondition, 10: idem.Aborted, 11: idem.OutOfRange,
        12: idem.Unimplemented, 13: idem.Internal, 14: idem.Unavailable,
        15: idem.DataLoss, 16: idem.Unauthenticated
    }
    for code, cls in names.items():
        assert cls.code == code
        assert issubclass(cls, idem.Error)


def test_bad_options_raise_invalid_argument(store):
    with pytest.raises(idem.InvalidArgument, match="dedupe_window"):
        idem.Engine.open(store, dedupe_window=0)
    with pytest.raises(idem.InvalidArgument, match="durability"):
        idem.Engine.open(store, durability="sometimes")
    with pytest.raises(idem.InvalidArgument):
        idem.Engine.open(store, bloom_bits_per_key=65)
    with pytest.raises(TypeError):
        idem.Engine.open(store, dedupe_window="1h")
    with pytest.raises(TypeError):
        idem.Engine.open(store, no_such_option=1)


def test_missing_store_without_create_is_not_found(store):
    with pytest.raises(idem.NotFound):
        idem.Engine.open(store, create_if_missing=False)


def test_second_writable_open_is_a_failed_precondition(engine, store):
    with pytest.raises(idem.FailedPrecondition):
        idem.Engine.open(store)


def test_closed_engine_refuses_every_call(store):
    engine = idem.Engine.open(store)
    engine.close()
    engine.close()  # again: nothing
    calls = [
        lambda: engine.process("a", put_one),
        lambda: engine.process_batch([idem.Message("a")], put_one),
        lambda: engine.get_state("k"),
        lambda: engine.seen("a"),
        lambda: engine.forget("a"),
        lambda: engine.committed_offset("t"),
        lambda: engine.wait_durable(),
        lambda: engine.wait_durable(1),
        lambda: engine.stats(),
        lambda: engine.read_outbox(),
        lambda: engine.ack_outbox(1),
    ]
    for call in calls:
        with pytest.raises(idem.FailedPrecondition, match="engine is closed"):
            call()


def test_bad_messages_are_rejected_before_the_handler_runs(engine):
    calls = []

    def handler(txn, message):
        calls.append(message)

    for kwargs in ({"id": ""}, {"id": "x" * 1025},
                   {"id": "a", "source": "s" * 1025},
                   {"id": "a", "source": "t", "offset": 0, "partition": -1},
                   {"id": "a", "source": "t", "offset": 2**63 - 1},
                   {"id": "a", "ttl": -1}):
        with pytest.raises(idem.InvalidArgument):
            engine.process(handler=handler, **kwargs)
    # One bad message rejects its whole batch.
    with pytest.raises(idem.InvalidArgument):
        engine.process_batch([idem.Message("ok"), idem.Message("")], handler)
    assert calls == []
    # The longest ID is fine.
    engine.process("x" * 1024, handler)
    assert len(calls) == 1


def test_negative_offset_records_no_position(engine):
    r = engine.process("a", put_one, source="t", offset=-5)
    assert r.outcome == idem.Outcome.PROCESSED
    assert engine.committed_offset("t") is None
    with pytest.raises(idem.InvalidArgument):
        engine.committed_offset("t", -1)
    with pytest.raises(idem.InvalidArgument):
        engine.committed_offset("")


def test_values_that_are_not_bytes_are_type_errors(engine):
    with pytest.raises(TypeError, match="payload must be bytes"):
        engine.process("a", put_one, payload="text")
    with pytest.raises(TypeError, match="payload must be bytes"):
        engine.process("a", put_one, payload=42)
    with pytest.raises(TypeError, match="id must be bytes or str"):
        engine.process(7, put_one)
    with pytest.raises(TypeError):
        engine.process_batch([7], put_one)
    with pytest.raises(TypeError, match="handler must be callable"):
        engine.process("a", None)
    with pytest.raises(TypeError, match="key must be bytes or str"):
        engine.get_state(1.5)

    def put_str_value(txn, message):
        txn.put("k", "not bytes")

    r = engine.process("b", put_str_value)
    assert r.outcome == idem.Outcome.FAILED
    assert isinstance(r.error, TypeError)
    assert engine.get_state("k") is None


def test_a_handler_that_raises_fails_its_message_only(engine):
    def handler(txn, message):
        txn.put(b"k:" + message.id, b"1")
        if message.id == b"bad":
            raise ValueError("no such account")

    results = engine.process_batch(
        [idem.Message("good"), idem.Message("bad")], handler)
    assert results[0].outcome == idem.Outcome.PROCESSED
    assert results[1].outcome == idem.Outcome.FAILED
    assert not results[1].permanent
    assert isinstance(results[1].error, ValueError)
    assert str(results[1].error) == "no such account"
    assert results[1].sequence == 0
    assert engine.get_state("k:good") == b"1"
    assert engine.get_state("k:bad") is None
    # Transient: a redelivery runs the handler again.
    r = engine.process("bad", put_one)
    assert r.outcome == idem.Outcome.PROCESSED


def test_an_idem_error_keeps_its_code(engine):
    def handler(txn, message):
        raise idem.Unavailable("ledger offline")

    r = engine.process("a", handler)
    assert isinstance(r.error, idem.Unavailable)
    assert r.error.code == 14


def test_permanent_error_is_remembered_until_forgotten(engine):
    calls = []

    def handler(txn, message):
        calls.append(1)
        txn.put("k", b"1")
        raise idem.PermanentError(idem.InvalidArgument("bad amount"))

    r = engine.process("a", handler)
    assert r.outcome == idem.Outcome.FAILED and r.permanent
    assert isinstance(r.error, idem.PermanentError)
    assert isinstance(r.error.error, idem.InvalidArgument)
    assert r.sequence > 0
    again = engine.process("a", handler)
    assert again.outcome == idem.Outcome.FAILED and again.permanent
    assert isinstance(again.error, idem.InvalidArgument)
    assert "bad amount" in str(again.error)
    assert len(calls) == 1
    assert engine.get_state("k") is None
    engine.forget("a")
    engine.process("a", put_one)
    assert engine.seen("a")


def test_permanent_error_of_any_cause(engine):
    r = engine.process("a",
                       lambda t, m: (_ for _ in ()).throw(
                           idem.PermanentError("unparseable")))
    assert r.permanent
    again = engine.process("a", put_one)
    assert isinstance(again.error, idem.Unknown)
    assert "unparseable" in str(again.error)


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_base_exception_commits_nothing_and_leaves_the_engine_usable(
        engine, interrupt):
    def handler(txn, message):
        txn.put("k", b"1")
        raise interrupt()

    with pytest.raises(interrupt):
        engine.process("a", handler)
    assert engine.get_state("k") is None
    assert not engine.seen("a")
    assert engine.process("a", put_one).outcome == idem.Outcome.PROCESSED


def test_base_exception_in_a_batch_stops_the_handlers_after_it(engine):
    ran = []

    def handler(txn, message):
        ran.append(message.id)
        txn.put(b"k:" + message.id, b"1")
        if message.id == b"b":
            raise KeyboardInterrupt()

    with pytest.raises(KeyboardInterrupt):
        engine.process_batch([idem.Message(i) for i in "abc"], handler)
    assert ran == [b"a", b"b"]
    assert engine.get_state("k:b") is None
    assert engine.get_state("k:c") is None
    assert not engine.seen("b") and not engine.seen("c")
    results = engine.process_batch([idem.Message(i) for i in "bc"], put_one)
    assert [r.outcome for r in results] == [idem.Outcome.PROCESSED] * 2


def test_txn_kept_after_its_handler_returned_raises(engine):
    kept = []
    engine.process("a", lambda txn, m: kept.append(txn))
    (txn,) = kept
    for call in (lambda: txn.get("k"), lambda: txn.put("k", b"v"),
                 lambda: txn.delete("k"), lambda: txn.set_result(b"r"),
                 lambda: txn.emit("d", "k", b"v")):
        with pytest.raises(idem.FailedPrecondition,
                           match="txn used outside its handler"):
            call()
    # Nor does it write into a later message's commit.
    engine.process("b", lambda t, m: pytest.raises(
        idem.FailedPrecondition, txn.put, "stale", b"v"))
    assert engine.get_state("stale") is None


def test_txn_used_from_another_thread_raises(engine):
    errors = []

    def handler(txn, message):
        def use():
            try:
                txn.put("k", b"v")
            except idem.FailedPrecondition as e:
                errors.append(e)

        t = threading.Thread(target=use)
        t.start()
        t.join()

    engine.process("a", handler)
    assert len(errors) == 1
    assert engine.get_state("k") is None


def test_calls_into_the_engine_from_its_handler(engine):
    outcomes = []

    def handler(txn, message):
        with pytest.raises(idem.FailedPrecondition):
            engine.process("inner", put_one)
        with pytest.raises(idem.FailedPrecondition):
            engine.close()
        outcomes.append(engine.get_state("x"))  # reads are served

    assert engine.process("a", handler).outcome == idem.Outcome.PROCESSED
    assert outcomes == [None]
    assert not engine.closed
