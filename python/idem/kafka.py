"""Kafka consumers through idem: two of them.

:class:`NativeConsumer` binds the C++ consumer (``idem::kafka::Consumer``,
docs/kafka.md): librdkafka's group consumer feeding every batch to the
engine, with that consumer's guarantees: each record's effects, dedupe
record and offset in one commit; retries and a dead-letter topic; the
outbox relay that publishes what handlers emit; worker threads; the
changelog that moves state with its partitions. Prefer it.

:class:`Consumer` is a documented pattern on top of
``confluent_kafka.Consumer`` (Debian: python3-confluent-kafka): records are
consumed in batches and processed with :meth:`idem.Engine.process_batch`,
each with its topic, partition and offset, so the engine commits every
record's effects together with its position. Kafka's own committed offsets
are only a hint: on each assignment the consumer seeks every partition to
the offset after the one the *engine* committed, and after each batch (once
it is durable) it commits the batch's offsets to Kafka as well, so that
tools that read the group's lag see progress. A crash anywhere therefore
replays at most the batch in flight, and those replays are duplicates to
the engine. It has none of the C++ consumer's outbox relay, changelog or
worker pool; use it where the extension was built without librdkafka, or
to keep confluent_kafka's own configuration and hooks.

In both, each record's ID is its ``message-id`` header (what idem's outbox
relays publish), as the C++ consumer's ``ConsumerOptions::id_header``; a
record without it is deduplicated by its position
``topic/partition/offset``, which suppresses redeliveries but not producer
duplicates.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import idem
from idem import _idem

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


if hasattr(_idem, "partition_state_key"):
    partition_state_key = _idem.partition_state_key


@dataclasses.dataclass(frozen=True)
class BatchReport:
    """What one :meth:`NativeConsumer.poll_batch` call did
    (``idem::kafka::BatchReport``)."""

    records: int           # records polled and handled
    processed: int         # handler ran and committed
    duplicates: int        # suppressed: the ID was seen
    dead_lettered: int     # given up on and passed to the dead-letter path
    retries: int           # extra attempts of failed records
    non_retriable: int     # of dead_lettered: idem.PermanentError and codes
                           # not retried (InvalidArgument, ...)
    outbox_published: int  # outbox entries the relay published
    rebalanced: bool       # an assignment or revocation happened


@dataclasses.dataclass(frozen=True)
class ConsumerStats:
    """A :class:`NativeConsumer`'s totals since it was created
    (``idem::kafka::ConsumerStats``). ``lag``: per assigned partition,
    ``(topic, partition, high_watermark, next_offset, lag)``, -1 where
    unknown."""

    records: int
    processed: int
    duplicates: int
    dead_lettered: int
    retries: int
    non_retriable: int
    outbox_published: int
    batches: int
    assignments: int
    revocations: int
    kafka_commit_errors: int
    kafka_errors: int
    last_kafka_error: str
    engine_seconds: float
    kafka_seconds: float
    lag: list[tuple[str, int, int, int, int]]
    restores: int
    restore_records_read: int
    run_retries: int
    outbox_dead_lettered: int
    backpressure_pauses: int


Handler = Callable[[idem.Txn, Any], Any]


class NativeConsumer:
    """The C++ Kafka consumer (``idem::kafka::Consumer``) on ``engine``,
    with Python handlers: ``NativeConsumer(engine, brokers=..., group_id=...,
    topics=[...], **options)``.

    The options are ``idem::kafka::ConsumerOptions``' fields
    (idem/kafka/consumer_options.h), by name; durations in seconds (or a
    timedelta; None: infinite), dicts for librdkafka properties:
    brokers (alias bootstrap_servers), group_id, topics (a list, or one
    str), kafka_config ({property: value}, e.g. auto.offset.reset),
    unknown_topic_timeout, id_header, ttl, max_batch, poll_timeout,
    workers, ordering ("partition" or "key"), max_attempts, retry_backoff,
    dead_letter_topic, relay_outbox, relay_kafka_config,
    outbox_max_attempts, max_outbox_pending, transactional_output,
    relay_progress_topic, transaction_timeout, transaction_interval,
    changelog_topic, restore_step_records, standby_partitions,
    standby_interval, check_group_offsets, commit_to_kafka; and
    partition_state (default: whether changelog_topic is set): handlers
    get their record's partition's view of the state
    (``idem::PartitionTxn``), which the changelog needs; read its keys
    with ``engine.get_state(idem.kafka.partition_state_key(topic,
    partition, key))``.
    An unknown name or a value of the wrong type raises TypeError; a value
    out of range (max_batch=0, a property the consumer owns, ...)
    idem.InvalidArgument naming it; librdkafka failing to start
    idem.Unavailable.

    Handlers are called ``handler(txn, record)`` as those of
    :meth:`idem.Engine.process_batch`: returning commits the txn's writes
    and emits with the record's dedupe record and offset; an exception
    fails the attempt (nothing of it commits) and the record is retried up
    to max_attempts, then dead-lettered (dead_letter_topic); an
    idem.PermanentError, or an idem.Error with a code that retrying cannot
    repair (InvalidArgument, FailedPrecondition, ...), is dead-lettered at
    once. ``record`` is an :class:`idem._idem.KafkaRecord`: id, payload,
    source (the topic), partition, offset, key, headers, timestamp_ms.
    What ``txn.emit`` buffers is published by the consumer's outbox relay
    after each batch.

    Threads: one poll_batch or run at a time; the GIL is released while
    the consumer polls, commits and publishes, and taken for each handler
    call. With workers > 1 handlers run on the consumer's worker threads,
    several at once (each takes the GIL, so Python code of two handlers
    never runs at the same time, but their state reads and writes stay
    serializable). stop() and close() may be called from any thread.

    The engine stays open, and the Python engine object alive, while the
    consumer is; ``engine.close()`` closes the consumer first. Use it as a
    context manager, or call :meth:`close`; any call but stop() and close()
    on a closed consumer raises idem.FailedPrecondition.
    """

    def __init__(self, engine: idem.Engine, **options: Any):
        if not hasattr(_idem, "_KafkaConsumer"):
            raise idem.Unimplemented(
                "idem was built without librdkafka: NativeConsumer is "
                "missing (use idem.kafka.Consumer)")
        if not isinstance(engine, idem.Engine):
            raise TypeError(f"engine must be an idem.Engine, not "
                            f"{type(engine).__name__}")
        self._engine = engine
        self._consumer = _idem._KafkaConsumer(engine._engine, options)

    def poll_batch(self, handler: Handler) -> BatchReport:
        """Polls up to max_batch records (waiting at most poll_timeout for
        the first), processes them with ``handler``, retries and
        dead-letters failures, commits the offsets to Kafka and publishes
        the outbox. Rebalances are handled inside the call. Raises the
        consumer's error as an idem.Error (idem.Unavailable: brokers down,
        retry later; idem.Aborted: a record given up on without a
        dead-letter path); the batch's partitions are then read again from
        the engine's offsets. A KeyboardInterrupt (or other BaseException
        that is not an Exception) a handler raised fails that attempt and
        is raised once the batch is done."""
        return BatchReport(**self._consumer.poll_batch(handler))

    def run(self, handler: Handler) -> None:
        """Calls poll_batch until :meth:`stop`, riding out errors that can
        pass (idem.Unavailable and the like: retried after a pause of up
        to 1 s) and raising any other. The consumer polls on a thread of
        its own (handlers run there when workers is 1); the calling thread
        runs Python's signal handlers meanwhile, so a signal handler may
        call stop(), and Ctrl-C stops the consumer after its batch and
        raises KeyboardInterrupt. After stop(), run returns at once: create
        a new consumer to run again."""
        self._consumer.run(handler)

    def stop(self) -> None:
        """Makes run return after its current batch. Safe from any thread
        and from signal handlers; does nothing on a closed consumer."""
        self._consumer.stop()

    def close(self) -> None:
        """Stops a run under way and waits for it, commits the offsets,
        leaves the group and releases the engine. Idempotent. Raises
        idem.FailedPrecondition from inside one of its handlers."""
        self._consumer.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (or the engine closed it)."""
        return self._consumer.closed

    def assignment(self) -> list[tuple[str, int]]:
        """The partitions assigned to this consumer, sorted."""
        return self._consumer.assignment()

    def pause(self, topic: str, partition: int) -> None:
        """Stops fetching (topic, partition) until :meth:`resume`: its
        offset and assignment stay. idem.NotFound if it is not assigned
        here. Not while a poll_batch or run is under way."""
        self._consumer.pause(topic, partition)

    def resume(self, topic: str, partition: int) -> None:
        """Fetches (topic, partition) again."""
        self._consumer.resume(topic, partition)

    def stats(self) -> ConsumerStats:
        """Totals since creation. Not while a poll_batch or run is under
        way (idem.FailedPrecondition)."""
        return ConsumerStats(**self._consumer.stats())

    def __enter__(self) -> "NativeConsumer":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<idem.kafka.NativeConsumer ({state})>"
