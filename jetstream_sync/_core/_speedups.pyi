# Types of the optional C accelerator (_speedups.c); absent when it was not built.
from typing import Any, Callable, Dict, List, Optional, Tuple

def scan(
    buf: Any,
    pos: int,
    sinks: Dict[int, Any],
    handlers: Dict[int, Any],
    batches: Dict[Any, Any],
    wire_type: Optional[type],
    log_fn: Callable[[BaseException], None],
) -> Tuple[int, int, int]: ...
def pub_batch(
    queue: Any, prefix: bytes, next_id: int, inflight: Dict[bytes, Any]
) -> Tuple[bytes, int, int, int, Optional[Tuple[Any, BaseException]]]: ...
def ack_batch(queue: Any) -> Tuple[bytes, int, int, int, Optional[Tuple[Any, bytes]]]: ...
def puback(data: bytes) -> Optional[Tuple[bytes, int]]: ...
def arrow_rows(msgs: List[Any], with_headers: bool, stream: bytes) -> Optional[Tuple[Any, ...]]: ...

class PubAckRouter:
    def __init__(
        self,
        publisher: Any,
        prefix: bytes,
        inflight: Dict[bytes, Any],
        future_type: type,
        make_ack: Callable[[str, int], Any],
        on_reply: Callable[[bytes, bytes, bytes, Optional[bytes]], None],
        done: Callable[[Any, Any, Optional[BaseException]], None],
        pending: Any,
        finished: Any,
    ) -> None: ...
    def __call__(self, subject: bytes, reply: bytes, data: bytes, headers: Optional[bytes]) -> None: ...
