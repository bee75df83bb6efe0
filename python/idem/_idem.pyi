"""Type stubs of idem's C extension (python/binding.cc, python/module.cc).
Use the package idem; these classes are re-exported there."""

import datetime
import enum
from typing import Any, Callable, Sequence

C_API_VERSION: int
C_API_MINOR: int
VERSION: str

_Bytes = bytes | bytearray
_Key = bytes | bytearray | str


class Message:
    """One delivery to process: immutable."""

    def __init__(self, id: _Key, payload: _Bytes = b"", *,
                 source: _Key | None = None, partition: int = 0,
                 offset: int = -1,
                 ttl: float | datetime.timedelta | None = None,
                 fingerprint: _Key | None = None,
                 event_time: float | datetime.datetime | None = None
                 ) -> None: ...
    @property
    def id(self) -> bytes: ...
    @property
    def payload(self) -> bytes: ...
    @property
    def source(self) -> str | None: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def event_time(self) -> float | None: ...


class Txn:
    """A handler's view of the state; valid during its handler call only."""

    def get(self, key: _Key) -> bytes | None: ...
    def put(self, key: _Key, value: _Bytes, *,
            ttl: float | datetime.timedelta | None = None) -> None: ...
    def delete(self, key: _Key) -> None: ...
    def set_result(self, value: _Bytes) -> None: ...
    def emit(self, destination: _Key, key: _Key, value: _Bytes, *,
             partition: int = -1, tombstone: bool = False,
             headers: Sequence[tuple[_Key, _Key]] = ()) -> None: ...
    def scan(self, begin: _Key, end: _Key | None = None, *,
             reverse: bool = False,
             limit: int = 0) -> list[tuple[bytes, bytes]]: ...
    def scan_prefix(self, prefix: _Key, *, reverse: bool = False,
                    limit: int = 0) -> list[tuple[bytes, bytes]]: ...
    def merge(self, key: _Key, op: MergeOp, operand: int | _Bytes) -> None: ...
    def delete_range(self, begin: _Key, end: _Key) -> None: ...
    @property
    def stream_time(self) -> float | None: ...
    def set_timer(self, timer_key: _Key, domain: TimeDomain,
                  fire_at: float | datetime.datetime,
                  payload: _Bytes = b"") -> None: ...
    def cancel_timer(self, timer_key: _Key) -> None: ...


class TimeDomain(enum.Enum):
    EVENT: int
    PROCESSING: int


class MergeOp(enum.Enum):
    ADD_INT64: int
    MAX_INT64: int
    MIN_INT64: int
    APPEND: int


class Outcome(enum.Enum):
    PROCESSED: int
    DUPLICATE: int
    FAILED: int
    CONFLICT: int


class Result:
    """What the engine made of one message."""

    @property
    def outcome(self) -> Outcome: ...
    @property
    def value(self) -> bytes: ...
    @property
    def error(self) -> BaseException | None: ...
    @property
    def permanent(self) -> bool: ...
    @property
    def sequence(self) -> int: ...
    @property
    def first_processed_at(self) -> float | None: ...


class _Durability(enum.Enum):
    SYNC: int
    BUFFERED: int


class _DedupeScope(enum.Enum):
    STORE: int
    PARTITION: int


class _Engine:
    def __init__(self, path: str, options: dict[str, Any]) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def last_sequence(self) -> int: ...
    def process_batch(self, messages: list[Any],
                      handler: Callable[[Txn, Message], Any]
                      ) -> list[Result]: ...
    def get_state(self, key: _Key) -> bytes | None: ...
    def scan_state(self, begin: _Key, end: _Key | None, reverse: bool,
                   limit: int) -> list[tuple[bytes, bytes]]: ...
    def seen(self, id: _Key) -> bool: ...
    def forget(self, id: _Key, source: _Key | None,
               partition: int) -> None: ...
    def committed_offset(self, source: _Key, partition: int) -> int | None: ...
    def wait_durable(self, sequence: int | None) -> None: ...
    def stats(self) -> dict[str, int | float]: ...
    def read_outbox(self, max_entries: int, after: int
                    ) -> list[tuple[int, str, str, int, bytes, bytes, bool,
                                    list[tuple[str, bytes]]]]: ...
    def ack_outbox(self, position: int) -> None: ...
    def stream_time(self, source: _Key, partition: int) -> float | None: ...
    def next_timer(self, source: _Key, partition: int, domain: TimeDomain
                   ) -> tuple[str, int, TimeDomain, bytes, float,
                              bytes] | None: ...
    def fire_timers(self, source: _Key, partition: int, domain: TimeDomain,
                    up_to: float | datetime.datetime | None, max: int,
                    handler: Callable[[Txn, tuple[str, int, TimeDomain, bytes,
                                                  float, bytes]], Any]
                    ) -> int: ...


class KafkaRecord:
    """A Kafka record as a NativeConsumer handler sees it (only when the
    extension was built with librdkafka)."""

    id: bytes
    payload: bytes
    source: str
    topic: str
    partition: int
    offset: int
    key: bytes
    headers: list[tuple[str, bytes]]
    timestamp_ms: int


def partition_state_key(source: str, partition: int, key: _Key) -> bytes:
    """The state key of a handler's write of key through its partition's
    view (only when the extension was built with librdkafka)."""
    ...


class _KafkaConsumer:
    """idem::kafka::Consumer; see idem.kafka.NativeConsumer (only when the
    extension was built with librdkafka)."""

    def __init__(self, engine: _Engine, options: dict[str, Any]) -> None: ...
    def poll_batch(self, handler: Callable[[Txn, KafkaRecord], Any]
                   ) -> dict[str, int | bool]: ...
    def run(self, handler: Callable[[Txn, KafkaRecord], Any]) -> None: ...
    def stop(self) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def assignment(self) -> list[tuple[str, int]]: ...
    def pause(self, topic: str, partition: int) -> None: ...
    def resume(self, topic: str, partition: int) -> None: ...
    def stats(self) -> dict[str, Any]: ...


def _set_release_gil_for_testing(release: bool) -> None: ...
