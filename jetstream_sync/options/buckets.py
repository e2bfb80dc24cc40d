"""The checks of key-value buckets (ADR-8, ADR-48) and object stores
(ADR-20): bucket and key names, history, replicas, TTLs, chunk sizes."""

from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .. import errors
from ..models import ExternalStream, StreamSource, SubjectTransform
from .checks import (
    MAX_NAME_LEN,
    control_line,
    count,
    duration,
    exclusive,
    flags,
    header_block,
    payload_size,
    reply_room,
    subject,
)

# Key-value buckets (ADR-8, ADR-48)

KV_MAX_HISTORY = 64
MAX_REPLICAS = 5
MIN_MSG_TTL = 1.0  # ADR-43: the server refuses a Nats-TTL or marker TTL below 1 s
_KV_BUCKET = re.compile(r"[a-zA-Z0-9_-]+")
_KV_KEY = re.compile(r"[-/_=.a-zA-Z0-9]+")
_KV_FILTER = re.compile(r"[-/_=.a-zA-Z0-9*>]+")


def kv_bucket(value: Any) -> str:
    """A bucket name: 1+ of A-Z a-z 0-9 _ - (its stream ``KV_<bucket>`` is a valid name)."""
    if not isinstance(value, str) or not _KV_BUCKET.fullmatch(value):
        raise errors.InvalidBucketNameError(f"bucket name must be 1+ of A-Z, a-z, 0-9, '_', '-', got {value!r}")
    if len(value) + 3 > MAX_NAME_LEN:
        raise errors.InvalidBucketNameError(f"bucket name must be at most {MAX_NAME_LEN - 3} characters, got {len(value)}")
    return value


def kv_key(value: Any, *, wildcards: bool = False) -> str:
    """A key: '.'-separated non-empty tokens of A-Z a-z 0-9 - / _ = . With
    ``wildcards`` (watch and keys filters) '*' may be a whole token and '>'
    the whole last token."""
    pattern = _KV_FILTER if wildcards else _KV_KEY
    if not isinstance(value, str) or not pattern.fullmatch(value):
        allowed = "A-Z, a-z, 0-9, '-', '/', '_', '=', '.'" + (" and wildcards" if wildcards else "")
        raise errors.InvalidKeyError(f"key must be 1+ of {allowed}, got {value!r}")
    try:
        subject(value, what="key", wildcards=wildcards)
    except errors.InvalidOptionError as exc:
        raise errors.InvalidKeyError(str(exc)) from None
    return value


def kv_history(value: Any) -> int:
    """Values kept per key: an integer from 1 to 64."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= KV_MAX_HISTORY:
        raise errors.InvalidOptionError(f"history must be an integer from 1 to {KV_MAX_HISTORY}, got {value!r}")
    return value


def kv_replicas(value: Any) -> int:
    """A replica count the server accepts (1-5), for buckets and object stores."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_REPLICAS:
        raise errors.InvalidOptionError(f"replicas must be an integer from 1 to {MAX_REPLICAS}, got {value!r}")
    return value


def optional_size(name: str, value: Any) -> Optional[int]:
    """None (no limit) or a byte count >= 1."""
    return None if value is None else count(name, value)


def msg_ttl(name: str, value: Any) -> str:
    """A ``Nats-TTL`` header value from seconds (>= 1): a Go duration string."""
    seconds = duration(name, value, minimum=MIN_MSG_TTL)
    return f"{int(seconds)}s" if seconds.is_integer() else f"{round(seconds * 1000)}ms"


def string_map(name: str, value: Any) -> Optional[Dict[str, str]]:
    """None or a dict of str to str (stream metadata)."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise errors.InvalidOptionError(f"{name} must be a mapping of str to str, got {value!r}")
    return dict(value)


# -- object store (ADR-20) --

OBJECT_STREAM_PREFIX = "OBJ_"


def object_store_name(value: Any) -> str:
    """A bucket name (ADR-20 ``restricted-term``): 1 or more of A-Z, a-z, 0-9,
    '-', '_', short enough for the stream name ``OBJ_<bucket>``."""
    limit = MAX_NAME_LEN - len(OBJECT_STREAM_PREFIX)
    if not isinstance(value, str) or not _KV_BUCKET.fullmatch(value) or len(value) > limit:
        raise errors.InvalidObjectStoreNameError(
            f"object store name must be 1-{limit} characters of A-Z, a-z, 0-9, '-', '_', got {value!r}"
        )
    return value


def object_name(value: Any, prefix_len: int = 0) -> str:
    """An object name: any non-empty text. It travels URL-safe base64 encoded
    after a ``prefix_len``-byte subject prefix, which must fit the control line."""
    if not isinstance(value, str) or not value:
        raise errors.InvalidObjectNameError(f"object name must be a non-empty string, got {value!r}")
    try:
        raw = value.encode()
    except UnicodeEncodeError:
        raise errors.InvalidObjectNameError(f"object name is not valid UTF-8 text: {value!r}") from None
    try:
        control_line("x" * (prefix_len + 4 * math.ceil(len(raw) / 3)), reply_room=reply_room())
    except errors.InvalidOptionError:
        raise errors.InvalidObjectNameError(f"object name is too long for a subject ({len(raw)} bytes)") from None
    return value


def chunk_size(value: Any, max_payload: Optional[int]) -> int:
    """Bytes per chunk: an integer >= 1, at most the server's max_payload."""
    size = count("chunk_size", value)
    payload_size(size, max_payload, f"chunk_size {size}")
    return size


def optional_text(what: str, value: Any) -> Optional[str]:
    """None or a str (descriptions)."""
    if value is not None and not isinstance(value, str):
        raise errors.InvalidOptionError(f"{what} must be a string, got {value!r}")
    return value


def object_headers(value: Any) -> Optional[Dict[str, List[str]]]:
    """None or object headers as nats.go stores them: name -> list of values
    (a str value is a one-item list); checked as message headers are."""
    if value is None:
        return None
    header_block(value)  # names are tokens, values str without CR/LF
    return {k: [v] if isinstance(v, str) else list(v) for k, v in value.items()}


def object_store_limits(ttl: Any, max_bytes: Any, replicas: Any, compression: Any) -> Tuple[float, int, int]:
    """An object store's (ttl seconds, 0 = keep forever; max_bytes, -1 = no
    limit, None and 0 mean -1 as in nats.go; replicas 1-5)."""
    age = 0.0 if ttl is None else duration("ttl", ttl, allow_zero=True, none_means="no limit")
    if max_bytes is None:
        max_bytes = -1
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < -1:
        raise errors.InvalidOptionError(f"max_bytes must be an integer >= 1 or -1 (no limit), got {max_bytes!r}")
    limit = max_bytes or -1  # 0 means no limit, as in nats.go
    replicas = kv_replicas(replicas)
    if not isinstance(compression, bool):
        raise errors.InvalidOptionError(f"compression must be a bool, got {compression!r}")
    return age, limit, replicas


# Key-value handles and watches


def revision(name: str, value: Any, minimum: int = 0) -> int:
    """A key's revision (a stream sequence), >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise errors.InvalidOptionError(f"{name} must be a revision (an integer >= {minimum}), got {value!r}")
    return value


def kv_watch(include_history: Any, ignore_deletes: Any, meta_only: Any, updates_only: Any, resume_from_revision: Any) -> None:
    """The flags of a key watch: bools, and ``updates_only`` alone."""
    flags(("include_history", include_history), ("ignore_deletes", ignore_deletes),
          ("meta_only", meta_only), ("updates_only", updates_only))  # fmt: skip
    if updates_only and (include_history or resume_from_revision is not None):
        raise errors.InvalidOptionError("updates_only excludes include_history and resume_from_revision")


def config_once(config: Any) -> None:
    """A config given positionally (as the bucket) is not given as ``config=`` too."""
    if config is not None:
        raise errors.InvalidOptionError("give the config once (positionally or as config=)")


def kv_description(value: Any) -> Optional[str]:
    """None or a str."""
    if value is not None and not isinstance(value, str):
        raise errors.InvalidOptionError(f"description must be a str, got {value!r}")
    return value


# Object stores: the data of a put, object watches, metadata


def data_reader(source: Any) -> Any:
    """The ``read(n)`` of an object's data that is neither bytes nor str."""
    read = getattr(source, "read", None)
    if not callable(read):
        raise errors.InvalidOptionError(
            f"data must be bytes, str or a file-like object with read(n), not {type(source).__name__}"
        )
    return read


def read_piece(piece: Any) -> bool:
    """What a reader's ``read(n)`` returned has data (False: the end). None
    (a non-blocking stream with nothing yet) and non-text, non-bytes are refused."""
    if piece is None:  # a non-blocking stream with nothing yet: not the end
        raise errors.InvalidOptionError(
            "read() returned None (a non-blocking stream with no data yet); give a blocking reader"
        )
    if not piece:
        return False
    if not isinstance(piece, (str, bytes, bytearray, memoryview)):
        raise errors.InvalidOptionError(f"read() must return bytes or str, got {type(piece).__name__}")
    return True


def object_watch(include_history: Any, ignore_deletes: Any, updates_only: Any) -> None:
    """The flags of an object watch or listing: bools, history or updates only."""
    flags(("include_history", include_history), ("ignore_deletes", ignore_deletes), ("updates_only", updates_only))
    exclusive("", "include_history", include_history or None, "updates_only", updates_only or None)


def meta_name(given: Any, name: str) -> None:
    """An ObjectMeta's name, when set, is the object's name."""
    if given and given != name:
        raise errors.InvalidOptionError(f"meta.name {given!r} differs from the name {name!r}")


# Key-value codecs (ADR-54) and a bucket's mirror or sources


def kv_codec(name: str, value: Any) -> Any:
    """None or a codec: an object with callable ``encode`` and ``decode``
    (and, if it has one, a callable ``encode_filter``)."""
    if value is None:
        return None
    # str and bytes have an encode or decode method, but are no codec
    missing = ["encode", "decode"] if isinstance(value, (str, bytes)) else [
        m for m in ("encode", "decode") if not callable(getattr(value, m, None))]
    if missing or not callable(getattr(value, "encode_filter", callable)):
        what = f"no callable {' or '.join(missing)}" if missing else "an encode_filter that is not callable"
        raise errors.InvalidOptionError(
            f"{name} must be a codec (an object with encode() and decode(), e.g. codecs.Base64Codec()), got {value!r}: {what}"
        )
    return value


def codec_functions(encode: Any, decode: Any, encode_filter: Any) -> None:
    """A FuncCodec's functions: callables (``encode_filter`` may be None)."""
    for name, fn in (("encode", encode), ("decode", decode)):
        if not callable(fn):
            raise errors.InvalidOptionError(f"{name} must be callable, got {fn!r}")
    if encode_filter is not None and not callable(encode_filter):
        raise errors.InvalidOptionError(f"encode_filter must be callable or None, got {encode_filter!r}")


def codec_chain(codecs: Any) -> Tuple[Any, ...]:
    """The codecs of a chain: one or more, each a codec."""
    if not codecs:
        raise errors.InvalidOptionError("chain() needs at least one codec")
    return tuple(kv_codec(f"codec {i} of the chain", c) for i, c in enumerate(codecs))


KV_SUBJECTS = "$KV.{}.>"


def kv_origin(name: str, value: Any, bucket: str) -> StreamSource:
    """A mirror or source of bucket ``bucket`` as the stream source nats.go
    makes of it: a bucket name, or a StreamSource / dict whose ``name`` is a
    bucket (``KV_`` added when missing) and whose ``domain`` (dict only)
    becomes ``external.api`` ``$JS.<domain>.API``. A source without subject
    transforms maps ``$KV.<origin>.>`` to ``$KV.<bucket>.>`` (unless it is the
    same bucket in another domain); one with them is used as given."""
    if isinstance(value, str):
        value = {"name": value}
    elif isinstance(value, StreamSource):
        value = StreamSource.from_response(value.as_dict())  # a copy: the caller's stays as given
    domain = None
    if isinstance(value, dict):
        value = dict(value)
        domain = value.pop("domain", None)
        if domain is not None and (not isinstance(domain, str) or not _KV_BUCKET.fullmatch(domain)):
            raise errors.InvalidOptionError(f"{name}: domain must be a domain name (A-Z, a-z, 0-9, '_', '-'), got {domain!r}")
        value = StreamSource.from_response(value)
    if not isinstance(value, StreamSource):
        raise errors.InvalidOptionError(f"{name} must be a bucket name, a StreamSource or a dict, got {value!r}")
    if domain is not None:
        if value.external is not None:
            raise errors.InvalidOptionError(f"{name}: give domain or external, not both")
        value.external = ExternalStream(api=f"$JS.{domain}.API")
    if value.subject_transforms:
        return value  # full control, e.g. a stream that is not a bucket
    given = value.name
    origin = given[3:] if isinstance(given, str) and given.startswith("KV_") else given
    try:
        kv_bucket(origin)
    except errors.InvalidBucketNameError as exc:
        raise errors.InvalidBucketNameError(f"{name}: {exc}") from None
    value.name = "KV_" + origin
    if name.startswith("sources") and (value.external is None or origin != bucket):
        value.subject_transforms = [SubjectTransform(src=KV_SUBJECTS.format(origin), dest=KV_SUBJECTS.format(bucket))]
    return value


def kv_mirror_sources(mirror: Any, sources: Any) -> None:
    """A bucket mirrors another or has sources, not both; sources is a list."""
    exclusive("", "mirror", mirror, "sources", sources or None)
    if sources is not None and not isinstance(sources, (list, tuple)):
        raise errors.InvalidOptionError(f"sources must be a list of buckets, got {sources!r}")
