"""The checks of the service API (ADR-32) and of ``request_many``.

Pure functions, no I/O. ADR-32 fixes the alphabets: a service or endpoint
name is ``A-Z a-z 0-9 - _``; a version is SemVer (the regular expression
semver.org suggests, as nats.go and nats-py use); an endpoint subject or a
group prefix is a NATS subject, where only an endpoint's may end in ``>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple

from .. import errors
from .checks import count, duration, handler, mapping, name, subject

__all__ = [
    "DEFAULT_QUEUE_GROUP",
    "DEFAULT_SERVICE_WORKERS",
    "DEFAULT_MAX_WAIT",
    "ServiceOptions",
    "RequestManyOptions",
    "service_options",
    "endpoint_name",
    "endpoint_subject",
    "group_prefix",
    "queue_group",
    "service_metadata",
    "service_error",
    "request_many_options",
]

DEFAULT_QUEUE_GROUP = "q"  # ADR-32: every endpoint's queue group unless one is given
DEFAULT_SERVICE_WORKERS = 4  # handler threads of a service
DEFAULT_MAX_WAIT = 2.0  # seconds a request_many waits in all (nats.go's default request timeout)

_NAME = re.compile(r"[A-Za-z0-9\-_]+")
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?",
    re.ASCII,
)


@dataclass(frozen=True)
class ServiceOptions:
    """A service's checked configuration: ``workers`` handler threads,
    ``queue_group`` for endpoints that name none."""

    workers: int
    queue_group: str
    name: str
    version: str
    description: str = ""
    metadata: Dict[str, str] = field(default_factory=dict)


def _micro_name(kind: str, value: Any) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise errors.InvalidOptionError(
            f"{kind} name must be a non-empty string of A-Z, a-z, 0-9, '-' and '_' (ADR-32), got {value!r}"
        )
    return value


def endpoint_name(value: Any) -> str:
    """An endpoint name: ``A-Z a-z 0-9 - _``, non-empty."""
    return _micro_name("endpoint", value)


def service_metadata(what: str, value: Any) -> Dict[str, str]:
    """None or a mapping of str to str, as a new dict."""
    mapping(what, value)
    out: Dict[str, str] = {}
    for key, item in (value or {}).items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise errors.InvalidOptionError(f"{what} must map str to str, got {key!r}: {item!r}")
        out[key] = item
    return out


def queue_group(value: Any, default: str) -> str:
    """An endpoint's queue group: None for ``default``; else a name that is
    also a valid queue-group token of the protocol."""
    if value is None:
        return default
    return name("queue group", value)


def service_options(
    name_: Any, version: Any, description: Any, metadata: Any, queue_group_: Any, workers: Any
) -> ServiceOptions:
    """``add_service`` arguments, checked."""
    if not isinstance(version, str) or not _SEMVER.fullmatch(version):
        raise errors.InvalidOptionError(f"service version must be a SemVer string such as '1.0.0', got {version!r}")
    if not isinstance(description, str):
        raise errors.InvalidOptionError(f"service description must be a str, got {description!r}")
    return ServiceOptions(
        name=_micro_name("service", name_),
        version=version,
        description=description,
        metadata=service_metadata("service metadata", metadata),
        queue_group=queue_group(queue_group_, DEFAULT_QUEUE_GROUP),
        workers=count("workers", workers),
    )


def endpoint_subject(prefix: str, value: Any) -> str:
    """The subject of an endpoint under a group ``prefix`` ("" for none):
    wildcards allowed, '>' only as the last token."""
    subject(value, what="endpoint subject", wildcards=True)
    full = f"{prefix}.{value}" if prefix else value
    return subject(full, what="endpoint subject", wildcards=True)


def group_prefix(parent: str, value: Any) -> str:
    """A group's prefix under ``parent`` ("" for none): a subject whose
    tokens may be '*' but not '>' (ADR-32: it prefixes endpoint subjects)."""
    subject(value, what="group name", wildcards=True)
    if value == ">" or value.endswith(".>"):
        raise errors.InvalidOptionError(f"group name must not contain the '>' wildcard, got {value!r}")
    return f"{parent}.{value}" if parent else value


def service_error(code: Any, description: Any) -> Tuple[str, str]:
    """The code and description of a service error as header values: the
    code an int or a non-empty str (ADR-32: it should parse as a number), the
    description a non-empty str; neither with CR or LF."""
    if isinstance(code, bool) or not isinstance(code, (int, str)) or code == "":
        raise errors.InvalidOptionError(f"service error code must be an int or a non-empty str, got {code!r}")
    if not isinstance(description, str) or not description:
        raise errors.InvalidOptionError(f"service error description must be a non-empty str, got {description!r}")
    text = str(code)
    for what, value in (("code", text), ("description", description)):
        if "\r" in value or "\n" in value:
            raise errors.InvalidOptionError(f"service error {what} must not contain CR or LF, got {value!r}")
    return text, description


@dataclass(frozen=True)
class RequestManyOptions:
    """``request_many`` bounds; None is "no such bound"."""

    max_messages: Optional[int]
    max_wait: float
    stall: Optional[float]
    sentinel: Optional[Callable[[Any], bool]]


def empty_payload(msg: Any) -> bool:
    """orbit.go's DefaultSentinel: a reply with an empty payload ends the replies."""
    return len(msg.data) == 0


def request_many_options(max_messages: Any, max_wait: Any, stall: Any, sentinel: Any) -> RequestManyOptions:
    """``request_many`` arguments, checked: ``max_messages`` >= 1 or None,
    ``max_wait`` seconds > 0 (finite), ``stall`` seconds > 0 or None,
    ``sentinel`` None, True (an empty payload) or a plain function of the reply."""
    if sentinel is True:
        check: Optional[Callable[[Any], bool]] = empty_payload
    elif sentinel is None or sentinel is False:
        check = None
    else:
        check = handler("sentinel", sentinel)
    return RequestManyOptions(
        max_messages=None if max_messages is None else count("max_messages", max_messages),
        max_wait=duration("max_wait", max_wait),
        stall=None if stall is None else duration("stall", stall),
        sentinel=check,
    )
