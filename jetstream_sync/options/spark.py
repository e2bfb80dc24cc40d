"""The Spark data source's option strings (``spark.read.format("jetstream")
.option(...)``): booleans, counts, offsets. Pure, no pyspark.

The options reach us as text (case-insensitive keys); these parse and check
one value each. The sink's checks of a DataFrame's columns and rows stay in
``spark/`` (they are about the data, decided when it is written).
"""

from __future__ import annotations

import json
from typing import Mapping, Optional

from .. import errors


def text_flag(value: Optional[str], default: bool) -> bool:
    """``true``/``1``/``yes`` or ``false``/``0``/``no`` (any case); ``default`` when not given."""
    if value is None:
        return default
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise errors.InvalidOptionError(f"expected true or false, got {value!r}")


def text_count(name: str, value: Optional[str], default: Optional[int], minimum: int = 1) -> Optional[int]:
    """An integer >= ``minimum`` written as text; ``default`` when not given."""
    if value is None:
        return default
    try:
        n = int(value)
    except ValueError:
        raise errors.InvalidOptionError(f"{name} must be an integer, got {value!r}") from None
    if n < minimum:
        raise errors.InvalidOptionError(f"{name} must be >= {minimum}, got {n}")
    return n


def source_stream(given: Mapping[str, str]) -> str:
    """The source's required ``stream`` option (``given`` has lower-case keys)."""
    stream = given.get("stream")
    if not stream:
        raise errors.InvalidOptionError("the jetstream source needs option 'stream'")
    return stream


def parse_offset(spec: str, stream: str) -> Optional[int]:
    """``earliest``/``latest`` (None: resolve later), a sequence number, or
    ``{"stream": S, "seq": N}`` (the next sequence to read; exclusive end)."""
    s = spec.strip()
    if s.lower() in ("earliest", "latest"):
        return None
    try:
        value = json.loads(s)
    except ValueError:
        raise errors.InvalidOptionError(f"offset must be earliest, latest or JSON, got {spec!r}") from None
    if isinstance(value, dict):
        if value.get("stream", stream) != stream:
            raise errors.InvalidOptionError(f"offset {spec!r} is for another stream than {stream!r}")
        value = value.get("seq")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise errors.InvalidOptionError(f"offset sequence must be an integer >= 1, got {spec!r}")
    return value
