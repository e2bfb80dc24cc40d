"""Service and ServiceGroup: an ADR-32 ("micro") service on one connection,
its endpoints on queue subscriptions, discovery on ``$SRV.PING|INFO|STATS``,
handlers on a pool of worker threads.

Threads: requests arrive on the loop thread and are queued to the pool
(``pool.py``); the discovery requests are answered on the loop thread at
once, from the counters under ``_lock``, so that a busy pool never hides a
service from ``nats micro ls``. A handler runs on a pool thread with no lock
held and may call anything, ``stop()`` and ``drain()`` of its service too.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import secrets
import string
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import errors, options
from .._core.connection import Connection, Resource
from .._core import otel
from .._core.message import Msg, WireMsg
from .model import EndpointInfo, EndpointStats, ServiceInfo, ServiceStats, VERBS, control_subjects, to_json
from .pool import WorkerPool
from .request import ServiceRequest
from .._core.logfields import log_fields

__all__ = ["Service", "ServiceGroup", "Handler"]

_log = logging.getLogger("jetstream_sync.services")

Handler = Callable[[ServiceRequest], Any]

# Requests waiting for a handler thread beyond this are dropped (the
# requester times out) and reported as a slow consumer: nats-py's default
# pending limit of a subscription.
PENDING_LIMIT = 512 * 1024
_ID_ALPHABET = string.ascii_letters + string.digits
_STOPPED = ("503", "service stopped")  # the answer to a request queued when the service stops


def _new_id() -> str:
    """A service instance id: 22 random base-62 characters, as a NUID."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(22))


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


@dataclass
class _Endpoint:
    """One endpoint; its counters are under the service's ``_lock``."""

    name: str
    subject: str
    queue_group: str
    metadata: Dict[str, str]
    handler: Handler
    sid: Optional[int] = None
    num_requests: int = 0
    num_errors: int = 0
    last_error: str = ""
    processing_time: int = 0  # nanoseconds

    def stats(self) -> EndpointStats:
        avg = self.processing_time // self.num_requests if self.num_requests else 0
        return EndpointStats(self.name, self.subject, self.queue_group, self.num_requests, self.num_errors,
                             self.last_error, self.processing_time, avg)  # fmt: skip


class ServiceGroup:
    """Endpoints under a common subject prefix (ADR-32 groups); groups nest.
    Made by :meth:`Service.add_group` or :meth:`ServiceGroup.add_group`."""

    def __init__(self, service: "Service", prefix: str, queue_group: str) -> None:
        self._service = service
        self.prefix = prefix
        self.queue_group = queue_group

    def __repr__(self) -> str:
        return f"<jetstream_sync.ServiceGroup {self.prefix!r} queue_group={self.queue_group!r}>"

    def add_endpoint(
        self,
        name: str,
        handler: Handler,
        *,
        subject: Optional[str] = None,
        queue_group: Optional[str] = None,
        metadata: Optional[Dict[str, str]] = None,
    ) -> None:
        """Serve ``handler(request)`` on ``<prefix>.<subject>`` (``subject``
        defaults to ``name``; it may hold wildcards) in ``queue_group``
        (default: the group's, then the service's, then "q").

        ``name`` is ``A-Z a-z 0-9 - _``. The handler gets a
        :class:`ServiceRequest`; it runs on one of the service's worker
        threads. If it raises :class:`ServiceError` the request is answered
        with that error; any other exception is logged with its traceback and
        answered with a 500 service error."""
        self._service._add(self.prefix, self.queue_group, name, handler, subject, queue_group, metadata)

    def endpoint(
        self,
        name: str,
        *,
        subject: Optional[str] = None,
        queue_group: Optional[str] = None,
        metadata: Optional[Dict[str, str]] = None,
    ) -> Callable[[Handler], Handler]:
        """:meth:`add_endpoint` as a decorator: ``@svc.endpoint("add")``; the
        function is returned unchanged."""

        def register(handler: Handler) -> Handler:
            self.add_endpoint(name, handler, subject=subject, queue_group=queue_group, metadata=metadata)
            return handler

        return register

    def add_group(self, name: str, *, queue_group: Optional[str] = None) -> "ServiceGroup":
        """A group whose prefix is ``<this prefix>.<name>`` (no '>'), with
        ``queue_group`` (default: this group's) for its endpoints."""
        prefix = options.group_prefix(self.prefix, name)
        return ServiceGroup(self._service, prefix, options.queue_group(queue_group, self.queue_group))


class Service(ServiceGroup):
    """A running ADR-32 service, made by :meth:`Client.add_service
    <jetstream_sync.Client.add_service>`: ``name``, ``version``, ``id``
    (unique per instance), endpoints and groups, discovery, stats. It is
    its own root group: ``add_endpoint``, ``endpoint`` and ``add_group``
    are :class:`ServiceGroup`'s, with no prefix.

    It answers ``$SRV.PING``, ``$SRV.INFO`` and ``$SRV.STATS`` (each also
    ``.<name>`` and ``.<name>.<id>``) as soon as it is made. ``with`` drains
    it at the end of the block. Every method may be called from any thread,
    handlers included.
    """

    def __init__(self, conn: Connection, opts: options.ServiceOptions) -> None:
        super().__init__(self, "", opts.queue_group)
        self._conn = conn
        self.name = opts.name
        self.version = opts.version
        self.description = opts.description
        self.metadata = dict(opts.metadata)
        self.id = _new_id()
        self._lock = threading.Lock()  # guards _endpoints, their counters, _started and _state
        self._endpoints: List[_Endpoint] = []
        self._started = _now()
        self._state = "running"  # -> "draining" | "stopping" -> "stopped"
        self._ended = threading.Event()  # set with "stopped"
        self._discovery: List[int] = []  # sids of the discovery subscriptions
        self._slow = False  # in a slow-consumer episode (reported once per episode)
        self._pool: WorkerPool[Tuple[_Endpoint, Msg]] = WorkerPool(
            self._handle, opts.workers, f"jetstream-sync-service-{opts.name}", PENDING_LIMIT
        )
        self._resource = _OnConnection(self)  # held here: the connection keeps it weakly
        try:
            conn.register(self._resource)
        except BaseException:
            self._pool.cancel()  # refused (closed, draining): its threads end now
            raise
        try:
            conn.run(self._subscribe_discovery(), 10.0)
        except BaseException:
            self.stop()
            raise

    def __repr__(self) -> str:
        return f"<jetstream_sync.Service {self.name} {self.version} id={self.id} {self._state}>"

    def _add(
        self, prefix: str, group_queue: str, name: str, handler: Handler,
        subject: Optional[str], queue_group: Optional[str], metadata: Optional[Dict[str, str]],
    ) -> None:  # fmt: skip
        """Check, then subscribe one endpoint (any thread)."""
        conn = self._conn
        conn.check_new()
        ep = _Endpoint(
            name=options.endpoint_name(name),
            subject=options.endpoint_subject(prefix, name if subject is None else subject),
            queue_group=options.queue_group(queue_group, group_queue),
            metadata=options.service_metadata("endpoint metadata", metadata),
            handler=options.handler("endpoint handler", handler),
        )
        options.control_line(ep.subject, ep.queue_group)
        self._check_running()
        ep.sid = conn.run(conn.subscribe(ep.subject, self._receiver(ep), ep.queue_group, denied=self._refused(ep)), 10.0)
        with self._lock:
            running = self._state == "running"
            if running:
                self._endpoints.append(ep)
        if not running:  # stopped while subscribing: the endpoint must not outlive the service
            conn.run(_unsubscribe_all(conn, [ep.sid], False, 5.0), 6.0)
            self._check_running()

    def _check_running(self) -> None:
        with self._lock:
            if self._state != "running":
                raise errors.ConnectionClosedError(f"service {self.name} is {self._state}: no endpoint can be added")

    def _refused(self, ep: _Endpoint) -> Callable[[BaseException], None]:
        """Loop thread: the server refused the endpoint's subscription (permissions)."""

        def refused(err: BaseException) -> None:
            _log.error("service %s endpoint %s: the server refused the subscription to %s: %s",
                       self.name, ep.name, ep.subject, err,
                       extra=log_fields(service=self.name, subject=ep.subject))  # fmt: skip
            with self._lock:
                ep.num_errors += 1
                ep.last_error = str(err)

        return refused

    # -- the loop side -------------------------------------------------------------

    async def _subscribe_discovery(self) -> None:
        """Loop thread: the nine discovery subscriptions (no queue group)."""
        for verb in VERBS:
            for subject in control_subjects(verb, self.name, self.id):
                self._discovery.append(await self._conn.subscribe(subject, self._discovery_handler(verb)))

    def _discovery_handler(self, verb: str) -> Callable[[bytes, bytes, bytes, Optional[bytes]], None]:
        def answer(subject: bytes, reply: bytes, data: bytes, hdrs: Optional[bytes]) -> None:
            if not reply:
                return
            if verb == "PING":
                body = ServiceInfo(self.name, self.id, self.version, self.metadata).ping_dict()
            else:
                body = (self.stats() if verb == "STATS" else self.info()).as_dict()
            self._conn.send_pub(reply.decode(), "", to_json(body))

        return answer

    def _receiver(self, ep: _Endpoint) -> Callable[[bytes, bytes, bytes, Optional[bytes]], None]:
        def receive(subject: bytes, reply: bytes, data: bytes, hdrs: Optional[bytes]) -> None:
            conn = self._conn
            if self._pool.put((ep, WireMsg(subject, reply, data, conn, hdrs))):
                self._slow = False
            elif self._state == "running" and not self._slow:
                self._slow = True
                conn.report_error(errors.SlowConsumerError(
                    f"service {self.name}: {PENDING_LIMIT} requests wait for a handler thread; dropping requests"),
                    subject=ep.subject, service=self.name)  # fmt: skip

        return receive

    # -- the handler threads -----------------------------------------------------------

    def _handle(self, item: Tuple[_Endpoint, Msg]) -> None:
        ep, msg = item
        req = ServiceRequest(msg)
        start = time.perf_counter_ns()
        raised = ""  # "code:description" of an exception, counted even when the answer was sent before it
        try:
            if (tr := otel.active) is None:
                ep.handler(req)
            else:
                with tr.process(msg):
                    ep.handler(req)
        except errors.ServiceError as exc:
            raised = f"{exc.code}:{exc.description}"
            self._answer_error(req, exc.code, exc.description, exc.data)
        except Exception as exc:
            _log.error("service %s endpoint %s: the handler raised on %s", self.name, ep.name, req.subject,
                       exc_info=exc, extra=log_fields(service=self.name, subject=req.subject))  # fmt: skip
            description = _one_line(f"{type(exc).__name__}: {exc}")
            raised = f"500:{description}"
            self._answer_error(req, 500, description)
        elapsed = time.perf_counter_ns() - start
        error = req.error or raised
        with self._lock:
            ep.num_requests += 1
            ep.processing_time += elapsed
            if error:
                ep.num_errors += 1
                ep.last_error = error

    def _answer_error(self, req: ServiceRequest, code: Any, description: str, data: bytes = b"") -> None:
        """Answer a request that has no answer yet with a service error (a
        handler that answered, then raised, is not answered twice)."""
        if not req.reply or req.answered:
            return
        try:
            req.respond_error(code, description, data)
        except errors.JetStreamError as exc:  # the connection went, or a bad code raised by the handler
            _log.warning("service %s: could not answer %s with an error: %s", self.name, req.subject, exc,
                         extra=log_fields(service=self.name, subject=req.subject))

    # -- state ----------------------------------------------------------------------

    def info(self) -> ServiceInfo:
        """What ``$SRV.INFO`` answers (``.as_dict()`` is its JSON)."""
        with self._lock:
            eps = [EndpointInfo(e.name, e.subject, e.queue_group, dict(e.metadata)) for e in self._endpoints]
        return ServiceInfo(self.name, self.id, self.version, self.metadata, self.description, eps)

    def stats(self) -> ServiceStats:
        """What ``$SRV.STATS`` answers: every endpoint's counters."""
        with self._lock:
            eps = [e.stats() for e in self._endpoints]
            started = self._started
        return ServiceStats(self.name, self.id, self.version, self.metadata, started, eps)

    def reset(self) -> None:
        """Zero every endpoint's counters and set ``started`` to now."""
        with self._lock:
            for e in self._endpoints:
                e.num_requests = e.num_errors = e.processing_time = 0
                e.last_error = ""
            self._started = _now()

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` or :meth:`drain` began (no new requests)."""
        return self._state != "running"

    # -- ending -------------------------------------------------------------------------

    def stop(self) -> None:
        """End now: remove every subscription; requests queued and not
        started are answered with a 503 service error ("service stopped"),
        the handlers running finish in the background (see :meth:`wait`).
        Idempotent."""
        if not self._begin_end("stopping"):
            return
        self._remove_interest(drain=False, timeout=5.0)
        self._refuse(self._pool.cancel())
        self._end()

    def drain(self, timeout: float = 10.0) -> bool:
        """End gracefully within ``timeout`` seconds (default 10): no new
        requests (the endpoints' subscriptions are drained, so requests the
        server already routed here still come), every request received is
        handled, then discovery ends. True when all of it was done in time;
        otherwise what is left is answered as by :meth:`stop`."""
        t = options.duration("timeout", timeout)
        if self._conn.inherited:
            return True  # a forked child: the parent's service is the parent's to end
        self._conn.check_wait("the service's handlers", ready=self._pool.idle)
        return self._drain(t, threading.current_thread())

    def _drain(self, t: float, waiter: threading.Thread) -> bool:
        """:meth:`drain` for ``waiter``: if it is a handler thread, its own request is not waited for."""
        if not self._begin_end("draining"):
            return self._wait(t, waiter)
        deadline = time.monotonic() + t
        self._remove_interest(drain=True, timeout=t, discovery=False)
        self._pool.close()
        done = self._pool.join(max(deadline - time.monotonic(), 0.0), waiter)
        if not done:
            _log.warning("service %s: drain timed out after %.1fs with %d requests left",
                         self.name, t, self._pool.queued, extra=log_fields(service=self.name))  # fmt: skip
            self._refuse(self._pool.cancel())
        self._remove_interest(drain=False, timeout=max(deadline - time.monotonic(), 0.5), endpoints=False)
        self._end()
        return done

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait up to ``timeout`` seconds (None: no limit) until the service
        ended and its handlers returned; True when so."""
        t = options.optional_timeout("timeout", timeout)
        self._conn.check_wait("the service to end", ready=self._ended.is_set() and self._pool.idle)
        return self._wait(t, threading.current_thread())

    def _wait(self, t: Optional[float], waiter: threading.Thread) -> bool:
        deadline = None if t is None else time.monotonic() + t
        if not self._ended.wait(t):
            return False
        return self._pool.join(None if deadline is None else max(deadline - time.monotonic(), 0.0), waiter)

    def _begin_end(self, state: str) -> bool:
        with self._lock:
            if self._state != "running":
                return False
            self._state = state
            return True

    def _end(self) -> None:
        with self._lock:
            self._state = "stopped"
        self._ended.set()
        if self._pool.join(0.0):  # else it stays known until collected: a client's drain waits for the handlers
            self._conn.unregister(self._resource)

    def _remove_interest(self, drain: bool, timeout: float, discovery: bool = True, endpoints: bool = True) -> None:
        with self._lock:
            sids = [e.sid for e in self._endpoints if e.sid is not None] if endpoints else []
        if discovery:
            sids += self._discovery
        conn = self._conn
        if not sids or conn.closing:
            return
        try:
            conn.run(_unsubscribe_all(conn, sids, drain, timeout), timeout + 1.0)
        except errors.JetStreamError as exc:
            _log.debug("service %s: unsubscribe: %r", self.name, exc, extra=log_fields(service=self.name))

    def _refuse(self, left: List[Tuple[_Endpoint, Msg]]) -> None:
        for _, msg in left:
            self._answer_error(ServiceRequest(msg), *_STOPPED)

    def _connection_closing(self) -> None:
        if self._begin_end("stopping"):
            self._pool.cancel()  # nothing can be answered any more
            self._end()

    def __enter__(self) -> "Service":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.drain()


class _OnConnection(Resource):
    """What the connection's close, drain and SIGTERM handling reach of a service."""

    def __init__(self, service: Service) -> None:
        self._service = service

    def drain_for_shutdown(self, timeout: float) -> Optional[threading.Event]:
        done = threading.Event()
        service = self._service
        asked_by = threading.current_thread()  # one of its handlers, maybe: not waited for

        def run() -> None:
            try:
                service._drain(timeout, asked_by)
            finally:
                done.set()

        threading.Thread(target=run, name=f"jetstream-sync-service-{service.name}-drain", daemon=True).start()
        return done

    def connection_closing(self, error: BaseException) -> None:
        self._service._connection_closing()


async def _unsubscribe_all(conn: Connection, sids: List[int], drain: bool, timeout: float) -> None:
    """Remove the interest of ``sids``; returns once the server has taken the
    unsubscribes in (bounded by ``timeout``), so that a request sent from
    anywhere after that meets no responders instead of silence."""
    deadline = time.monotonic() + timeout
    await asyncio.gather(*(conn.unsubscribe(sid, drain=drain, timeout=timeout) for sid in sids))
    if not drain:  # a drain waits for the server itself
        await conn.flush_quietly(max(deadline - time.monotonic(), 0.1))


def _one_line(text: str, limit: int = 200) -> str:
    """Header-safe text: no CR/LF, at most ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
