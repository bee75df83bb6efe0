"""idem's exceptions: one class per status code of the C API (absl's codes).

Every failing call raises a subclass of :class:`Error`, whose ``code`` is the
numeric code (``idem_code`` in ``idem/c.h``) and ``message`` the engine's
text. :class:`InvalidArgument` is also a :class:`ValueError`.
:class:`PermanentError` is raised *by a handler* to mark its message as
permanently failed.
"""

from __future__ import annotations


class Error(Exception):
    """A call into idem failed. ``code``: the status code (int); ``message``:
    the engine's text."""

    code = 2  # UNKNOWN

    def __init__(self, message: str = "", code: int | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class Cancelled(Error):
    code = 1


class Unknown(Error):
    code = 2


class InvalidArgument(Error, ValueError):
    """Bad input: a bad option, an empty or too long ID, a closed-over
    argument of the wrong range. Nothing ran and nothing was committed."""

    code = 3


class DeadlineExceeded(Error):
    code = 4


class NotFound(Error):
    code = 5


class AlreadyExists(Error):
    code = 6


class PermissionDenied(Error):
    code = 7


class ResourceExhausted(Error):
    """The disk is full (or memory ran out). Nothing was committed."""

    code = 8


class FailedPrecondition(Error):
    """The engine is in the wrong state for the call: closed, the store open
    in another engine, a call from inside one of its own handlers, or a
    transaction used after its handler returned."""

    code = 9


class Aborted(Error):
    code = 10


class OutOfRange(Error):
    code = 11


class Unimplemented(Error):
    code = 12


class Internal(Error):
    code = 13


class Unavailable(Error):
    """A retry-able I/O error. Nothing was committed."""

    code = 14


class DataLoss(Error):
    """The store is damaged."""

    code = 15


class Unauthenticated(Error):
    code = 16


_BY_CODE = {
    cls.code: cls
    for cls in (Cancelled, Unknown, InvalidArgument, DeadlineExceeded,
                NotFound, AlreadyExists, PermissionDenied, ResourceExhausted,
                FailedPrecondition, Aborted, OutOfRange, Unimplemented,
                Internal, Unavailable, DataLoss, Unauthenticated)
}


def _error_for(code: int, message: str) -> Error:
    """The exception for status code ``code`` (the C extension calls it)."""
    cls = _BY_CODE.get(code, Error)
    return cls(message, code)


class PermanentError(Exception):
    """Raised by a handler: the message failed for good (retrying cannot
    repair it). The engine remembers the failure with the message's dedupe
    record, drops the handler's writes and emits, advances the offset, and
    answers every redelivery with the same failure without running the
    handler, until the record expires or :meth:`Engine.forget` removes it.

    ``error`` is the cause: an exception or a string. An :class:`Error`
    cause keeps its code; any other is remembered as UNKNOWN."""

    def __init__(self, error: BaseException | str):
        super().__init__(error)
        self.error = error

    @property
    def code(self) -> int:
        return self.error.code if isinstance(self.error, Error) else 2

    def __str__(self) -> str:
        if isinstance(self.error, BaseException):
            return f"{type(self.error).__name__}: {self.error}"
        return str(self.error)
