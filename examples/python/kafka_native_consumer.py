#!/usr/bin/env python3
"""The ledger (examples/python/ledger.py) consumed from Kafka through the
C++ consumer's bindings, idem.kafka.NativeConsumer, against librdkafka's
mock cluster, so it runs without a broker.

As examples/python/kafka_consumer.py, a producer creates the mock cluster
and publishes the ledger stream's payments (redeliveries become producer
duplicates: the same "message-id" header at a new offset). Then a
NativeConsumer consumes them in two runs (the first closes half-way, as a
rebalanced consumer would), applying each payment once; every applied
payment's handler also emits a confirmation, which the consumer's outbox
relay publishes to the topic "payments.applied" in the same commit's
wake. Finally the ledger is checked against the unique payments, and the
confirmations topic holds one confirmation per unique payment.

    python3 examples/python/kafka_native_consumer.py [--messages N]
"""

from __future__ import annotations

import pathlib
import sys
import time

import confluent_kafka

import idem
import idem.kafka

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import kafka_consumer  # noqa: E402
import ledger  # noqa: E402

TOPIC = kafka_consumer.TOPIC
CONFIRMATIONS = "payments.applied"

# A short session, and heartbeats often: the mock cluster hands a closed
# member's partitions on once its session has timed out. Not as short as
# the 3 s the mock waits before it elects the first member of an empty
# group: it drops a member whose session ends first and never answers its
# JoinGroup (librdkafka 2.0.2; tests/testing/kafka_test_util.h). log_level 3
# keeps librdkafka's notices out (the relay's producer, which shares these
# properties, would note that it ignores the consumer's).
KAFKA_CONFIG = {"session.timeout.ms": 4000, "heartbeat.interval.ms": 100,
                "log_level": 3}



def apply_and_confirm(txn: idem.Txn, record) -> None:
    """The ledger's handler, plus a confirmation through the outbox."""
    ledger.apply_payment(txn, record)
    txn.emit(CONFIRMATIONS, record.id, record.payload)


def consume(engine: idem.Engine, bootstrap: str, max_records: int,
            timeout: float = 60) -> int:
    """One consumer run: polls until max_records records were handled (or
    timeout seconds passed), then closes. Returns the records handled."""
    handled = 0
    deadline = time.monotonic() + timeout
    with idem.kafka.NativeConsumer(
            engine, brokers=bootstrap, group_id="ledger", topics=[TOPIC],
            max_batch=100, poll_timeout=0.2,
            kafka_config=KAFKA_CONFIG) as consumer:
        while handled < max_records and time.monotonic() < deadline:
            handled += consumer.poll_batch(apply_and_confirm).records
    return handled


def read_topic(bootstrap: str, topic: str, expected: int,
               timeout: float = 30) -> list[confluent_kafka.Message]:
    """The records of every partition of `topic`, from their start: reads
    until `expected` came or `timeout` seconds passed."""
    reader = confluent_kafka.Consumer({"bootstrap.servers": bootstrap,
                                       "group.id": "reader",
                                       "enable.auto.commit": False})
    partitions = reader.list_topics(topic, timeout=10).topics[topic].partitions
    reader.assign([confluent_kafka.TopicPartition(topic, p, 0)
                   for p in partitions])
    records: list[confluent_kafka.Message] = []
    deadline = time.monotonic() + timeout
    while len(records) < expected and time.monotonic() < deadline:
        for r in reader.consume(100, 0.2):
            if r.error() is None:
                records.append(r)
    reader.close()
    return records


def run(store: str, messages: int) -> list[str]:
    """Publishes, consumes in two runs, and returns the problems (empty
    when every payment was applied and confirmed exactly once)."""
    deliveries = ledger.stream(messages)
    producer, bootstrap = kafka_consumer.start_cluster_and_publish(deliveries)
    with idem.Engine.open(store) as engine:
        first = consume(engine, bootstrap, max_records=messages // 2)
        second = consume(engine, bootstrap, max_records=messages - first)
        stats = engine.stats()
        print(f"kafka_native_consumer: {first} + {second} records handled in "
              f"two runs: {stats.processed} processed, {stats.duplicates} "
              f"duplicates")
        problems = ledger.check(engine, deliveries)
    unique = {d.id for d in deliveries}
    confirmed = [r.key().decode()
                 for r in read_topic(bootstrap, CONFIRMATIONS, len(unique))]
    if sorted(confirmed) != sorted(unique):
        problems.append(f"{len(confirmed)} confirmations for {len(unique)} "
                        f"payments")
    del producer
    return problems


def main(argv: list[str]) -> int:
    return kafka_consumer.main(
        argv, run, "kafka_native_consumer", __doc__,
        "every payment applied and confirmed exactly once")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
