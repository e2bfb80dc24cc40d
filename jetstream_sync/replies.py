"""The replies of one ``request_many`` (orbit.go's ``natsext.RequestMany``):
a blocking iterator over the messages that come back to one reply inbox,
ending at the first bound reached."""

from __future__ import annotations

import time
from typing import Any, Iterator, Optional, Protocol

from . import errors
from ._core.message import Msg, status_code
from .options import RequestManyOptions

__all__ = ["Replies"]


class _Inbox(Protocol):
    """What Replies needs of the core subscription on its inbox."""

    def next_msg(self, timeout: Optional[float] = 1.0) -> Msg: ...

    def unsubscribe(self) -> None: ...


class Replies:
    """Replies to one request, in the order they came; made by
    :meth:`Client.request_many <jetstream_sync.Client.request_many>`.

    Iteration ends (no exception) at the first of: ``max_messages`` replies
    handed out; ``max_wait`` seconds since the request was sent (replies
    received by then are still handed out, however late they are read); ``stall``
    seconds without a reply after the first one; a sentinel reply (not handed
    out). It raises :class:`NoRespondersError` when nobody listens on the
    subject and :class:`ConnectionClosedError` when the client closes under it.

    The inbox is unsubscribed as iteration ends, on :meth:`close`, on leaving
    a ``with`` block and when the object is dropped (a ``break``). Use from
    one thread at a time.
    """

    def __init__(self, inbox: _Inbox, opts: RequestManyOptions, subject: str) -> None:
        self._inbox = inbox
        self._opts = opts
        self._subject = subject
        self._deadline = time.monotonic() + opts.max_wait
        self._received = 0  # replies handed out
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<jetstream_sync.Replies {self._subject!r} {self._received} received, {state}>"

    @property
    def received(self) -> int:
        """Replies handed out so far."""
        return self._received

    @property
    def closed(self) -> bool:
        return self._closed

    def __iter__(self) -> Iterator[Msg]:
        return self

    def __next__(self) -> Msg:
        if self._closed:
            raise StopIteration
        opts = self._opts
        wait = self._deadline - time.monotonic()
        if self._received and opts.stall is not None:
            wait = min(wait, opts.stall)  # the stall gap counts from the last reply
        try:
            msg = self._inbox.next_msg(timeout=max(wait, 0.0))  # past the end: only what is here already
        except errors.TimeoutError:
            self.close()
            raise StopIteration from None
        except BaseException:
            self.close()
            raise
        if status_code(msg) == "503":
            self.close()
            raise errors.NoRespondersError(f"no responders for a request to {self._subject!r}")
        try:
            last = opts.sentinel is not None and opts.sentinel(msg)
        except BaseException:
            self.close()
            raise
        if last:
            self.close()
            raise StopIteration
        self._received += 1
        if opts.max_messages is not None and self._received >= opts.max_messages:
            self.close()
        return msg

    def close(self) -> None:
        """Unsubscribe the inbox; iteration ends. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._inbox.unsubscribe()
        except errors.JetStreamError:  # the client closed: its subscriptions are gone already
            pass

    def __enter__(self) -> "Replies":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # A `for` loop left by `break` drops the object: the inbox must not outlive it.
        if not getattr(self, "_closed", True):
            try:
                self.close()
            except Exception:  # noqa: S110  # never raise from a finalizer
                pass
