"""The system client's answers: one per server, each the server's envelope
(``{"server": {...}, "data": {...}}``, ``"statsz"`` for STATSZ) as a small
dataclass of the common fields, with the whole answer in ``raw``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Type, TypeVar

__all__ = [
    "ServerInfo", "SystemReply", "Varz", "Connz", "Jsz", "Healthz", "Accountz", "Statsz", "Subsz", "Routez",
    "Leafz", "Gatewayz", "reply_from",
]  # fmt: skip

_R = TypeVar("_R", bound="SystemReply")


@dataclass(frozen=True)
class ServerInfo:
    """Who answered: the envelope's ``server`` part. ``time`` is the
    server's RFC 3339 timestamp as sent."""

    name: str
    id: str
    host: str = ""
    version: str = ""
    cluster: Optional[str] = None
    domain: Optional[str] = None
    jetstream: bool = False
    seq: int = 0
    time: str = ""

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "ServerInfo":
        return cls(
            name=str(data.get("name", "")), id=str(data.get("id", "")), host=str(data.get("host", "")),
            version=str(data.get("ver", "")), cluster=data.get("cluster"), domain=data.get("domain"),
            jetstream=bool(data.get("jetstream", False)), seq=int(data.get("seq", 0)), time=str(data.get("time", "")),
        )  # fmt: skip


@dataclass(frozen=True)
class SystemReply:
    """One server's answer: ``server`` (who), ``raw`` (the endpoint's data
    as the server sent it: every field, also those without an attribute)."""

    server: ServerInfo
    raw: Dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class Varz(SystemReply):
    """``VARZ``: the server's general state. ``mem`` bytes, ``cpu`` percent,
    ``uptime`` as the server writes it ("1h2m3s")."""

    version: str = ""
    connections: int = 0
    total_connections: int = 0
    routes: int = 0
    leafnodes: int = 0
    mem: int = 0
    cpu: float = 0.0
    cores: int = 0
    uptime: str = ""
    in_msgs: int = 0
    out_msgs: int = 0
    in_bytes: int = 0
    out_bytes: int = 0
    slow_consumers: int = 0


@dataclass(frozen=True)
class Connz(SystemReply):
    """``CONNZ``: client connections (one page: ``offset``, ``limit``); each
    connection a dict as the server sent it."""

    num_connections: int = 0
    total: int = 0
    offset: int = 0
    limit: int = 0
    connections: List[Dict[str, Any]] = field(default_factory=list, repr=False)


@dataclass(frozen=True)
class Jsz(SystemReply):
    """``JSZ``: JetStream on this server. ``memory``/``storage``/``bytes`` in
    bytes; ``meta_leader``: the meta group's leader's name, when clustered."""

    memory: int = 0
    storage: int = 0
    streams: int = 0
    consumers: int = 0
    messages: int = 0
    bytes: int = 0
    meta_leader: Optional[str] = None


@dataclass(frozen=True)
class Healthz(SystemReply):
    """``HEALTHZ``: ``status`` "ok" (``status_code`` 200) or the reasons in ``errors``."""

    status: str = ""
    status_code: int = 0
    error: Optional[str] = None
    errors: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class Accountz(SystemReply):
    """``ACCOUNTZ``: the accounts this server knows, by name, and the system account's."""

    system_account: str = ""
    accounts: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class Statsz(SystemReply):
    """``STATSZ``: the statistics the server sends on ``$SYS.SERVER.<id>.STATSZ``
    (``mem`` bytes, ``cpu`` percent)."""

    mem: int = 0
    cpu: float = 0.0
    cores: int = 0
    connections: int = 0
    total_connections: int = 0
    active_accounts: int = 0
    subscriptions: int = 0
    slow_consumers: int = 0
    active_servers: int = 0


@dataclass(frozen=True)
class Subsz(SystemReply):
    """``SUBSZ``: the subscription table's size and cache."""

    num_subscriptions: int = 0
    num_cache: int = 0
    total: int = 0


@dataclass(frozen=True)
class Routez(SystemReply):
    """``ROUTEZ``: the routes to the cluster's other servers (dicts as sent)."""

    num_routes: int = 0
    routes: List[Dict[str, Any]] = field(default_factory=list, repr=False)


@dataclass(frozen=True)
class Leafz(SystemReply):
    """``LEAFZ``: leaf node connections (dicts as sent)."""

    leafnodes: int = 0
    leafs: List[Dict[str, Any]] = field(default_factory=list, repr=False)


@dataclass(frozen=True)
class Gatewayz(SystemReply):
    """``GATEWAYZ``: gateways to other clusters, by cluster name (dicts as sent)."""

    name: str = ""
    outbound_gateways: Dict[str, Any] = field(default_factory=dict, repr=False)
    inbound_gateways: Dict[str, Any] = field(default_factory=dict, repr=False)


def reply_from(cls: Type[_R], server: Dict[str, Any], data: Dict[str, Any]) -> _R:
    """``cls`` from one envelope's parts: each attribute the data's field of
    that name (its default when absent or null)."""
    values: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in ("server", "raw") or data.get(f.name) is None:
            continue
        values[f.name] = data[f.name]
    if cls is Jsz:
        values["meta_leader"] = (data.get("meta_cluster") or {}).get("leader")
    if cls is Accountz:
        values["accounts"] = list(data.get("accounts") or [])
    return cls(server=ServerInfo.from_json(server), raw=data, **values)
