"""A ready worker: ``handler(msg)`` on N threads sharing one ``messages()``
context, acks and NAKs on the handler's outcome, a graceful end on SIGTERM /
SIGINT or :meth:`Worker.stop`, periodic stats and an exit status.

The lifecycle, on the main thread of :meth:`Worker.run`::

    connect (unless given a client) -> consumer -> messages() -> N handler threads
    wait, logging stats every stats_interval
    stop requested: drain (no new pulls; what was received is still handled)
                    -> join the threads -> if time runs short: stop (NAK the rest)
                    -> send queued acks and close (or flush a client we were given)
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from .. import errors, options
from ..client import Client, connect
from .._core.connection import check_servers, redact_url
from .signals import catch_signals
from ..contexts import MessagesContext
from .._core import otel
from .._core.message import Msg
from .._core.logfields import log_fields, message_fields

__all__ = ["Worker", "WorkerStats", "run_worker"]

_log = logging.getLogger("jetstream_sync.worker")  # the logger name users configure, kept from before the move

Handler = Callable[[Msg], Any]
Around = Callable[[], ContextManager[Any]]

# Share of shutdown_timeout kept for NAKing what is left and closing.
_CLOSE_SHARE = 0.2
_MIN_CLOSE = 0.5  # seconds a close always gets, to send the queued acks
_SIGNAL_POLL = 0.1  # how often the main thread looks for a signal noted by the handler
# Default redelivery of a failed message: 1 s, doubling per delivery, at most 60 s,
# so a handler that fails every time does not spin (and flood the log).
_RETRY_FIRST, _RETRY_DOUBLINGS = 1.0, 6
_RETRY_MAX = 60.0


@dataclass(frozen=True)
class WorkerStats:
    """Counters of a worker: handler calls that returned / raised, running
    now, and the counters of its ``messages()`` context (``PullStats.as_dict()``;
    empty before consuming starts)."""

    handled: int = 0
    failed: int = 0
    in_flight: int = 0
    consume: Dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> Dict[str, Any]:
        """Everything as one flat dict: the worker's counters and the context's."""
        return {"handled": self.handled, "failed": self.failed, "in_flight": self.in_flight, **self.consume}


class Worker:
    """Run ``handler(msg)`` for every message of ``stream``/``consumer`` on
    ``concurrency`` threads until stopped (see :func:`run_worker` for the options)."""

    def __init__(
        self,
        handler: Handler,
        *,
        stream: str,
        consumer: str,
        client: Any = None,
        servers: Union[str, Sequence[str], None] = None,
        connect_options: Optional[Mapping[str, Any]] = None,
        concurrency: int = 1,
        shutdown_timeout: float = 10.0,
        stats_interval: Optional[float] = 60.0,
        nak_delay: Optional[float] = None,
        signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT),
        around: Optional[Around] = None,
        thread_exit: Optional[Callable[[], Any]] = None,
        **pull_options: Any,
    ) -> None:
        self._handler = options.handler("worker handler", handler)
        self._stream = options.name("stream", stream)
        self._consumer = options.name("consumer", consumer)
        options.worker_client(client, Client, servers, connect_options)
        self._client = client
        self._servers: List[str] = [] if client is not None else _servers(servers)
        options.mapping("connect_options", connect_options)
        self._connect_options = dict(connect_options or {})
        self._concurrency = options.count("concurrency", concurrency)
        self._shutdown_timeout = options.duration("shutdown_timeout", shutdown_timeout)
        self._stats_interval = None if not stats_interval else options.duration("stats_interval", stats_interval, none_means="no stats lines")
        self._nak_delay = None if nak_delay is None else options.duration("nak_delay", nak_delay, allow_zero=True)
        self._signals = options.signal_numbers(signals)
        self._around = options.handler("around", around, optional=True)
        self._thread_exit = options.handler("thread_exit", thread_exit, optional=True)
        self._pull_options = dict(pull_options)
        _check_pull_options(self._pull_options)

        self._lock = threading.Lock()  # guards the counters and _fatal
        self._handled = self._failed = self._in_flight = 0
        self._fatal: Optional[BaseException] = None
        self._stopping = threading.Event()
        self._wake = threading.Event()  # stop requested, or the consume ended
        self._started = False
        self._signum: Optional[int] = None
        self._connecting = False  # a signal now interrupts connect() (main thread only)
        self._made: Any = None  # the client connect() returned, once it has
        self._close_by = 0.0  # monotonic deadline for closing our client (0: none yet)
        self._threads: List[threading.Thread] = []
        self._ctx: Optional[MessagesContext] = None
        self._max_deliver = -1  # the consumer's, read when consuming starts (-1: no limit)
        self._ack_policy = "explicit"  # the consumer's; with none or all a NAK may come to nothing

    def __repr__(self) -> str:
        return f"<jetstream_sync.Worker {self._stream}/{self._consumer} x{self._concurrency}>"

    # -- control ----------------------------------------------------------------

    def stop(self) -> None:
        """Begin the graceful end that SIGTERM begins: no new pulls, what was
        received is handled, acks are sent, then :meth:`run` returns 0.
        Any thread (a handler too); never blocks; idempotent."""
        self._stopping.set()
        self._wake.set()

    @property
    def stats(self) -> WorkerStats:
        """A snapshot, from any thread (for a metrics exporter, say)."""
        ctx = self._ctx
        consume = ctx.stats.as_dict() if ctx is not None else {}
        with self._lock:
            return WorkerStats(self._handled, self._failed, self._in_flight, consume)

    def run(self) -> int:
        """Consume until stopped; returns the exit status: 0 after a graceful
        stop, 1 when consuming could not start or ended by a fatal error (the
        reason is logged at ERROR). Signal handlers are installed only when
        called from the main thread; elsewhere use :meth:`stop`. Once only."""
        with self._lock:
            if self._started:
                raise errors.InvalidOptionError("a Worker runs once; make a new one")
            self._started = True
        restore = None
        if self._signals and threading.current_thread() is threading.main_thread():
            # One the parent ignores stays ignored (a shell's `worker &` ignores SIGINT,
            # nohup SIGHUP), as Python itself leaves an ignored SIGINT alone.
            wanted = [sig for sig in self._signals if signal.getsignal(sig) is not signal.SIG_IGN]
            if wanted:
                restore = catch_signals(wanted, self._on_signal)
        try:
            return self._run()
        finally:
            if restore is not None:
                restore()

    def _on_signal(self, signum: int) -> None:
        # A signal handler runs on the main thread between two bytecodes, maybe
        # inside the main loop's Event.wait(), whose lock Event.set() would then
        # wait for forever: only note the signal; the main loop acts on it.
        self._signum = signum
        if self._connecting:
            # connect() does not look at the note, and may retry for ever
            # (retry_on_failed_connect): end it as Ctrl-C would, nothing was received yet.
            self._connecting = False
            raise _SignalWhileConnecting(signum)

    # -- the main thread ------------------------------------------------------------

    def _run(self) -> int:
        client = self._client
        if client is None:
            where = ", ".join(redact_url(s) for s in self._servers)
            try:
                self._connecting = True
                _log.info("worker: connecting to %s", where,  # a signal after this line is not missed
                          extra=self._fields())
                try:
                    self._made = connect(self._servers, **self._connect_options)
                finally:
                    self._connecting = False
                client = self._made
            except _SignalWhileConnecting as sig:
                if self._made is not None:  # it came just after connect() returned
                    self._made.close(timeout=_MIN_CLOSE)
                _log.info("worker: signal %d while connecting: stopped before consuming", sig.signum,
                          extra=self._fields())
                return 0
            except errors.NoServersError as exc:  # it names the (redacted) URLs and why
                _log.error("worker: %s", exc, extra=self._fields())
                return 1
            except errors.JetStreamError as exc:
                _log.error("worker: cannot connect to %s: %s", where, exc, extra=self._fields())
                return 1
        try:
            return self._consume(client)
        finally:
            if self._client is None:
                left = self._close_by - time.monotonic() if self._close_by else _MIN_CLOSE * 4
                client.close(timeout=max(left, _MIN_CLOSE))

    def _consume(self, client: Any) -> int:
        name = f"{self._stream}/{self._consumer}"
        try:
            cons = client.jetstream().consumer(self._stream, self._consumer)
            config = cons.cached_info.config
            self._max_deliver = getattr(config, "max_deliver", None) or -1
            policy = getattr(config, "ack_policy", None) or "explicit"
            self._ack_policy = str(getattr(policy, "value", policy))  # a str, or nats-py's AckPolicy enum
            ctx = self._ctx = cons.messages(**self._fit_pulls(config, name))
        except errors.JetStreamError as exc:
            _log.error("worker: cannot consume %s: %s", name, exc, extra=self._fields())
            return 1
        self._threads = [
            threading.Thread(target=self._work, args=(ctx,), name=f"jetstream-worker-{i + 1}", daemon=True)
            for i in range(self._concurrency)
        ]
        _log.info("worker: consuming %s with %d thread(s)", name, self._concurrency, extra=self._fields())
        if self._ack_policy in _POLICY_FATE:
            _log.warning(
                "worker: %s has ack_policy %s: %s; use explicit",
                name,
                self._ack_policy,
                _POLICY_FATE[self._ack_policy][1],
                extra=self._fields(),
            )
        for t in self._threads:
            t.start()
        interval = self._stats_interval
        next_stats = None if interval is None else time.monotonic() + interval
        while not self._wake.wait(_SIGNAL_POLL):
            if self._signum is not None:
                self.stop()
                break
            if next_stats is not None and interval is not None and time.monotonic() >= next_stats:
                self._log_stats("worker stats")
                next_stats += interval
        if self._stopping.is_set():
            why = f"signal {self._signum}" if self._signum is not None else "stop()"
            _log.info("worker: %s: stopping within %.1fs", why, self._shutdown_timeout, extra=self._fields())
        self._shutdown(client, ctx)
        self._log_stats("worker stopped")
        fatal = self._fatal
        if fatal is not None and not self._stopping.is_set():
            _log.error("worker: consuming %s ended: %s: %s", name, type(fatal).__name__, fatal, extra=self._fields())
            return 1
        return 0

    def _shutdown(self, client: Any, ctx: Any) -> None:
        """Drain, wait for the handlers, NAK what is left when time runs short,
        and send the queued acks: all within shutdown_timeout (a close gets at
        least _MIN_CLOSE)."""
        limit = self._shutdown_timeout
        deadline = time.monotonic() + limit
        ctx.drain()
        self._join(deadline - limit * _CLOSE_SHARE)
        # NAKs what was received and not handed out (nothing after a complete
        # drain). stop() waits for the server (up to the API timeout) when it is
        # slow or gone: on a thread of its own, so the deadline still holds.
        stopper = threading.Thread(target=ctx.stop, name="jetstream-worker-stop", daemon=True)
        stopper.start()
        stopper.join(max(deadline - limit * _CLOSE_SHARE / 2 - time.monotonic(), 0.0))
        if self._alive():
            self._join(deadline - limit * _CLOSE_SHARE / 2)
            left = self._alive()
            if left:
                _log.warning(
                    "worker: %d handler(s) still running after %.1fs; their messages are redelivered after AckWait",
                    left,
                    limit,
                    extra=self._fields(),
                )
        self._close_by = deadline
        rest = max(deadline - time.monotonic(), _MIN_CLOSE)
        if self._client is not None and not client.is_closed:
            try:
                client.flush(timeout=rest)  # a client we were given stays open; its acks go out now
            except errors.JetStreamError as exc:
                _log.warning("worker: sending the last acks failed: %s", exc, extra=self._fields())
        # else: _run closes the client we made, which sends the queued acks

    def _fit_pulls(self, config: Any, name: str) -> Dict[str, Any]:
        """The pull options within the consumer's max_batch / max_expires /
        max_bytes: the server refuses a larger pull every time (409, a
        transient status), and the worker would wait for ever without a message."""
        pull = dict(self._pull_options)
        given = options.consume_options(**{k: v for k, v in pull.items() if k in options.CONSUME_OPTION_NAMES})
        for option, limit_name, wanted in (
            ("max_messages", "max_batch", given.max_messages),
            ("expires", "max_expires", given.expires),
            ("max_bytes", "max_bytes", given.max_bytes),
        ):
            limit = getattr(config, limit_name, None) or 0
            if 0 < limit < wanted:
                _log.warning("worker: %s has %s %s: %s %s instead of %s",
                             name, limit_name, limit, option, limit, wanted, extra=self._fields())  # fmt: skip
                pull[option] = limit
        return pull

    def _join(self, until: float) -> None:
        for t in self._threads:
            t.join(max(until - time.monotonic(), 0.0))

    def _alive(self) -> int:
        return sum(t.is_alive() for t in self._threads)

    def _log_stats(self, what: str) -> None:
        # Every counter every time, so that the line parses the same way; statuses when any came.
        counters = self.stats.as_dict()
        statuses = counters.pop("statuses", None)
        line = " ".join(f"{k}={v}" for k, v in counters.items())
        if statuses:
            line += " statuses=" + ",".join(f"{k!r}:{v}" for k, v in sorted(statuses.items()))
        _log.info("%s: %s", what, line, extra=self._fields())

    # -- handler threads --------------------------------------------------------------

    def _work(self, ctx: Any) -> None:
        try:
            for msg in ctx:
                self._handle(msg)
        except errors.JetStreamError as exc:  # the terminal error that ended the consume
            with self._lock:
                if self._fatal is None:
                    self._fatal = exc
            self._wake.set()
        except BaseException as exc:  # SystemExit from a handler, say: the worker ends, and not with 0
            _log.exception("worker: handler thread %s died", threading.current_thread().name, extra=self._fields())
            with self._lock:
                if self._fatal is None:
                    self._fatal = exc
        finally:
            self._wake.set()  # drained to the end, or failed: the main thread looks
            if self._thread_exit is not None:
                try:
                    self._thread_exit()
                except Exception:
                    _log.exception("worker: thread_exit raised", extra=self._fields())

    def _handle(self, msg: Msg) -> None:
        with self._lock:
            self._in_flight += 1
        ok = False
        try:
            with self._around() if self._around is not None else contextlib.nullcontext():
                if (tr := otel.active) is None:
                    result = self._handler(msg)
                else:
                    with tr.process(msg):
                        result = self._handler(msg)
            ok = not _body_not_run(result)
            if not ok:
                _log.error(
                    "worker: handler returned %s for %s, so its body never ran; %s (give a plain function)",
                    type(result).__name__,
                    _describe(msg),
                    self._fate(msg),
                    extra=self._msg_fields(msg),
                )
        except Exception:
            _log.exception("worker: handler failed for %s; %s", _describe(msg), self._fate(msg),
                           extra=self._msg_fields(msg))
        finally:
            with self._lock:
                self._in_flight -= 1
                if ok:
                    self._handled += 1
                else:
                    self._failed += 1
            self._settle(msg, ok)

    def _fields(self) -> Dict[str, Any]:
        """The log fields of this worker's records: its stream and consumer."""
        return log_fields(stream=self._stream, consumer=self._consumer)

    def _msg_fields(self, msg: Msg) -> Dict[str, Any]:
        """A message's log fields: this worker's stream and consumer, the message's subject and sequence."""
        return {**message_fields(msg), **self._fields()}

    def _fate(self, msg: Msg) -> str:
        """What becomes of a failed message, for its log line: a NAK under
        ack_policy none or all, or of the last delivery max_deliver allows,
        brings nothing back, and the log must not promise a retry."""
        fate = _POLICY_FATE.get(self._ack_policy)
        if fate is not None:
            return fate[0]
        try:
            delivered = msg.metadata.num_delivered
        except errors.JetStreamError:
            return "NAK'd"
        if 0 < self._max_deliver <= delivered:
            return f"NAK'd, but not redelivered: that was delivery {delivered} of the consumer's max_deliver"
        return "NAK'd"

    def _retry_delay(self, msg: Msg) -> Optional[float]:
        """The NAK delay of a failed message: nak_delay if given (0: at once),
        else 1 s doubling with each delivery up to 60 s."""
        if self._nak_delay is not None:
            return self._nak_delay or None
        try:
            delivered = msg.metadata.num_delivered
        except errors.JetStreamError:
            delivered = 1
        return min(_RETRY_FIRST * (1 << min(max(delivered - 1, 0), _RETRY_DOUBLINGS)), _RETRY_MAX)

    def _settle(self, msg: Msg, ok: bool) -> None:
        """Ack after a return, NAK after a raise, unless the handler settled it."""
        if msg.is_acked:
            return
        try:
            if ok:
                msg.ack()
            else:
                msg.nak(self._retry_delay(msg))
        except errors.JetStreamError as exc:  # the client closed under a late handler
            _log.warning("worker: could not %s %s: %s", "ack" if ok else "nak", _describe(msg), exc,
                         extra=self._msg_fields(msg))


def run_worker(
    handler: Handler,
    *,
    stream: str,
    consumer: str,
    client: Any = None,
    servers: Union[str, Sequence[str], None] = None,
    connect_options: Optional[Mapping[str, Any]] = None,
    concurrency: int = 1,
    shutdown_timeout: float = 10.0,
    stats_interval: Optional[float] = 60.0,
    nak_delay: Optional[float] = None,
    signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT),
    around: Optional[Around] = None,
    thread_exit: Optional[Callable[[], Any]] = None,
    **pull_options: Any,
) -> int:
    """Run ``handler(msg)`` for every message of a pull consumer; returns the exit status.

    - ``handler`` is a plain function, called on one of ``concurrency``
      threads that share one ``consumer.messages(**pull_options)`` context
      (``max_messages``, ``max_bytes``, ``expires`` …). When it returns the
      message is acked, when it raises the exception is logged with its
      traceback and the message NAK'd for redelivery after ``nak_delay``
      seconds (0: at once; default: 1 s, doubling with each delivery up to
      60 s, so a message that fails every time does not spin) — unless the
      handler acked, NAK'd or termed it itself (``msg.term()``: never
      redeliver). The consumer's ``max_deliver`` bounds the attempts; the
      log line of the last one says it is not redelivered.
    - ``client``: a connected :class:`Client` (left open), or ``servers`` and
      ``connect_options`` to connect (closed at the end). Passwords in URLs
      never reach the log.
    - ``around()``: a context manager entered around each handler call (a
      framework's per-request setup); ``thread_exit()`` runs on each handler
      thread as it ends.
    - The first of ``signals`` (installed from the main thread only, and not
      over a signal the parent process ignores), or
      :meth:`Worker.stop`, begins a graceful end within ``shutdown_timeout``
      seconds: no new pulls, what was received is handled, queued acks are
      sent; what is left then is NAK'd. A second signal ends the process at once.
      A signal while still connecting ends the connect at once (status 0);
      :meth:`Worker.stop` takes effect once connected.
    - Counters (:attr:`Worker.stats`: the worker's and its context's) are
      logged at INFO every ``stats_interval`` seconds (None: never) and at the end.

    Returns 0 after a graceful stop, 1 when consuming could not start or
    ended by a fatal error (consumer deleted, connection closed for good,
    permission denied …), logged at ERROR. Bad options raise
    :class:`InvalidOptionError` before anything is sent.
    """
    return Worker(
        handler,
        stream=stream,
        consumer=consumer,
        client=client,
        servers=servers,
        connect_options=connect_options,
        concurrency=concurrency,
        shutdown_timeout=shutdown_timeout,
        stats_interval=stats_interval,
        nak_delay=nak_delay,
        signals=signals,
        around=around,
        thread_exit=thread_exit,
        **pull_options,
    ).run()


def _servers(servers: Union[str, Sequence[str], None]) -> List[str]:
    listed = [servers] if isinstance(servers, str) else list(servers or [])
    return check_servers([s.strip() if isinstance(s, str) else s for s in listed])


def _check_pull_options(given: Mapping[str, Any]) -> None:
    """Unknown names and bad consume values, before connecting (priority-group
    options are checked against the consumer's config when consuming starts)."""
    options.check_option_names(given, options.CONSUME_OPTION_NAMES + options.PRIORITY_OPTION_NAMES)
    options.consume_options(**{k: v for k, v in given.items() if k in options.CONSUME_OPTION_NAMES})


# Ack policies under which a failed message may not come back, whatever the
# NAK: (its log line's fate, the warning at start).
_POLICY_FATE = {
    "none": ("not redelivered: the consumer's ack_policy is none",
             "a message whose handler fails is not redelivered"),
    "all": ("NAK'd, but the ack of a later message settles it too (ack_policy all)",
            "the ack of a later message settles an earlier failed one, which is then not redelivered"),
}  # fmt: skip


class _SignalWhileConnecting(BaseException):
    """Raised by the signal handler into a connect() that is under way."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _body_not_run(result: Any) -> bool:
    """A handler that hides an async def or a generator (behind a decorator,
    say) returns an object whose code has not run: not a success."""
    if inspect.iscoroutine(result) or inspect.isgenerator(result) or inspect.isasyncgen(result):
        close = getattr(result, "close", None)  # an async generator has none, and needs none
        if close is not None:
            close()  # no "coroutine was never awaited" warning
        return True
    return False


def _describe(msg: Msg) -> str:
    try:
        meta = msg.metadata
    except errors.JetStreamError:
        return repr(msg.subject)
    return f"{msg.subject!r} (stream seq {meta.sequence.stream}, delivery {meta.num_delivered})"
