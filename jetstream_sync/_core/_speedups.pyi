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
def puback(data: bytes) -> Optional[Tuple[bytes, int]]: ...
def arrow_rows(msgs: List[Any], with_headers: bool, stream: bytes) -> Optional[Tuple[Any, ...]]: ...
