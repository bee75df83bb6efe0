#!/usr/bin/env python3
"""Python's two Kafka consumers against librdkafka's mock cluster, in one
run: records/s of idem.kafka.NativeConsumer (the C++ consumer's bindings)
with workers 1 and 4 (Ordering "key"), and of idem.kafka.Consumer (the
pattern on confluent_kafka), each consuming --messages records (4
partitions, each with its message-id header) at batches of 500 with a
handler that does one txn.put, on a fresh store under durability
--durability; then the two NativeConsumers again, with a handler that
first sleeps 1 ms (a call outside Python, the GIL released), on a tenth of
the records. A rate runs from the first handler call to the last record,
so joining the group is left out; each figure is the best of --rounds
rounds. Run from the checkout after building build/ with
-DIDEM_BUILD_PYTHON=ON:

    PYTHONPATH=build/python python3 bench/python/kafka_bench.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from typing import Callable

import confluent_kafka

import idem
import idem.kafka

BATCH = 500
PARTITIONS = 4
# As examples/python/kafka_native_consumer.py: a short session, so a group
# is handed on quickly, and librdkafka's notices kept out.
KAFKA_CONFIG = {"session.timeout.ms": 4000, "heartbeat.interval.ms": 100,
                "log_level": 3}


class Cluster:
    """A mock cluster (owned by a producer) and topics published for it."""

    def __init__(self) -> None:
        self.producer = confluent_kafka.Producer(
            {"test.mock.num.brokers": 1, "log_level": 3, "linger.ms": 5})
        brokers = self.producer.list_topics(timeout=10).brokers.values()
        self.bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers)

    def publish(self, topic: str, messages: int) -> None:
        for i in range(messages):
            self.producer.produce(
                topic, value=b"v", partition=i % PARTITIONS,
                headers=[("message-id", f"{topic}/{i}".encode())])
            if i % 10000 == 0:
                self.producer.poll(0)
        if self.producer.flush(60) != 0:
            raise RuntimeError("the mock cluster did not take every record")


def timed_handler(wait: float) -> tuple[Callable, list[float]]:
    """A handler sleeping `wait` seconds (if not 0) then doing one put, and
    the time of its first call."""
    first: list[float] = []

    def handler(txn, record) -> None:
        if not first:
            first.append(time.monotonic())
        if wait:
            time.sleep(wait)
        txn.put(record.id, b"1")

    return handler, first


def native(cluster: Cluster, topic: str, messages: int, durability: str,
           workers: int, wait: float = 0) -> float:
    handler, first = timed_handler(wait)
    with tempfile.TemporaryDirectory() as tmp, \
            idem.Engine.open(f"{tmp}/store", durability=durability) as e, \
            idem.kafka.NativeConsumer(
                e, brokers=cluster.bootstrap, group_id=topic, topics=[topic],
                max_batch=BATCH, poll_timeout=0.2, workers=workers,
                ordering="key", kafka_config=KAFKA_CONFIG) as consumer:
        handled = 0
        while handled < messages:
            handled += consumer.poll_batch(handler).records
        return messages / (time.monotonic() - first[0])


def pattern(cluster: Cluster, topic: str, messages: int,
            durability: str) -> float:
    handler, first = timed_handler(0)
    config = {"bootstrap.servers": cluster.bootstrap, "group.id": topic,
              **KAFKA_CONFIG}
    with tempfile.TemporaryDirectory() as tmp, \
            idem.Engine.open(f"{tmp}/store", durability=durability) as e, \
            idem.kafka.Consumer(e, config, [topic], handler,
                                batch_size=BATCH) as consumer:
        consumer.run(max_records=messages, idle_timeout=30)
        return messages / (time.monotonic() - first[0])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--durability", choices=("sync", "buffered"),
                        default="sync")
    args = parser.parse_args(argv)
    if args.messages < 1 or args.rounds < 1:
        parser.error("--messages and --rounds must be >= 1")
    cluster = Cluster()
    n, d = args.messages, args.durability
    slow = max(1, n // 10)
    runs = {
        "NativeConsumer, workers=1": (n, lambda t: native(cluster, t, n, d,
                                                          1)),
        "NativeConsumer, workers=4": (n, lambda t: native(cluster, t, n, d,
                                                          4)),
        "Consumer (confluent_kafka)": (n, lambda t: pattern(cluster, t, n,
                                                            d)),
        "NativeConsumer, workers=1, handler waits 1 ms": (
            slow, lambda t: native(cluster, t, slow, d, 1, 0.001)),
        "NativeConsumer, workers=4, handler waits 1 ms": (
            slow, lambda t: native(cluster, t, slow, d, 4, 0.001)),
    }
    best = {name: 0.0 for name in runs}
    for r in range(args.rounds):
        for i, (name, (messages, run)) in enumerate(runs.items()):
            topic = f"bench.{r}.{i}"
            cluster.publish(topic, messages)
            best[name] = max(best[name], run(topic))
    for name, rate in best.items():
        print(f"{name}: {rate:,.0f} records/s ({d}, batch {BATCH})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
