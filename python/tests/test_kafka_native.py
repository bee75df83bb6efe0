"""idem.kafka.NativeConsumer (the C++ consumer's bindings) against
librdkafka's mock cluster, made by a confluent_kafka producer: records
processed once across a close and a reopen, duplicates, outputs through the
relay, retries and dead letters, interrupts, threads, bad keyword arguments
and use after close."""

import gc
import os
import pathlib
import signal
import sys
import threading
import time

import confluent_kafka
import idem
import idem.kafka
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] /
                       "examples" / "python"))
import kafka_native_consumer as example  # noqa: E402
import ledger  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    """A producer owning a mock cluster, and the cluster's address."""
    producer = confluent_kafka.Producer({"test.mock.num.brokers": 1,
                                         "log_level": 3})
    brokers = producer.list_topics(timeout=10).brokers.values()
    yield producer, ",".join(f"{b.host}:{b.port}" for b in brokers)


def publish(cluster, topic, records):
    """Publishes (id, value) pairs to partition 0 of topic, in order."""
    producer, _ = cluster
    for record_id, value in records:
        producer.produce(topic, value=value, partition=0,
                         headers=[("message-id", record_id)])
    assert producer.flush(30) == 0


def open_consumer(engine, cluster, topic, **options):
    options.setdefault("group_id", topic + ".group")
    options.setdefault("poll_timeout", 0.2)
    options.setdefault("kafka_config", example.KAFKA_CONFIG)
    return idem.kafka.NativeConsumer(engine, brokers=cluster[1],
                                     topics=[topic], **options)


def poll_until(consumer, handler, records, timeout=60):
    """Polls until `records` records were handled; returns the reports."""
    reports = []
    deadline = time.monotonic() + timeout
    while sum(r.records for r in reports) < records:
        assert time.monotonic() < deadline, reports
        reports.append(consumer.poll_batch(handler))
    return reports


def total(reports, field):
    return sum(getattr(r, field) for r in reports)


def counting(txn, record):
    """Counts each applied ID's runs in the state."""
    txn.merge(b"count/" + record.id, idem.MergeOp.ADD_INT64, 1)


def count(engine, record_id):
    return idem.read_int64(engine.get_state(b"count/" + record_id))


def test_every_record_is_processed_once_across_a_close_and_reopen(
        cluster, engine):
    records = [(f"r{i}".encode(), b"v") for i in range(300)]
    publish(cluster, "reopen", records)
    with open_consumer(engine, cluster, "reopen", max_batch=50) as c:
        first = poll_until(c, counting, 100)
    with open_consumer(engine, cluster, "reopen", max_batch=50) as c:
        second = poll_until(c, counting, 300 - total(first, "records"))
        assert c.poll_batch(counting).records == 0  # nothing read twice
    assert total(first + second, "processed") == 300
    assert total(first + second, "duplicates") == 0
    assert all(count(engine, i) == 1 for i, _ in records)
    assert engine.committed_offset("reopen", 0) == 299


def test_a_duplicate_record_is_applied_once(cluster, engine):
    publish(cluster, "dup", [(b"a", b"1"), (b"b", b"2"), (b"a", b"3")])
    seen = {}  # by offset: a handler may run more than once (a rerun)
    kept = []

    def handler(txn, record):
        seen[record.offset] = (record.id, record.payload, record.source,
                               record.partition, record.headers)
        kept.append((txn, record))
        counting(txn, record)

    with open_consumer(engine, cluster, "dup") as c:
        reports = poll_until(c, handler, 3)
    assert (total(reports, "processed"), total(reports, "duplicates")) == (2, 1)
    assert count(engine, b"a") == 1
    assert seen == {0: (b"a", b"1", "dup", 0, [("message-id", b"a")]),
                    1: (b"b", b"2", "dup", 0, [("message-id", b"b")])}
    # A txn kept after its handler returned refuses every call; the record
    # owns its bytes.
    txn, record = kept[0]
    with pytest.raises(idem.FailedPrecondition):
        txn.put(b"late", b"x")
    assert record.payload == b"1" and engine.get_state(b"late") is None


def test_outputs_emitted_by_handlers_reach_the_output_topic(cluster, engine):
    publish(cluster, "in", [(f"o{i}".encode(), b"%d" % i) for i in range(20)])

    def handler(txn, record):
        txn.emit("out", record.id, record.payload * 2)

    with open_consumer(engine, cluster, "in") as c:
        reports = poll_until(c, handler, 20)
    assert total(reports, "outbox_published") == 20
    out = example.read_topic(cluster[1], "out", 20)
    assert sorted((r.key(), r.value()) for r in out) == sorted(
        (f"o{i}".encode(), b"%d" % i * 2) for i in range(20))
    assert engine.stats().outbox_pending == 0


def test_a_raising_handler_is_retried_then_dead_lettered(cluster, engine):
    publish(cluster, "poison", [(b"ok1", b""), (b"bad", b"x"), (b"ok2", b""),
                                (b"perm", b"y")])
    attempts = {}

    def handler(txn, record):
        attempts[record.id] = attempts.get(record.id, 0) + 1
        if record.id == b"bad":
            raise ConnectionError("downstream unavailable")
        if record.id == b"perm":
            raise idem.PermanentError(ValueError("malformed"))
        counting(txn, record)

    with open_consumer(engine, cluster, "poison", max_attempts=3,
                       retry_backoff=0, dead_letter_topic="poison.dlq") as c:
        reports = poll_until(c, handler, 4)
        stats = c.stats()
    # Attempts as the consumer counts them (a handler may also run again
    # within one attempt: a rerun).
    assert attempts[b"bad"] >= 3 and attempts[b"perm"] >= 1
    assert total(reports, "dead_lettered") == 2
    assert total(reports, "non_retriable") == 1
    assert stats.retries == 2 and stats.dead_lettered == 2
    assert count(engine, b"ok2") == 1 and count(engine, b"bad") is None
    dead = example.read_topic(cluster[1], "poison.dlq", 2)
    assert sorted(r.value() for r in dead) == [b"x", b"y"]
    error = dict(dead[0].headers())["idem.error"].decode()
    assert "ConnectionError" in error or "malformed" in error


def test_a_handler_interrupt_fails_its_attempt_and_is_raised_after_the_batch(
        cluster, engine):
    publish(cluster, "intr", [(b"i1", b""), (b"i2", b""), (b"i3", b"")])
    interrupted = []

    def handler(txn, record):
        counting(txn, record)
        if record.id == b"i2" and not interrupted:
            interrupted.append(record.id)
            raise KeyboardInterrupt

    with open_consumer(engine, cluster, "intr", retry_backoff=0) as c:
        with pytest.raises(KeyboardInterrupt):
            poll_until(c, handler, 3)
        # Still usable: the interrupted record is read again and applied.
        deadline = time.monotonic() + 60
        while c.stats().processed < 3:
            assert time.monotonic() < deadline, c.stats()
            c.poll_batch(handler)
        assert c.stats().processed == 3
    assert interrupted == [b"i2"]
    assert [count(engine, i) for i in (b"i1", b"i2", b"i3")] == [1, 1, 1]


def test_run_with_workers_returns_after_stop_from_another_thread(
        cluster, engine):
    publish(cluster, "run", [(f"w{i}".encode(), b"") for i in range(200)])
    threads = set()
    lock = threading.Lock()

    def handler(txn, record):
        with lock:
            threads.add(threading.get_ident())
        counting(txn, record)

    def stop_when_done():
        deadline = time.monotonic() + 60
        while count(engine, b"w199") is None and time.monotonic() < deadline:
            time.sleep(0.05)
        c.stop()

    with open_consumer(engine, cluster, "run", workers=4,
                       max_batch=20) as c:
        stopper = threading.Thread(target=stop_when_done)
        stopper.start()
        c.run(handler)
        stopper.join()
        assert c.stats().processed == 200
    assert all(count(engine, f"w{i}".encode()) == 1 for i in range(200))
    assert threading.get_ident() not in threads


def test_bad_keyword_arguments_raise_type_error_or_invalid_argument(
        cluster, engine):
    ok = {"brokers": cluster[1], "group_id": "g", "topics": ["t"]}
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        idem.kafka.NativeConsumer(engine, **ok, bogus=1)
    with pytest.raises(TypeError, match="max_batch must be int"):
        idem.kafka.NativeConsumer(engine, **ok, max_batch="5")
    with pytest.raises(TypeError, match="poll_timeout"):
        idem.kafka.NativeConsumer(engine, **ok, poll_timeout="1s")
    with pytest.raises(TypeError, match="kafka_config"):
        idem.kafka.NativeConsumer(engine, **ok, kafka_config=[("a", "b")])
    for bad, what in (({"max_batch": 0}, "max_batch"),
                      ({"workers": 0}, "workers"),
                      ({"max_attempts": 2**40}, "max_attempts"),
                      ({"poll_timeout": -1}, "poll_timeout"),
                      ({"ordering": "random"}, "ordering"),
                      ({"kafka_config": {"group.id": "x"}}, "group.id")):
        with pytest.raises(idem.InvalidArgument, match=what):
            idem.kafka.NativeConsumer(engine, **{**ok, **bad})
    with pytest.raises(idem.InvalidArgument, match="brokers"):
        idem.kafka.NativeConsumer(engine, group_id="g", topics=["t"])


def test_use_after_close_raises_failed_precondition(cluster, engine):
    c = open_consumer(engine, cluster, "closed")
    c.close()
    assert c.closed
    for call in (lambda: c.poll_batch(counting), lambda: c.run(counting),
                 c.assignment, c.stats, lambda: c.pause("closed", 0)):
        with pytest.raises(idem.FailedPrecondition, match="closed"):
            call()
    c.stop()  # does nothing
    c.close()  # again: does nothing
    engine.close()
    with pytest.raises(idem.FailedPrecondition, match="engine is closed"):
        open_consumer(engine, cluster, "closed")
    with pytest.raises(TypeError, match="idem.Engine"):
        idem.kafka.NativeConsumer(engine._engine, brokers=cluster[1],
                                  group_id="g", topics=["t"])


def test_the_consumer_keeps_its_engine_and_the_engine_closes_it(
        cluster, store):
    publish(cluster, "keep", [(b"k1", b"")])
    engine = idem.Engine.open(store)
    c = open_consumer(engine, cluster, "keep")
    del engine
    gc.collect()
    assert total(poll_until(c, counting, 1), "processed") == 1
    c._engine.close()
    assert c.closed
    with pytest.raises(idem.FailedPrecondition):
        c.poll_batch(counting)


def test_closing_from_inside_a_handler_is_refused(cluster, engine):
    publish(cluster, "inside", [(b"x", b"")])
    errors = []

    def handler(txn, record):
        for close in (c.close, engine.close):
            try:
                close()
            except idem.FailedPrecondition as e:
                errors.append(str(e))

    with open_consumer(engine, cluster, "inside") as c:
        poll_until(c, handler, 1)
        assert not c.closed and not engine.closed
    assert len(errors) == 2 and all("inside" in e for e in errors)


def count_while_polling(consumer):
    """How often another Python thread ran during one poll_batch that
    waits its poll_timeout for records that do not come."""
    counter = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            counter[0] += 1
            time.sleep(0.001)

    spinner = threading.Thread(target=spin)
    spinner.start()
    time.sleep(0.05)
    before = counter[0]
    consumer.poll_batch(counting)
    during = counter[0] - before
    stop.set()
    spinner.join()
    return during


@pytest.mark.parametrize("release", [True, False],
                         ids=["released", "held_broken_twin"])
def test_poll_batch_releases_the_gil_while_it_waits(cluster, engine,
                                                    release):
    publish(cluster, "gil", [(b"g", b"")])
    with open_consumer(engine, cluster, "gil", poll_timeout=1.0) as c:
        poll_until(c, counting, 1)
        idem._idem._set_release_gil_for_testing(release)
        try:
            during = count_while_polling(c)
        finally:
            idem._idem._set_release_gil_for_testing(True)
    # Released, the other thread ran about every millisecond of the wait
    # (at least a tenth of them on a loaded machine); held, it barely
    # could (Python's switch interval lets it in a few times around the
    # call, not during it).
    if release:
        assert during > 100
    else:
        assert during < 20


def test_run_ends_on_a_signal_handler_calling_stop_and_on_ctrl_c(
        cluster, engine):
    publish(cluster, "sig", [(b"s", b"")])
    with open_consumer(engine, cluster, "sig") as c:
        poll_until(c, counting, 1)
        previous = signal.signal(signal.SIGUSR1, lambda *_: c.stop())
        try:
            threading.Timer(0.5, os.kill,
                            (os.getpid(), signal.SIGUSR1)).start()
            started = time.monotonic()
            c.run(counting)  # nothing arrives: only the signal ends it
            assert time.monotonic() - started < 10
        finally:
            signal.signal(signal.SIGUSR1, previous)
    with open_consumer(engine, cluster, "sig") as c:
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            c.run(counting)


def test_the_changelog_moves_a_partitions_state_to_another_store(
        cluster, tmp_path):
    publish(cluster, "cl", [(f"c{i}".encode(), b"") for i in range(30)])

    def handler(txn, record):
        n = idem.read_int64(txn.get(b"n")) or 0
        txn.put(b"n", idem.int64_operand(n + 1))

    key = idem.kafka.partition_state_key("cl", 0, b"n")
    with idem.Engine.open(tmp_path / "a", dedupe_scope="partition") as a:
        with open_consumer(a, cluster, "cl", changelog_topic="cl.state") as c:
            poll_until(c, handler, 30)
        assert idem.read_int64(a.get_state(key)) == 30
    # Another member's store: restored from the changelog, it sees c0
    # again as a duplicate and applies only the new record.
    publish(cluster, "cl", [(b"c0", b""), (b"new", b"")])
    with idem.Engine.open(tmp_path / "b", dedupe_scope="partition") as b:
        with open_consumer(b, cluster, "cl", changelog_topic="cl.state") as c:
            reports = poll_until(c, handler, 2)
            assert c.stats().restores >= 1
        assert idem.read_int64(b.get_state(key)) == 31
    assert (total(reports, "processed"), total(reports, "duplicates")) == (1, 1)


def test_closing_the_engine_from_another_thread_stops_a_run(cluster, engine):
    publish(cluster, "closerun", [(b"c", b"")])
    c = open_consumer(engine, cluster, "closerun")
    poll_until(c, counting, 1)
    closer = threading.Timer(0.5, engine.close)
    closer.start()
    c.run(counting)  # returns once the engine's close has stopped it
    closer.join()
    assert c.closed and engine.closed
