"""The service API (ADR-32 "micro"), blocking and thread-based: ``Service``
and ``ServiceGroup`` (``service.py``), the request a handler gets
(``request.py``), the handler threads (``pool.py``) and the discovery
answers (``model.py``). Layer 5: built on the connection core and the
handles; ``Client.add_service`` makes a Service."""

from .model import EndpointInfo, EndpointStats, ServiceInfo, ServiceStats
from .request import ServiceRequest
from .service import Service, ServiceGroup

__all__ = ["EndpointInfo", "EndpointStats", "Service", "ServiceGroup", "ServiceInfo", "ServiceRequest", "ServiceStats"]
