"""The subscribe workflow of ADR-15 and ADR-13, for code ported from nats-py:
``js.subscribe()`` and ``js.pull_subscribe()`` find the stream by subject,
bind to an existing consumer after checking it fits, or create one (and
delete it again on unsubscribe/drain), and return blocking subscriptions."""

from __future__ import annotations

import dataclasses
import datetime
import logging
from typing import Any, Callable, Dict, Optional

from . import errors, options
from ._core.jsapi import JsApi
from .contexts import ConsumeContext, MessagesContext
from .models import AckPolicy, ConsumerConfig, ConsumerInfo
from .ordered import OrderedConsumer
from .stream import make_consumer, make_push_consumer, pull_consumer, push_consumer
from .subscriptions import Caller, Handler, PullSubscription, PushSubscription, acks_off, auto_ack, delete_quietly


__all__ = ["PullSubscription", "PushSubscription", "bind_check"]

_log = logging.getLogger(__name__)

# Fields a caller's config must agree on with an existing consumer (ADR-15:
# "the configuration must match"); unset (None) fields are not compared.
_MUST_MATCH = (
    "description",
    "deliver_policy",
    "opt_start_seq",
    "opt_start_time",
    "ack_policy",
    "ack_wait",
    "max_deliver",
    "backoff",
    "replay_policy",
    "rate_limit_bps",
    "sample_freq",
    "max_waiting",
    "max_ack_pending",
    "idle_heartbeat",
    "headers_only",
    "deliver_subject",
    "max_batch",
    "max_expires",
    "max_bytes",
)
# ConsumerConfig() carries these whether or not the caller chose them: read
# as "not asked for", or a config naming only the consumer would refuse one
# with deliver_policy "new", and would create one delivering all.
_CLASS_DEFAULTS = {
    f.name: f.default
    for f in dataclasses.fields(ConsumerConfig)
    if f.default is not None and f.default is not dataclasses.MISSING
}


def asked(
    config: Optional[ConsumerConfig],
    extra: Optional[Dict[str, Any]] = None,
    idle_heartbeat: Optional[float] = None,
    flow_control: bool = False,
) -> ConsumerConfig:
    """The consumer settings the caller asked for: the config's fields
    except its class defaults, then the keyword options (which win)."""
    cfg = dataclasses.replace(config) if config is not None else ConsumerConfig()
    for name, default in _CLASS_DEFAULTS.items():
        if config is None or getattr(cfg, name) == default:
            setattr(cfg, name, None)
    for key, value in (extra or {}).items():
        if value is not None:
            setattr(cfg, key, value)
    if flow_control:
        cfg.flow_control = True
    if idle_heartbeat is not None:
        cfg.idle_heartbeat = idle_heartbeat
    return cfg


def find_stream(js: JsApi, subject: str) -> str:
    """The one stream that captures ``subject`` (ADR-15 stream lookup); with
    no subject, the account's only stream (as nats-py, which asks the server
    with an empty subject; where it takes the first of several, this refuses)."""
    names = js.stream_names(subject or None)
    what = f"subject {subject!r}" if subject else "no subject (the account's streams)"
    if not names:
        raise errors.StreamNotFoundError(404, errors.ErrorCode.STREAM_NOT_FOUND, f"no stream matches {what}")
    if len(names) > 1:
        raise errors.SubscribeError(f"{what} is in more than one stream: {', '.join(sorted(names))}; give stream=")
    return names[0]


def bind_check(info: ConsumerInfo, subject: str, queue: Optional[str], pull: bool, wanted: Optional[ConsumerConfig]) -> None:
    """ADR-15's checks before binding to an existing consumer; raises
    SubscribeError naming what does not fit."""
    cfg = info.config
    name = info.name
    deliver_subject = cfg.deliver_subject if cfg is not None else None
    if pull and deliver_subject:
        raise errors.SubscribeError(f"consumer {name!r} is push based (deliver subject {deliver_subject!r}): use subscribe()")
    if not pull and not deliver_subject:
        raise errors.SubscribeError(f"consumer {name!r} is pull based: use pull_subscribe()")
    if not pull:
        group = cfg.deliver_group if cfg is not None else None
        if not group:
            if queue:
                raise errors.SubscribeError(
                    f"cannot create queue subscription {queue!r}: consumer {name!r} was created without a deliver group"
                )
            if info.push_bound:
                raise errors.SubscribeError(f"consumer {name!r} is already bound to a subscription")
        elif not queue:
            raise errors.SubscribeError(f"consumer {name!r} has deliver group {group!r}: subscribe with queue={group!r}")
        elif queue != group:
            raise errors.SubscribeError(f"cannot create queue subscription {queue!r}: consumer {name!r} has deliver group {group!r}")
    if subject and cfg is not None:
        if cfg.filter_subject and cfg.filter_subject != subject:
            raise errors.SubscribeError(
                f"subject {subject!r} does not match the filter subject {cfg.filter_subject!r} of consumer {name!r}"
            )
        if cfg.filter_subjects and subject not in cfg.filter_subjects:
            raise errors.SubscribeError(
                f"subject {subject!r} is not among the filter subjects {cfg.filter_subjects} of consumer {name!r}"
            )
    if wanted is not None and cfg is not None:
        _check_filters(name, wanted, cfg)
        # As nats.go: refused only when asked for and missing (the client
        # answers flow control whether or not it was asked for).
        if wanted.flow_control and not cfg.flow_control:
            raise errors.SubscribeError(f"configuration of consumer {name!r} does not match: it has no flow control")
        if wanted.mem_storage and not cfg.mem_storage:
            raise errors.SubscribeError(f"configuration of consumer {name!r} does not match: it is not memory-stored")
        for field in _MUST_MATCH:
            want = getattr(wanted, field, None)
            have = getattr(cfg, field, None)
            if want is None or field == "deliver_subject" and not want:
                continue
            if _differs(want, have):
                raise errors.SubscribeError(
                    f"configuration of consumer {name!r} does not match: {field} is {have!r}, asked for {want!r}"
                )


def _check_filters(name: str, wanted: ConsumerConfig, cfg: ConsumerConfig) -> None:
    """Filters the caller's config names must be the consumer's."""
    want = [wanted.filter_subject] if wanted.filter_subject else list(wanted.filter_subjects or [])
    if not want:
        return
    have = [cfg.filter_subject] if cfg.filter_subject else list(cfg.filter_subjects or [])
    if sorted(want) != sorted(have):
        raise errors.SubscribeError(f"configuration of consumer {name!r} does not match: filter subjects are {have}, asked for {want}")


def _differs(want: Any, have: Any) -> bool:
    if isinstance(want, (list, tuple)) and isinstance(have, (list, tuple)):
        return len(want) != len(have) or any(_differs(w, h) for w, h in zip(want, have))
    if isinstance(want, float) or isinstance(have, float):
        return have is None or abs(float(want) - float(have)) > 1e-6
    if isinstance(want, datetime.datetime) and isinstance(have, datetime.datetime):
        return want != have
    return bool(want != have)


def push_config(
    wanted: ConsumerConfig, subject: str, durable: Optional[str], queue: Optional[str], deliver_subject: str
) -> ConsumerConfig:
    """The config of a push consumer subscribe() creates, from what the caller asked for (:func:`asked`)."""
    cfg = dataclasses.replace(wanted)
    if durable and not cfg.durable_name and not cfg.name:
        cfg.durable_name = durable
    if queue and not cfg.deliver_group:
        cfg.deliver_group = queue
    if not cfg.deliver_subject:
        cfg.deliver_subject = deliver_subject
    if not cfg.filter_subjects and not cfg.filter_subject and subject:
        cfg.filter_subject = subject
    if cfg.ack_policy is None:
        cfg.ack_policy = AckPolicy.EXPLICIT
    return cfg


def _stream_of(js: JsApi, subject: str, stream: Optional[str]) -> str:
    """The stream given (checked), else the one that captures ``subject``."""
    if stream is not None:
        return options.name("stream", stream)
    return find_stream(js, subject)


def _lookup(js: JsApi, stream: str, name: Optional[str], bind: bool) -> Optional[ConsumerInfo]:
    """Info of the named consumer; None when it must be created."""
    options.bind_name(name, bind)
    if name is None:
        return None
    try:
        return js.consumer_info(stream, name)
    except errors.ConsumerNotFoundError:
        if bind:
            raise
        return None


def _create(js: JsApi, stream: str, cfg: ConsumerConfig, check: Callable[[ConsumerInfo], None]) -> "tuple[ConsumerInfo, bool]":
    """Create the consumer; if another process created it meanwhile, bind to
    it after the checks (ADR-15 race). Returns (info, created)."""
    try:
        made = make_push_consumer(js, stream, cfg, {}, "create") if cfg.deliver_subject else make_consumer(js, stream, cfg, {}, "create")
        return made.cached_info, True
    except errors.APIError as exc:
        if exc.err_code not in (errors.ErrorCode.CONSUMER_ALREADY_EXISTS, errors.ErrorCode.CONSUMER_NAME_EXISTS):
            raise
    info = js.consumer_info(stream, cfg.durable_name or cfg.name)  # type: ignore[arg-type]
    check(info)
    return info, False


def pull_subscribe(
    js: JsApi,
    subject: str,
    durable: Optional[str],
    stream: Optional[str],
    config: Optional[ConsumerConfig],
    bind: bool = False,
) -> PullSubscription:
    """ADR-13/15: bind to or create a pull consumer for ``subject``."""
    if subject:
        options.subject(subject, wildcards=True)
    options.config_type(config, ConsumerConfig)
    options.pull_config(config)
    name = options.consumer_name(durable, config)
    wanted = asked(config)
    stream = _stream_of(js, subject, stream)
    info = _lookup(js, stream, name, bind)
    created = False
    if info is not None:
        bind_check(info, subject, None, True, wanted)
    else:
        cfg = dataclasses.replace(wanted)
        if name and not cfg.name:
            cfg.durable_name = name
        if subject and not cfg.filter_subject and not cfg.filter_subjects:
            cfg.filter_subject = subject
        if cfg.ack_policy is None:
            cfg.ack_policy = AckPolicy.EXPLICIT
        info, created = _create(js, stream, cfg, lambda i: bind_check(i, subject, None, True, wanted))
    return PullSubscription(js, pull_consumer(js, stream, info.name), subject, created)


def subscribe(
    js: JsApi,
    subject: str,
    queue: Optional[str],
    cb: Optional[Handler],
    durable: Optional[str],
    stream: Optional[str],
    config: Optional[ConsumerConfig],
    manual_ack: bool,
    ordered_consumer: bool,
    idle_heartbeat: Optional[float],
    flow_control: bool,
    extra: Dict[str, Any],
    error_handler: Optional[Callable[[BaseException], Any]] = None,
    bind: bool = False,
) -> PushSubscription:
    """ADR-15: bind to or create a push (or ordered) consumer for ``subject``."""
    if subject:
        options.subject(subject, wildcards=True)
    if queue is not None:
        options.name("queue", queue)
    options.handler("cb", cb, optional=True)
    options.handler("error_handler", error_handler, optional=True)
    options.flags(("manual_ack", manual_ack), ("ordered_consumer", ordered_consumer), ("flow_control", flow_control))
    options.config_type(config, ConsumerConfig)
    hb = None
    if idle_heartbeat is not None:
        hb = options.duration("idle_heartbeat", idle_heartbeat, minimum=options.MIN_SERVER_HEARTBEAT)
    if ordered_consumer:
        return _subscribe_ordered(js, subject, queue, cb, durable, stream, config, hb, extra, error_handler)
    options.push_subscribe(queue, config, hb, flow_control)
    if queue:
        # Unnamed, the consumer is named after the queue (as nats-py). Named
        # otherwise, it must exist with the queue as its deliver group: below,
        # bind_check names both groups when they differ (ADR-15).
        durable = durable or (config.durable_name or config.name if config is not None else None) or queue
    name = options.consumer_name(durable, config)
    wanted = asked(config, extra, hb, flow_control)
    stream = _stream_of(js, subject, stream)
    info = _lookup(js, stream, name, bind)
    created = False
    if info is None:  # none to bind to: one is created, and must be named after a queue
        options.new_queue_consumer(queue, name)

    def check(i: ConsumerInfo) -> None:
        bind_check(i, subject, queue, False, wanted)

    if info is not None:
        check(info)
    else:
        deliver = js.connection.new_inbox()
        cfg = push_config(wanted, subject, name, queue, deliver)
        info, created = _create(js, stream, cfg, check)
    consumer = push_consumer(js, stream, info.name)
    caller = Caller()
    try:
        if cb is not None:
            handler = caller.wrap(cb if manual_ack or acks_off(info) else auto_ack(cb))
            # exclusive=False: ADR-15's binding checks were made above (a
            # consumer created here may have a plain subscriber on its deliver subject).
            ctx: "MessagesContext | ConsumeContext" = consumer.consume(handler, error_handler=error_handler, exclusive=False)
        else:
            ctx = consumer.messages(error_handler=error_handler, exclusive=False)
    except BaseException:
        if created:
            delete_quietly(js, stream, info.name)
        raise
    return PushSubscription(
        js, stream, info.name, subject, created, ctx, queue, lambda: info.name, caller, consumer.deliver_subject
    )


def _subscribe_ordered(
    js: JsApi,
    subject: str,
    queue: Optional[str],
    cb: Optional[Handler],
    durable: Optional[str],
    stream: Optional[str],
    config: Optional[ConsumerConfig],
    hb: Optional[float],
    extra: Dict[str, Any],
    error_handler: Optional[Callable[[BaseException], Any]],
) -> PushSubscription:
    """subscribe(ordered_consumer=True): an OrderedConsumer read in the background or by next_msg()."""

    cfg = config or ConsumerConfig()
    options.ordered_subscribe(queue, durable, cfg)
    options.ordered_own(asked(config))  # what the ordered consumer sets itself (ADR-17)
    opts: Dict[str, Any] = {}
    if hb or cfg.idle_heartbeat:
        beat = hb or cfg.idle_heartbeat
        opts = {"idle_heartbeat": beat, "expires": max(2 * beat, 30.0)}  # type: ignore[operator]
    options.consume_options_from(opts)  # checked before anything is sent
    stream = _stream_of(js, subject, stream)
    filters = cfg.filter_subjects or ([cfg.filter_subject or subject] if (cfg.filter_subject or subject) else None)
    oc = OrderedConsumer(
        js,
        stream,
        filter_subjects=filters,
        deliver_policy=extra.get("deliver_policy") or cfg.deliver_policy,
        opt_start_seq=cfg.opt_start_seq,
        opt_start_time=cfg.opt_start_time,
        replay_policy=cfg.replay_policy,
        inactive_threshold=extra.get("inactive_threshold") or cfg.inactive_threshold,
        headers_only=bool(extra.get("headers_only") or cfg.headers_only),
    )
    caller = Caller()
    ctx: Any = (
        oc.consume(caller.wrap(cb), error_handler=error_handler, **opts) if cb else oc.messages(error_handler=error_handler, **opts)
    )
    return PushSubscription(js, stream, oc.name or "", subject, False, ctx, None, lambda: oc.name, caller)


