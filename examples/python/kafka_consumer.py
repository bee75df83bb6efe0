#!/usr/bin/env python3
"""The ledger (examples/python/ledger.py) consumed from Kafka through idem,
against librdkafka's mock cluster, so it runs without a broker.

A producer creates the mock cluster (librdkafka's test.mock.num.brokers)
and publishes the ledger stream's payments to the topic "payments", each
with its payment ID in the "message-id" header; redeliveries in the stream
become producer duplicates (the same ID at a new offset). Then
idem.kafka.Consumer consumes them in two runs (the first stops half-way, as
a crashed or rebalanced consumer would), processing each payment once, and
the ledger is checked against the unique payments.

    python3 examples/python/kafka_consumer.py [--messages N]
"""

from __future__ import annotations

from typing import Any

import argparse
import pathlib
import sys
import tempfile

import confluent_kafka

import idem
import idem.kafka

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import ledger  # noqa: E402

TOPIC = "payments"


def start_cluster_and_publish(deliveries) -> tuple[Any, str]:
    """A producer owning a mock cluster, with the stream published; returns
    it (the cluster lives as long as it) and the cluster's address."""
    producer = confluent_kafka.Producer({"test.mock.num.brokers": 1})
    brokers = producer.list_topics(timeout=10).brokers.values()
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers)
    for d in deliveries:
        producer.produce(TOPIC, value=d.payload,
                         headers=[(idem.kafka.ID_HEADER, d.id.encode())])
    if producer.flush(30) != 0:
        raise RuntimeError("the mock cluster did not take every record")
    return producer, bootstrap


def consume(engine, bootstrap: str, max_records: int) -> int:
    # A short session: the mock cluster waits for the session of the run
    # before to end before it assigns the partitions again.
    config = {"bootstrap.servers": bootstrap, "group.id": "ledger",
              "session.timeout.ms": 6000}
    with idem.kafka.Consumer(engine, config, [TOPIC],
                             ledger.apply_payment, batch_size=100) as c:
        # A bound in case records never come (joining the group takes
        # the mock cluster a few seconds).
        return c.run(max_records=max_records, idle_timeout=30)


def run(store: str, messages: int) -> list[str]:
    """Publishes, consumes in two runs, and returns the ledger's problems
    (empty when every payment was applied exactly once)."""
    deliveries = ledger.stream(messages)
    producer, bootstrap = start_cluster_and_publish(deliveries)
    with idem.Engine.open(store) as engine:
        first = consume(engine, bootstrap, max_records=messages // 2)
        second = consume(engine, bootstrap, max_records=messages - first)
        stats = engine.stats()
        print(f"kafka_consumer: {first} + {second} records consumed in two "
              f"runs: {stats.processed} processed, {stats.duplicates} "
              f"duplicates")
        problems = ledger.check(engine, deliveries)
    del producer
    return problems


def main(argv: list[str], run=run, name: str = "kafka_consumer",
         doc: str = __doc__,
         success: str = "every payment applied exactly once") -> int:
    """The command line of this example and of kafka_native_consumer.py:
    runs `run` on a temporary store and prints its problems."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args(argv)
    if args.messages < 2:
        parser.error("--messages must be >= 2")
    with tempfile.TemporaryDirectory() as tmp:
        problems = run(f"{tmp}/store", args.messages)
    for p in problems:
        print(f"{name}: {p}", file=sys.stderr)
    print(f"{name}: {success}" if not problems else f"{name}: CHECK FAILED")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
