"""The system client: the servers' monitoring endpoints (varz, connz, jsz,
healthz ...) asked over the system account's ``$SYS.REQ.SERVER`` subjects,
the way ``nats server`` commands do. ``SystemClient`` (``client.py``) and
its typed answers (``model.py``). Layer 5: built on the core client's
``request_many``; ``Client.system()`` makes one."""

from .client import SystemClient
from .model import Accountz, Connz, Gatewayz, Healthz, Jsz, Leafz, Routez, ServerInfo, Statsz, Subsz, SystemReply, Varz

__all__ = [
    "Accountz", "Connz", "Gatewayz", "Healthz", "Jsz", "Leafz", "Routez", "ServerInfo", "Statsz", "Subsz",
    "SystemClient", "SystemReply", "Varz",
]  # fmt: skip
