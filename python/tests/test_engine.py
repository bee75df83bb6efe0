"""The idem package's engine calls: processing, reads, outbox, stats."""

import datetime
import pydoc

import idem
import pytest


def add_payload(txn, message):
    """Adds the payload (a decimal) to "balance"; the result is the new
    balance."""
    balance = int(txn.get("balance") or b"0") + int(message.payload)
    txn.put("balance", str(balance).encode())
    txn.set_result(str(balance).encode())


def test_process_commits_the_handlers_writes_once(engine):
    first = engine.process("p1", add_payload, payload=b"25")
    again = engine.process("p1", add_payload, payload=b"25")
    assert first.outcome == idem.Outcome.PROCESSED
    assert first.value == b"25"
    assert first.error is None and not first.permanent
    assert first.sequence > 0
    assert first.first_processed_at is not None
    assert again.outcome == idem.Outcome.DUPLICATE
    assert again.value == b"25"
    assert engine.get_state("balance") == b"25"
    assert engine.get_state(b"balance") == b"25"
    assert engine.get_state("absent") is None


def test_handler_gets_the_message_as_given(engine):
    seen = []
    engine.process(b"m\x00id", lambda txn, m: seen.append(m), payload=b"\xff",
                   source="payments", partition=3, offset=7)
    (m,) = seen
    assert m.id == b"m\x00id" and m.payload == b"\xff"
    assert m.source == "payments" and m.partition == 3 and m.offset == 7
    assert engine.committed_offset("payments", 3) == 7
    assert engine.committed_offset("payments", 0) is None


def test_process_batch_runs_in_order_and_sees_earlier_writes(engine):
    messages = [idem.Message("a", b"1"), ("b", b"2"), idem.Message("a", b"1")]
    results = engine.process_batch(messages, add_payload)
    assert [r.outcome for r in results] == [
        idem.Outcome.PROCESSED, idem.Outcome.PROCESSED,
        idem.Outcome.DUPLICATE
    ]
    assert [r.value for r in results] == [b"1", b"3", b"1"]
    assert engine.get_state("balance") == b"3"
    assert engine.process_batch([], add_payload) == []
    # Any iterable of messages.
    results = engine.process_batch((idem.Message(i, b"1") for i in "cd"),
                                   add_payload)
    assert len(results) == 2


def test_txn_reads_writes_and_deletes(engine):
    engine.process("setup", lambda t, m: t.put("old", b"x"))

    def handler(txn, message):
        assert txn.get("new") is None
        txn.put("new", bytearray(b"1"))
        assert txn.get("new") == b"1"
        assert txn.get("old") == b"x"
        txn.delete("old")
        txn.delete("absent")
        assert txn.get("old") is None

    assert engine.process("m", handler).outcome == idem.Outcome.PROCESSED
    assert engine.get_state("new") == b"1"
    assert engine.get_state("old") is None


def test_seen_and_forget_follow_the_record(engine):
    assert not engine.seen("a")
    engine.process("a", add_payload, payload=b"1")
    assert engine.seen("a")
    engine.forget("a")
    assert not engine.seen("a")
    assert engine.process("a", add_payload,
                          payload=b"1").outcome == idem.Outcome.PROCESSED
    assert engine.get_state("balance") == b"2"


def test_partition_scoped_store_dedupes_per_partition(store):
    with idem.Engine.open(store, dedupe_scope="partition") as engine:
        for partition in (0, 1):
            r = engine.process("a", add_payload, payload=b"1", source="t",
                               partition=partition, offset=0)
            assert r.outcome == idem.Outcome.PROCESSED
        with pytest.raises(idem.FailedPrecondition):
            engine.forget("a")
        engine.forget("a", source="t", partition=1)
        r = engine.process("a", add_payload, payload=b"1", source="t",
                           partition=1, offset=1)
        assert r.outcome == idem.Outcome.PROCESSED


def test_emits_reach_the_outbox_until_acknowledged(engine):
    def emit(txn, message):
        txn.emit("out", "k1", b"v1")
        txn.emit(b"out", b"k2", b"")

    engine.process("a", emit)
    entries = engine.read_outbox(10)
    assert [(e.destination, e.key, e.value, e.partition) for e in entries] == [
        ("out", b"k1", b"v1", -1), ("out", b"k2", b"", -1)
    ]
    assert entries[0].message_id.endswith("-0")
    assert entries[1].position > entries[0].position
    assert len(engine.read_outbox(10, after=entries[0].position)) == 1
    engine.ack_outbox(entries[1].position)
    assert engine.read_outbox(10) == []
    with pytest.raises(idem.InvalidArgument):
        engine.read_outbox(0)
    with pytest.raises(idem.InvalidArgument):
        engine.ack_outbox(entries[1].position + 100)


def test_emit_options_reach_the_outbox_entry(engine):
    def emit(txn, message):
        txn.emit("out", "k", b"v", partition=3,
                 headers=[("trace", b"t1"), (b"kind", "payment")])
        txn.emit("out", "gone", b"", tombstone=True)

    engine.process("a", emit)
    first, second = engine.read_outbox(10)
    assert first.partition == 3 and not first.tombstone
    assert first.headers == [("trace", b"t1"), ("kind", b"payment")]
    assert second.tombstone and second.value == b"" and second.headers == []

    def bad_tombstone(txn, message):
        txn.emit("out", "k", b"v", tombstone=True)

    r = engine.process("b", bad_tombstone)
    assert r.outcome == idem.Outcome.FAILED
    assert isinstance(r.error, idem.InvalidArgument)
    r = engine.process("c", lambda t, m: t.emit("out", "k", b"v",
                                               headers=[("only-name",)]))
    assert isinstance(r.error, TypeError)


def test_stats_count_outcomes(engine):
    engine.process("a", add_payload, payload=b"1")
    engine.process("a", add_payload, payload=b"1")
    engine.process("b", lambda t, m: 1 / 0)
    stats = engine.stats()
    assert isinstance(stats, idem.Stats)
    assert (stats.processed, stats.duplicates, stats.failed) == (1, 1, 1)
    assert stats.commits >= 1 and stats.user_bytes > 0


def test_buffered_commits_become_durable_on_wait(store):
    with idem.Engine.open(store, durability="buffered") as engine:
        engine.wait_durable()  # nothing committed yet: returns at once
        r = engine.process("a", add_payload, payload=b"1")
        engine.wait_durable(r.sequence)
        engine.wait_durable()
        with pytest.raises(idem.InvalidArgument):
            engine.wait_durable(r.sequence + 1000)


def test_options_are_passed_to_the_engine(store):
    with idem.Engine.open(store, dedupe_window=datetime.timedelta(hours=1),
                          durability=idem.Durability.BUFFERED,
                          detect_conflicts=True, block_cache_bytes=1 << 20,
                          write_buffer_bytes=1 << 20, bloom_bits_per_key=8,
                          max_background_jobs=1, expiry_buckets=2) as engine:
        engine.process("a", add_payload, payload=b"1", fingerprint=b"f1")
        r = engine.process("a", add_payload, payload=b"1", fingerprint=b"f2")
        assert r.outcome == idem.Outcome.CONFLICT


def test_a_short_ttl_is_a_ttl(engine):
    r = engine.process("a", add_payload, payload=b"1",
                       ttl=datetime.timedelta(seconds=30))
    assert r.outcome == idem.Outcome.PROCESSED
    r = engine.process("b", add_payload, payload=b"1", ttl=2.5)
    assert r.outcome == idem.Outcome.PROCESSED


def test_context_manager_closes_and_reopen_sees_the_state(store):
    with idem.Engine.open(store) as engine:
        engine.process("a", add_payload, payload=b"5")
    assert engine.closed
    assert "closed" in repr(engine)
    with idem.Engine.open(store) as engine:
        assert engine.get_state("balance") == b"5"
        assert engine.process("a", add_payload,
                              payload=b"5").outcome == idem.Outcome.DUPLICATE


def test_read_only_engine_reads_beside_the_writer(store):
    with idem.Engine.open(store) as writer:
        writer.process("a", add_payload, payload=b"5")
        with idem.Engine.open(store, read_only=True) as reader:
            assert reader.get_state("balance") == b"5"
            with pytest.raises(idem.FailedPrecondition):
                reader.process("b", add_payload, payload=b"1")


def test_version_and_help_read_well():
    assert idem.C_API_VERSION == 1
    assert idem.__version__.count(".") == 2
    assert "dedupe_window" in idem.Engine.open.__doc__
    assert "FailedPrecondition" in idem.Txn.__doc__
    assert idem.Message.__doc__.startswith("One delivery")
    page = pydoc.render_doc(idem.Engine, renderer=pydoc.plaintext)
    for name in ("open", "process", "process_batch", "get_state",
                 "wait_durable", "stats", "read_outbox", "ack_outbox"):
        assert f"{name}(" in page, name
    assert "emit(" in pydoc.render_doc(idem.Txn, renderer=pydoc.plaintext)
