"""The checks of the nats-py-style subscribe workflow (ADR-13/15/17):
``js.subscribe``, ``pull_subscribe``, ``subscribe_bind`` and their consumer config.

Pure functions, no I/O; the checks that need the server's answer (does the
consumer exist, which stream holds the subject) stay with the workflow.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from .. import errors
from ..models import AckPolicy, ConsumerConfig
from .checks import name as _name


def consumer_name(durable: Optional[str], config: Optional[ConsumerConfig]) -> Optional[str]:
    """The consumer's name from ``durable`` or the config (they must agree), checked; None if neither names it."""
    in_config = config.durable_name or config.name if config is not None else None
    if durable and in_config and durable != in_config:
        raise errors.InvalidOptionError(f"durable {durable!r} and the config's consumer name {in_config!r} differ")
    name = durable or in_config
    if name is not None:
        _name("consumer", name)
    return name


def bind_name(name: Optional[str], bind: bool) -> None:
    """Binding needs a consumer to bind to."""
    if name is None and bind:
        raise errors.InvalidOptionError("binding needs the consumer's name")


def pull_config(config: Optional[ConsumerConfig]) -> None:
    """A pull subscription's config makes no push consumer."""
    if config is not None and config.deliver_subject:
        raise errors.InvalidOptionError("a pull subscription's consumer has no deliver_subject")


def push_subscribe(queue: Optional[str], config: Optional[ConsumerConfig], hb: Optional[float], flow_control: bool) -> None:
    """A queue subscription's group agrees with the config and has no flow
    control or heartbeats (ADR-15); flow control needs a heartbeat."""
    has_hb = bool(hb or (config is not None and config.idle_heartbeat))
    if queue:
        group = config.deliver_group if config is not None else None
        if group and group != queue:
            raise errors.InvalidOptionError(f"queue {queue!r} and the config's deliver_group {group!r} differ")
        if flow_control or (config is not None and config.flow_control):
            raise errors.InvalidOptionError("flow control is not supported with a queue subscription (ADR-15)")
        if has_hb:
            raise errors.InvalidOptionError("idle heartbeats are not supported with a queue subscription (ADR-15)")
    if flow_control and not has_hb:
        raise errors.InvalidOptionError("flow control needs an idle heartbeat (the server requires it)")


def new_queue_consumer(queue: Optional[str], name: Optional[str]) -> None:
    """A consumer a queue subscription creates (none was found) is named after the queue."""
    if queue and name != queue:
        raise errors.InvalidOptionError(
            f"cannot create queue subscription {queue!r} to consumer {name!r}: there is no such consumer,"
            " and one created for a queue subscription is named after the queue"
        )


def ordered_subscribe(queue: Any, durable: Any, cfg: ConsumerConfig) -> None:
    """subscribe(ordered_consumer=True): no queue, no durable name, no push settings (ADR-17)."""
    if queue or durable:
        raise errors.InvalidOptionError("an ordered consumer takes no queue and no durable name (ADR-17)")
    if cfg.durable_name or cfg.deliver_group or cfg.deliver_subject:
        raise errors.InvalidOptionError("an ordered consumer's config has no durable_name, deliver_group or deliver_subject")


def ordered_own(asked: ConsumerConfig) -> None:
    """What an ordered consumer sets itself (ADR-17) is refused, not silently dropped:
    ``asked`` holds the fields the caller set."""
    if asked.name or asked.ack_policy not in (None, AckPolicy.NONE) or asked.max_deliver not in (None, 0, 1):
        raise errors.InvalidOptionError("an ordered consumer's config sets no name, ack_policy or max_deliver (ADR-17)")


def bind_config(config: Any, consumer: Optional[str]) -> Tuple[Optional[ConsumerConfig], str]:
    """``subscribe_bind``'s config (a ConsumerConfig or None) and the consumer's name."""
    if config is not None and not isinstance(config, ConsumerConfig):
        raise errors.InvalidOptionError(f"config must be a ConsumerConfig or the consumer's name, got {config!r}")
    name = consumer or (config.durable_name or config.name if config is not None else None)
    if not name:
        raise errors.InvalidOptionError("subscribe_bind needs the consumer's name")
    return config, name
