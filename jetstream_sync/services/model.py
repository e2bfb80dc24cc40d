"""What a service says about itself (ADR-32): the PING, INFO and STATS
answers as dataclasses, their JSON, the discovery subjects and the error
headers. Pure, no I/O."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

__all__ = [
    "API_PREFIX",
    "ERROR_HEADER",
    "ERROR_CODE_HEADER",
    "PING_RESPONSE_TYPE",
    "INFO_RESPONSE_TYPE",
    "STATS_RESPONSE_TYPE",
    "VERBS",
    "EndpointInfo",
    "EndpointStats",
    "ServiceInfo",
    "ServiceStats",
    "control_subjects",
    "started_text",
]

API_PREFIX = "$SRV"
ERROR_HEADER = "Nats-Service-Error"
ERROR_CODE_HEADER = "Nats-Service-Error-Code"
PING_RESPONSE_TYPE = "io.nats.micro.v1.ping_response"
INFO_RESPONSE_TYPE = "io.nats.micro.v1.info_response"
STATS_RESPONSE_TYPE = "io.nats.micro.v1.stats_response"
VERBS = ("PING", "INFO", "STATS")


def control_subjects(verb: str, name: str, service_id: str) -> Tuple[str, str, str]:
    """The three subjects a service answers ``verb`` on: every service, every
    service of its name, this instance."""
    base = f"{API_PREFIX}.{verb}"
    return base, f"{base}.{name}", f"{base}.{name}.{service_id}"


def started_text(when: datetime.datetime) -> str:
    """RFC 3339 in UTC with microseconds and ``Z``: what nats.go parses and
    what nats-py's ``ServiceStats.from_dict`` requires (``%Y-%m-%dT%H:%M:%S.%fZ``)."""
    return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class EndpointInfo:
    """An endpoint as INFO describes it."""

    name: str
    subject: str
    queue_group: str
    metadata: Dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "queue_group": self.queue_group, "metadata": dict(self.metadata)}


@dataclass(frozen=True)
class EndpointStats:
    """An endpoint's counters (ADR-32): requests handled, those answered
    with a service error, the last such error (``"code:description"``, ""
    for none), and the handlers' time in all and on average, in nanoseconds
    (the average truncated; 0 before any request)."""

    name: str
    subject: str
    queue_group: str
    num_requests: int = 0
    num_errors: int = 0
    last_error: str = ""
    processing_time: int = 0
    average_processing_time: int = 0

    def as_dict(self) -> Dict[str, Any]:
        return {
            "name": self.name,
            "subject": self.subject,
            "queue_group": self.queue_group,
            "num_requests": self.num_requests,
            "num_errors": self.num_errors,
            "last_error": self.last_error,
            "processing_time": self.processing_time,
            "average_processing_time": self.average_processing_time,
            "data": None,  # nats-py's EndpointStats.from_dict requires the key; no stats handler here
        }


@dataclass(frozen=True)
class _Identity:
    name: str
    id: str
    version: str
    metadata: Dict[str, str]

    def _head(self, kind: str) -> Dict[str, Any]:
        return {"type": kind, "name": self.name, "id": self.id, "version": self.version, "metadata": dict(self.metadata)}

    def ping_dict(self) -> Dict[str, Any]:
        """The PING answer."""
        return self._head(PING_RESPONSE_TYPE)


@dataclass(frozen=True)
class ServiceInfo(_Identity):
    """A service as INFO describes it (``as_dict()`` is the JSON)."""

    description: str = ""
    endpoints: List[EndpointInfo] = field(default_factory=list)

    def as_dict(self) -> Dict[str, Any]:
        out = self._head(INFO_RESPONSE_TYPE)
        out["description"] = self.description
        out["endpoints"] = [e.as_dict() for e in self.endpoints]
        return out


@dataclass(frozen=True)
class ServiceStats(_Identity):
    """A service's STATS answer (``as_dict()`` is the JSON); ``started`` is
    an aware UTC datetime (set again by ``reset()``)."""

    started: datetime.datetime = datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)
    endpoints: List[EndpointStats] = field(default_factory=list)

    def as_dict(self) -> Dict[str, Any]:
        out = self._head(STATS_RESPONSE_TYPE)
        out["started"] = started_text(self.started)
        out["endpoints"] = [e.as_dict() for e in self.endpoints]
        return out


def to_json(doc: Dict[str, Any]) -> bytes:
    """A discovery answer's payload."""
    return json.dumps(doc, separators=(",", ":")).encode()
