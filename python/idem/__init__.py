"""idem: exactly-once effects for at-least-once consumers, embedded.

An :class:`Engine` runs a handler once per message ID within a dedupe window
and commits the message's dedupe record, the handler's state writes and
emits, and the message's source offset in one atomic write (RocksDB), so a
redelivered message has the same observable effect as one delivery::

    import idem

    def apply(txn, message):
        balance = int(txn.get("balance") or b"0")
        txn.put("balance", str(balance + int(message.payload)).encode())

    with idem.Engine.open("/var/lib/app/store") as engine:
        engine.process("payment-1", apply, payload=b"25")
        engine.process("payment-1", apply, payload=b"25")  # a duplicate
        assert engine.get_state("balance") == b"25"

An Engine is safe to use from several threads: the engine releases the GIL
while it commits, syncs and waits, and takes it back for each handler call.
See docs/python.md for the guarantees and the threading rules.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Any, Callable, Iterable, NamedTuple

from idem._errors import (Aborted, AlreadyExists, Cancelled, DataLoss,
                          DeadlineExceeded, Error, FailedPrecondition,
                          Internal, InvalidArgument, NotFound, OutOfRange,
                          PermanentError, PermissionDenied, ResourceExhausted,
                          Unauthenticated, Unavailable, Unimplemented,
                          Unknown)
from idem._idem import (C_API_MINOR, C_API_VERSION, MergeOp, Message,
                        Outcome, Result, TimeDomain, Txn)
from idem._idem import VERSION as __version__
from idem import _idem

__all__ = [
    "Engine", "Message", "Txn", "Result", "Outcome", "Durability",
    "DedupeScope", "Stats", "OutboxEntry", "Error", "Cancelled", "Unknown",
    "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
    "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted",
    "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss",
    "Unauthenticated", "PermanentError", "C_API_VERSION", "__version__",
    "MergeOp", "int64_operand", "read_int64", "C_API_MINOR", "TimeDomain",
    "TimerFire", "TimerHandler",
]

Handler = Callable[[Txn, Message], Any]
TimerHandler = Callable[[Txn, "TimerFire"], Any]


def int64_operand(value: int) -> bytes:
    """The 8-byte little-endian operand of ``value`` for the int64 merge
    operators (Txn.merge also takes the int itself)."""
    return int(value).to_bytes(8, "little", signed=True)


def read_int64(value: bytes | None) -> int | None:
    """The int64 a value folded by an int64 merge operator holds; None unless
    ``value`` is 8 bytes."""
    if value is None or len(value) != 8:
        return None
    return int.from_bytes(value, "little", signed=True)


class Durability(enum.Enum):
    """When a committed outcome survives a power loss."""

    SYNC = "sync"
    """Each commit syncs the write-ahead log before process returns."""
    BUFFERED = "buffered"
    """Commits survive a process crash at once, a power loss once
    :meth:`Engine.wait_durable` returns."""


class DedupeScope(enum.Enum):
    """Which deliveries share one dedupe record (fixed when the store is
    created)."""

    STORE = "store"
    """An ID names one message in the whole store."""
    PARTITION = "partition"
    """An ID names one message per (source, partition)."""


@dataclasses.dataclass(frozen=True)
class Stats:
    """A snapshot of the engine's counters (since open) and RocksDB figures;
    see idem/stats.h for each field."""

    processed: int
    duplicates: int
    failed: int
    conflicts: int
    handler_reruns: int
    late_duplicates: int
    outbox_pending: int
    outbox_emitted: int
    outbox_acknowledged: int
    expired_dropped: int
    user_bytes: int
    wal_bytes: int
    flush_bytes: int
    compaction_bytes: int
    write_amplification: float
    live_sst_bytes: int
    estimated_live_records: int
    memtable_bytes: int
    block_cache_bytes: int
    commits: int
    commit_seconds: float
    timers_fired: int = 0
    timers_dead_lettered: int = 0
    timer_failures: int = 0


class OutboxEntry(NamedTuple):
    """One emitted message awaiting its relay (Engine.read_outbox)."""

    position: int
    """> 0, increasing in commit order; pass it to Engine.ack_outbox."""
    message_id: str
    """Stable across stores and retries: dedupe on it downstream."""
    destination: str
    partition: int
    """-1: the relay's partitioner chooses one by key."""
    key: bytes
    value: bytes
    """Empty for a tombstone."""
    tombstone: bool = False
    """Publish a null value (a Kafka tombstone)."""
    headers: list[tuple[str, bytes]] = []
    """(name, value) pairs given to Txn.emit, in order."""


class TimerFire(NamedTuple):
    """A timer as it fires (Engine.fire_timers) or as Engine.next_timer
    finds it."""

    source: str
    """The partition the timer belongs to: that of the message whose
    handler set it."""
    partition: int
    domain: TimeDomain
    timer_key: bytes
    """The key given to Txn.set_timer: one timer per key per
    partition."""
    fire_at: float
    """When it was due, in its domain's time (seconds since the
    epoch)."""
    payload: bytes


def _seconds(value: float | datetime.timedelta, name: str) -> float:
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"{name} must be seconds or a timedelta, not "
                    f"{type(value).__name__}")


def _enum(cls: type[enum.Enum], value: Any, name: str) -> enum.Enum:
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in cls)
        raise InvalidArgument(f"{name} must be one of {choices}, got "
                              f"{value!r}") from None


class Engine:
    """An open idem store. Open one with :meth:`Engine.open`; use it as a
    context manager, or call :meth:`close`.

    Thread-safe: several threads may call process, process_batch and the
    other methods at once; their handlers run at the same time (each on its
    caller's thread, with the GIL), and the engine keeps serializable state
    (a handler whose reads another commit changed runs again).
    """

    def __init__(self, engine: _idem._Engine, path: str):
        self._engine = engine
        self.path = path

    @classmethod
    def open(cls, path: str | "os.PathLike[str]", *,
             dedupe_window: float | datetime.timedelta = datetime.timedelta(
                 days=7),
             durability: Durability | str = Durability.SYNC,
             dedupe_scope: DedupeScope | str = DedupeScope.STORE,
             create_if_missing: bool = True,
             read_only: bool = False,
             detect_conflicts: bool = False,
             refresh_on_duplicate: bool = False,
             block_cache_bytes: int | None = None,
             write_buffer_bytes: int | None = None,
             bloom_bits_per_key: int | None = None,
             max_background_jobs: int | None = None,
             expiry_buckets: int | None = None,
             state_ttl: float | datetime.timedelta | None = None
             ) -> "Engine":
        """Opens (or creates) the store at ``path``.

        dedupe_window: how long an ID is remembered (seconds or a
            timedelta); make it longer than the broker's longest
            redelivery delay. Default 7 days.
        durability: ``"sync"`` (each process call's outcome is durable on
            return) or ``"buffered"`` (durable once :meth:`wait_durable`
            returns).
        dedupe_scope: ``"store"`` or ``"partition"``, fixed at creation.
        state_ttl: how long every state value lives after its last write
            (seconds or a timedelta; ``txn.put(..., ttl=...)`` overrides it
            for one write); None: values never expire.
        The other options are idem::Options' (idem/options.h); None keeps
        its default.

        Raises InvalidArgument for bad options, FailedPrecondition if the
        store is open in another engine (in any process) or is not an idem
        store, NotFound if it is missing and create_if_missing is false,
        DataLoss if it is damaged.
        """
        import os
        window = _seconds(dedupe_window, "dedupe_window")
        options: dict[str, Any] = {
            "dedupe_window_ms": round(window * 1000),
            "durability": _idem._Durability.SYNC
            if _enum(Durability, durability, "durability") is Durability.SYNC
            else _idem._Durability.BUFFERED,
            "dedupe_scope": _idem._DedupeScope.STORE
            if _enum(DedupeScope, dedupe_scope, "dedupe_scope")
            is DedupeScope.STORE else _idem._DedupeScope.PARTITION,
            "create_if_missing": bool(create_if_missing),
            "read_only": bool(read_only),
            "detect_conflicts": bool(detect_conflicts),
            "refresh_on_duplicate": bool(refresh_on_duplicate),
        }
        for name, value in (("block_cache_bytes", block_cache_bytes),
                            ("write_buffer_bytes", write_buffer_bytes),
                            ("bloom_bits_per_key", bloom_bits_per_key),
                            ("max_background_jobs", max_background_jobs),
                            ("expiry_buckets", expiry_buckets)):
            if value is not None:
                options[name] = int(value)
        if state_ttl is not None:
            ttl = _seconds(state_ttl, "state_ttl")
            if not ttl > 0:
                raise InvalidArgument(f"state_ttl must be positive, got "
                                      f"{state_ttl!r}")
            options["state_ttl_ms"] = max(1, round(ttl * 1000))
        path = os.fspath(path)
        return cls(_idem._Engine(path, options), path)

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<idem.Engine {self.path!r} ({state})>"

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._engine.closed

    def close(self) -> None:
        """Waits for the calls in progress on other threads, syncs and
        closes the store. Later calls raise FailedPrecondition; closing
        again does nothing. Raises FailedPrecondition from inside one of
        this engine's handlers."""
        self._engine.close()

    def process(self, id: bytes | str, handler: Handler, *,
                payload: bytes = b"", source: str | None = None,
                partition: int = 0, offset: int = -1,
                ttl: float | datetime.timedelta | None = None,
                fingerprint: bytes | None = None,
                event_time: float | datetime.datetime | None = None
                ) -> Result:
        """Processes one delivery: unless ``id`` is a duplicate, calls
        ``handler(txn, message)`` and commits its writes and emits, the
        dedupe record and the offset in one write. ``event_time`` (seconds
        since the epoch or a datetime) advances the stream time of (source,
        partition) when the message commits.

        A handler that raises fails the message (Outcome.FAILED, nothing
        committed; a redelivery runs it again) and the exception is the
        Result's ``error``; one that raises :class:`PermanentError` fails
        it for good. A BaseException that is not an Exception
        (KeyboardInterrupt, SystemExit) commits nothing for the message and
        is raised again once the engine returns; the engine stays usable.

        Raises InvalidArgument for a bad message (an empty ID or one over
        1024 bytes, a negative partition with an offset...), TypeError for
        a payload that is not bytes, FailedPrecondition on a closed engine
        or from inside one of its handlers, and a storage error (Unavailable,
        ResourceExhausted, Unknown when only the commit's sync failed) if
        the commit failed.
        """
        message = Message(id, payload, source=source, partition=partition,
                          offset=offset, ttl=ttl, fingerprint=fingerprint,
                          event_time=event_time)
        return self._engine.process_batch([message], handler)[0]

    def process_batch(self, messages: Iterable[Message | tuple[bytes, bytes]],
                      handler: Handler) -> list[Result]:
        """Processes ``messages`` (idem.Message objects, or (id, payload)
        tuples) in order as one commit; one Result each, in order. Handlers
        see the writes of earlier messages of the batch; a later copy of an
        ID in the batch is a DUPLICATE of the first. Errors as
        :meth:`process`; a bad message rejects the whole batch before any
        handler runs. If a handler raises a BaseException that is not an
        Exception, the handlers after it do not run, their messages and its
        own fail (nothing of them is committed), and it is raised again."""
        if not isinstance(messages, list):
            messages = list(messages)
        return self._engine.process_batch(messages, handler)

    def get_state(self, key: bytes | str) -> bytes | None:
        """The committed value of state key ``key``, or None."""
        return self._engine.get_state(key)

    def scan_state(self, begin: bytes | str = b"",
                   end: bytes | str | None = None, *, reverse: bool = False,
                   limit: int = 0) -> list[tuple[bytes, bytes]]:
        """The committed (key, value) pairs of the keys in [begin, end) (end
        None: no upper bound) in byte order, or reversed, at most ``limit``
        of them (0: all), from one snapshot of the store."""
        return self._engine.scan_state(begin, end, reverse, limit)

    def seen(self, id: bytes | str) -> bool:
        """Whether a live dedupe record for ``id`` exists."""
        return self._engine.seen(id)

    def forget(self, id: bytes | str, *, source: str | None = None,
               partition: int = 0) -> None:
        """Removes the dedupe record of ``id`` (state stays), so its next
        delivery runs the handler again. In a partition-scoped store give
        the source and partition."""
        self._engine.forget(id, source, partition)

    def committed_offset(self, source: str, partition: int = 0) -> int | None:
        """The highest committed offset of (source, partition), or None:
        resume consuming at the offset after it."""
        return self._engine.committed_offset(source, partition)

    def wait_durable(self, sequence: int | None = None) -> None:
        """Returns once the commit ``sequence`` (Result.sequence), and every
        one before it, is durable; None: every commit this Engine object
        returned so far. Syncs if needed; other threads run meanwhile."""
        self._engine.wait_durable(sequence)

    def stats(self) -> Stats:
        """The engine's counters and RocksDB figures (a :class:`Stats`)."""
        return Stats(**self._engine.stats())

    def read_outbox(self, max_entries: int = 100, *,
                    after: int = 0) -> list[OutboxEntry]:
        """Up to ``max_entries`` unacknowledged, durable outbox entries,
        oldest first (only those after position ``after``, if given). Does
        not consume: the same entries come back until
        :meth:`ack_outbox`."""
        if max_entries < 0:
            raise InvalidArgument(f"max_entries must be > 0, got "
                                  f"{max_entries}")
        return [OutboxEntry(*e)
                for e in self._engine.read_outbox(max_entries, after)]

    def ack_outbox(self, position: int) -> None:
        """Removes every outbox entry up to ``position``."""
        if position < 0:
            raise InvalidArgument(f"position must be > 0, got {position}")
        self._engine.ack_outbox(position)

    def stream_time(self, source: str, partition: int = 0) -> float | None:
        """The committed stream time of (source, partition): the largest
        event time of its committed messages (seconds since the epoch),
        never decreasing; None if none carried one."""
        return self._engine.stream_time(source, partition)

    def next_timer(self, source: str, partition: int,
                   domain: TimeDomain) -> TimerFire | None:
        """The earliest committed timer of (source, partition) in
        ``domain``, due or not, or None."""
        timer = self._engine.next_timer(source, partition, domain)
        return None if timer is None else TimerFire(*timer)

    def fire_timers(self, source: str, partition: int, domain: TimeDomain,
                    up_to: float | datetime.datetime | None, max: int,
                    handler: TimerHandler) -> int:
        """Fires the due timers of (source, partition) in ``domain``
        (a :class:`TimeDomain`), earliest first, at most ``max``: those at
        or before ``up_to`` (seconds since the epoch or a datetime; None: no
        bound) and, for EVENT, the partition's stream time, for PROCESSING,
        the engine's clock. Each runs ``handler(txn, timer)`` (a
        :class:`TimerFire`) in a txn of the timer's partition, whose writes,
        emits and timers commit in the same write as the timer's deletion.
        Returns how many fired.

        A handler that raises keeps its timer (it fires again on a later
        call): the fires before it stay committed and the exception is
        raised again. One that raises :class:`PermanentError` deletes its
        timer without its effects (dead-lettered,
        ``Stats.timers_dead_lettered``) and the firing goes on. Raises
        InvalidArgument for ``max`` 0, a bad source or partition;
        FailedPrecondition on a closed engine or from inside one of its
        handlers.
        """
        if max < 0:
            raise InvalidArgument(f"max must be > 0, got {max}")
        if not callable(handler):
            raise TypeError("handler must be callable")

        def call(txn: Txn, timer: tuple) -> Any:
            return handler(txn, TimerFire(*timer))

        return self._engine.fire_timers(source, partition, domain, up_to, max,
                                        call)
