"""idem.kafka against librdkafka's mock cluster (through confluent_kafka):
the example's two consumer runs apply every payment once, and a record
whose handler failed transiently comes again."""

import pathlib
import sys

import idem
import idem.kafka
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] /
                       "examples" / "python"))
import kafka_consumer  # noqa: E402
import ledger  # noqa: E402


class FakeRecord:
    def __init__(self, headers):
        self._headers = headers

    def headers(self):
        return self._headers

    def topic(self):
        return "t"

    def partition(self):
        return 2

    def offset(self):
        return 9


def test_record_id_is_the_header_or_the_position():
    assert idem.kafka.record_id(FakeRecord([("message-id", b"a"),
                                            ("message-id", b"b")])) == b"b"
    assert idem.kafka.record_id(FakeRecord(None)) == b"t/2/9"
    assert idem.kafka.record_id(FakeRecord([("other", b"x")]),
                                "other") == b"x"


def test_consumer_refuses_the_properties_it_owns(engine):
    with pytest.raises(idem.InvalidArgument, match="enable.auto.commit"):
        idem.kafka.Consumer(engine, {"enable.auto.commit": True}, ["t"],
                            ledger.apply_payment)
    with pytest.raises(idem.InvalidArgument, match="batch_size"):
        idem.kafka.Consumer(engine, {}, ["t"], ledger.apply_payment,
                            batch_size=0)


def test_two_consumer_runs_apply_every_payment_once(store):
    assert kafka_consumer.run(store, 400) == []


def test_a_transient_failure_is_consumed_again(store):
    deliveries = ledger.stream(60)
    producer, bootstrap = kafka_consumer.start_cluster_and_publish(deliveries)
    failed_once = set()

    def flaky(txn, message):
        if message.id == b"payment-7" and message.id not in failed_once:
            failed_once.add(message.id)
            raise ConnectionError("downstream unavailable")
        ledger.apply_payment(txn, message)

    with idem.Engine.open(store) as engine:
        config = {"bootstrap.servers": bootstrap, "group.id": "flaky",
                  "session.timeout.ms": 6000}
        with idem.kafka.Consumer(engine, config, [kafka_consumer.TOPIC],
                                 flaky, batch_size=20) as consumer:
            consumer.run(max_records=len(deliveries) + 20, idle_timeout=10)
        assert failed_once == {b"payment-7"}
        assert ledger.check(engine, deliveries) == []
    del producer
