"""A Kafka consumer through idem, on ``confluent_kafka.Consumer``.

The pattern, in one class: records are consumed in batches and processed
with :meth:`idem.Engine.process_batch`, each with its topic, partition and
offset, so the engine commits every record's effects together with its
position. Kafka's own committed offsets are only a hint: on each
assignment the consumer seeks every partition to the offset after the one
the *engine* committed, and after each batch (once it is durable) it commits
the batch's offsets to Kafka as well, so that tools that read the group's
lag see progress. A crash anywhere therefore replays at most the batch in
flight, and those replays are duplicates to the engine.

Each record's ID is its ``message-id`` header (what idem's outbox relays
publish), as the C++ consumer's ``ConsumerOptions::id_header``; a record
without it is deduplicated by its position ``topic/partition/offset``,
which suppresses redeliveries but not producer duplicates.

This is a documented pattern on top of confluent_kafka, not bindings of the
C++ consumer (idem::kafka, docs/kafka.md): it has none of that consumer's
outbox relay, changelog or worker pool.

Requires ``confluent_kafka`` (Debian: python3-confluent-kafka).
"""

from __future__ import annotations

from typing import Any, Callable

import idem

ID_HEADER = "message-id"

_RESERVED = ("enable.auto.commit", "enable.auto.offset.store")


def record_id(record: Any, id_header: str = ID_HEADER) -> bytes:
    """A record's dedupe ID: its last ``id_header`` header, or
    ``topic/partition/offset``."""
    for name, value in reversed(record.headers() or []):
        if name == id_header and value:
            return value
    return f"{record.topic()}/{record.partition()}/{record.offset()}".encode()


class Consumer:
    """Consumes ``topics`` with ``config`` (confluent_kafka properties:
    ``bootstrap.servers``, ``group.id``, ...) and processes each record once
    with ``handler(txn, message)`` through ``engine``.

    ``message.payload`` is the record's value, ``message.source`` its topic.
    Not thread-safe: one thread polls; handlers run on it.
    """

    def __init__(self, engine: idem.Engine, config: dict[str, Any],
                 topics: list[str], handler: Callable[[idem.Txn, idem.Message],
                                                      Any], *,
                 batch_size: int = 500, id_header: str = ID_HEADER):
        import confluent_kafka
        for name in _RESERVED:
            if name in config:
                raise idem.InvalidArgument(
                    f"{name} is set by idem.kafka.Consumer")
        if batch_size < 1:
            raise idem.InvalidArgument(f"batch_size must be >= 1, got "
                                       f"{batch_size}")
        self._engine = engine
        self._handler = handler
        self._batch_size = batch_size
        self._id_header = id_header
        conf = dict(config)
        conf.setdefault("auto.offset.reset", "earliest")
        conf["enable.auto.commit"] = False
        conf["enable.auto.offset.store"] = False
        self._kafka = confluent_kafka.Consumer(conf)
        self._topic_partition = confluent_kafka.TopicPartition
        self._kafka.subscribe(topics, on_assign=self._on_assign)

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        """Starts each assigned partition after the engine's offset."""
        for p in partitions:
            committed = self._engine.committed_offset(p.topic, p.partition)
            if committed is not None:
                p.offset = committed + 1
        consumer.assign(partitions)

    def poll_batch(self, timeout: float = 1.0) -> list[idem.Result]:
        """Consumes up to batch_size records (waiting at most ``timeout``
        seconds), processes them in one commit, waits until it is durable
        and commits the offsets to Kafka. Returns one Result per record;
        after a transient failure the partition is sought back to the
        offset after the engine's (which stops before the failed record),
        so the record comes again."""
        records = self._kafka.consume(self._batch_size, timeout)
        batch = []
        for r in records:
            if r.error() is not None:
                raise idem.Unavailable(f"kafka: {r.error()}")
            batch.append(idem.Message(
                record_id(r, self._id_header), r.value() or b"",
                source=r.topic(), partition=r.partition(), offset=r.offset()))
        if not batch:
            return []
        results = self._engine.process_batch(batch, self._handler)
        self._engine.wait_durable()
        self._commit_engine_offsets(batch)
        self._rewind_failed(batch, results)
        return results

    def _rewind_failed(self, batch: list[idem.Message],
                       results: list[idem.Result]) -> None:
        """Seeks each partition with a transient failure back to the
        offset after the engine's, so its records come again."""
        failed = {(m.source, m.partition)
                  for m, r in zip(batch, results)
                  if r.outcome == idem.Outcome.FAILED and not r.permanent}
        for topic, partition in failed:
            committed = self._engine.committed_offset(topic, partition)
            offset = 0 if committed is None else committed + 1
            self._kafka.seek(self._topic_partition(topic, partition, offset))

    def _commit_engine_offsets(self, batch: list[idem.Message]) -> None:
        positions = {(m.source, m.partition) for m in batch}
        offsets = []
        for topic, partition in positions:
            committed = self._engine.committed_offset(topic, partition)
            if committed is not None:
                offsets.append(
                    self._topic_partition(topic, partition, committed + 1))
        if offsets:
            self._kafka.commit(offsets=offsets, asynchronous=False)

    def run(self, *, max_records: int | None = None,
            idle_timeout: float | None = None) -> int:
        """Polls until ``max_records`` records were processed or no record
        came for ``idle_timeout`` seconds (None: forever). Returns how many
        records it processed."""
        import time
        processed = 0
        idle_since = time.monotonic()
        while max_records is None or processed < max_records:
            results = self.poll_batch()
            if results:
                processed += len(results)
                idle_since = time.monotonic()
            elif (idle_timeout is not None and
                  time.monotonic() - idle_since > idle_timeout):
                break
        return processed

    def close(self) -> None:
        """Leaves the group. The engine stays open (its owner closes it)."""
        self._kafka.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
