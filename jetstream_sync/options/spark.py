"""The Spark data source's options (``spark.read.format("jetstream")
.option(...)``): the known options of each role, and their parsing. Pure, no
pyspark, no I/O.

The options reach us as text with keys lower-cased by Spark (pyspark's
``CaseInsensitiveDict``); they are compared case-insensitively and named in
their documented spelling. An unknown key is an error that names the closest
known one; every value error names its option (``endingOffsets='{"seq":
"x"}': ...``). The connection options are those of :mod:`.connection`. The
sink's checks of a DataFrame's columns and rows stay in ``spark/`` (they are
about the data, decided when it is written).
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple, Union

from .. import errors
from .checks import duration_text, name, subject
from .connection import CONNECTION_OPTIONS, HELPER_ROLE, ConnectionSettings, connection_from, option_strings

__all__ = [
    "READ",
    "READ_STREAM",
    "ANY_READ",
    "WRITE",
    "WRITE_STREAM",
    "KNOWN_OPTIONS",
    "check_names",
    "Offset",
    "ReadOptions",
    "WriteOptions",
    "text_flag",
    "text_count",
    "parse_offset",
    "parse_time",
    "trace_context",
]

READ = "spark.read"
READ_STREAM = "spark.readStream"
ANY_READ = "spark.read/readStream"  # schema() is asked at load() before Spark says which
WRITE = "df.write"
WRITE_STREAM = "df.writeStream"

_SOURCE = ("stream", "subjects", "startingOffsets", "startingTime", "minPartitions", "failOnDataLoss",
           "includeHeaders", "fetchBatch", "fetchTimeout")  # fmt: skip
_SINK = ("subject", "publishTimeout", "msgIdPrefix", "traceparent", "tracestate", "exactlyOnce", "progressSubject",
         "writeId")  # fmt: skip
_CONSUMER = ("consumer", "createConsumer", "ackWait")  # consumer mode: streaming reads only
# Every option of each role, in its documented spelling.
KNOWN_OPTIONS: Dict[str, Tuple[str, ...]] = {
    READ: CONNECTION_OPTIONS + _SOURCE + ("endingOffsets",),
    READ_STREAM: CONNECTION_OPTIONS + _SOURCE + ("maxOffsetsPerTrigger",) + _CONSUMER,
    WRITE: CONNECTION_OPTIONS + _SINK,
    # Spark hands a streaming sink the query's checkpointLocation and queryName as options.
    WRITE_STREAM: CONNECTION_OPTIONS + _SINK + ("checkpointLocation", "queryName"),
    HELPER_ROLE: CONNECTION_OPTIONS,
}
KNOWN_OPTIONS[ANY_READ] = KNOWN_OPTIONS[READ] + ("maxOffsetsPerTrigger",) + _CONSUMER
_ROLES = (READ, READ_STREAM, WRITE, WRITE_STREAM)  # what the messages name as another role's

# "earliest", "latest" (resolved when read), or a stream sequence.
Offset = Union[int, str]


def _checked(options: Mapping[str, str], role: str) -> Dict[str, str]:
    """``options`` (lower-case keys), once each is an option of ``role``."""
    others = {r: names for r, names in KNOWN_OPTIONS.items() if r in _ROLES and r != role}
    return option_strings(options, role, KNOWN_OPTIONS[role], others)


_WRITE_ONLY = {n.lower() for n in KNOWN_OPTIONS[WRITE_STREAM]} - {n.lower() for n in KNOWN_OPTIONS[ANY_READ]}
_ALL = "the jetstream data source"
KNOWN_OPTIONS[_ALL] = tuple(dict.fromkeys(n for r in (ANY_READ, WRITE_STREAM) for n in KNOWN_OPTIONS[r]))
_WRITES = "df.write/writeStream"
KNOWN_OPTIONS[_WRITES] = KNOWN_OPTIONS[WRITE_STREAM]


def check_names(options: Mapping[str, str]) -> None:
    """The check made when Spark builds the data source (at ``load()``,
    ``save()``, ``start()``), before it says what for: the options must fit
    one kind of use. ``stream`` means a read, a sink-only option
    (``subject``, ``checkpointLocation`` ...) a write; otherwise every name
    must at least be one of the source's. The exact role is checked after,
    by :meth:`ReadOptions.parse` / :meth:`WriteOptions.parse`."""
    given = {k.lower() for k in options}
    if "stream" in given:
        role = ANY_READ
    elif given & {"checkpointlocation", "queryname"}:
        role = WRITE_STREAM
    elif given & _WRITE_ONLY:
        role = _WRITES
    else:
        role = _ALL
    _checked(options, role)


def text_flag(option: str, value: Optional[str], default: bool) -> bool:
    """``true``/``1``/``yes`` or ``false``/``0``/``no`` (any case); ``default`` when not given."""
    if value is None:
        return default
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise errors.InvalidOptionError(f"{option}={value!r}: expected true or false")


def text_count(option: str, value: Optional[str], default: Optional[int], minimum: int = 1) -> Optional[int]:
    """An integer >= ``minimum`` written as text; ``default`` when not given."""
    if value is None:
        return default
    try:
        n = int(value)
    except ValueError:
        raise errors.InvalidOptionError(f"{option}={value!r}: expected an integer >= {minimum}") from None
    if n < minimum:
        raise errors.InvalidOptionError(f"{option}={value!r}: expected an integer >= {minimum}")
    return n


def parse_offset(option: str, spec: str, stream: str) -> Offset:
    """``earliest``/``latest`` (lower-cased: resolved when read), a sequence
    number, or ``{"stream": S, "seq": N}`` (the next sequence to read; an
    exclusive end)."""
    s = spec.strip()
    if s.lower() in ("earliest", "latest"):
        return s.lower()
    try:
        value = json.loads(s)
    except ValueError:
        raise errors.InvalidOptionError(
            f"{option}={spec!r}: an offset is earliest, latest, a sequence or {{\"stream\": S, \"seq\": N}}"
        ) from None
    if isinstance(value, dict):
        if value.get("stream", stream) != stream:
            raise errors.InvalidOptionError(f"{option}={spec!r}: the offset is for another stream than {stream!r}")
        value = value.get("seq")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise errors.InvalidOptionError(f"{option}={spec!r}: the sequence must be an integer >= 1")
    return value


def parse_time(option: str, text: str) -> datetime.datetime:
    """An aware UTC-or-offset datetime from ISO 8601 (``2024-05-01T12:00:00Z``;
    no zone means UTC) or epoch milliseconds."""
    try:
        return datetime.datetime.fromtimestamp(int(text) / 1000, datetime.timezone.utc)
    except ValueError:
        pass
    except (OverflowError, OSError):
        raise errors.InvalidOptionError(f"{option}={text!r}: epoch milliseconds out of range") from None
    try:
        when = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise errors.InvalidOptionError(
            f"{option}={text!r}: expected ISO 8601 (2024-05-01T12:00:00Z) or epoch milliseconds"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=datetime.timezone.utc)


@dataclass(frozen=True)
class ReadOptions:
    """The reader's options, checked (see docs/guides/pyspark.md for each)."""

    stream: str
    subjects: Tuple[str, ...]
    starting: Offset  # default: earliest for spark.read, latest for readStream
    ending: Offset  # default latest; batch only
    starting_time: Optional[datetime.datetime]
    min_partitions: Optional[int]  # default: one partition per 100,000 sequences
    fail_on_data_loss: bool  # default True
    include_headers: bool  # default True
    max_offsets_per_trigger: Optional[int]  # sequences per micro-batch; default no limit
    fetch_batch: int  # messages per pull, default 1000
    fetch_timeout: float  # seconds without a message before asking the server, default 10
    connection: ConnectionSettings
    # Consumer mode (readStream only): the durable pull consumer to read through, or None.
    consumer: Optional[str] = None
    create_consumer: bool = False  # createConsumer: create it (explicit acks) if missing; default false
    ack_wait: float = 30.0  # ackWait: seconds, the AckWait of a consumer created here; default 30

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: Optional[bool]) -> "ReadOptions":
        """Check every option of a batch read (``streaming=False``), a
        streaming read (True) or either (None: ``schema()`` at ``load()``)."""
        role = ANY_READ if streaming is None else READ_STREAM if streaming else READ
        o = _checked(options, role)
        if not o.get("stream"):
            raise errors.InvalidOptionError("option 'stream' is required: the name of the stream to read")
        stream = name("stream", o["stream"])
        given = [s.strip() for s in o.get("subjects", "").split(",") if s.strip()]
        subjects = tuple(subject(s, what="subjects", wildcards=True) for s in given)
        starting = o.get("startingoffsets", "latest" if streaming else "earliest")
        consumer = name("consumer", o["consumer"]) if "consumer" in o else None
        _check_consumer_mode(o, consumer)
        return cls(
            stream=stream,
            subjects=subjects,
            starting=parse_offset("startingOffsets", starting, stream),
            ending=parse_offset("endingOffsets", o.get("endingoffsets", "latest"), stream),
            starting_time=parse_time("startingTime", o["startingtime"]) if "startingtime" in o else None,
            min_partitions=text_count("minPartitions", o.get("minpartitions"), None),
            fail_on_data_loss=text_flag("failOnDataLoss", o.get("failondataloss"), True),
            include_headers=text_flag("includeHeaders", o.get("includeheaders"), True),
            max_offsets_per_trigger=text_count("maxOffsetsPerTrigger", o.get("maxoffsetspertrigger"), None),
            fetch_batch=text_count("fetchBatch", o.get("fetchbatch"), 1000) or 1000,
            fetch_timeout=duration_text("fetchTimeout", o.get("fetchtimeout"), 10.0),
            connection=connection_from(o),
            consumer=consumer,
            create_consumer=text_flag("createConsumer", o.get("createconsumer"), False),
            ack_wait=duration_text("ackWait", o.get("ackwait"), 30.0),
        )


# Options that place a sequence-range read: the consumer's own position replaces them.
_RANGE_ONLY = {"startingoffsets": "startingOffsets", "startingtime": "startingTime", "failondataloss": "failOnDataLoss"}


def _check_consumer_mode(o: Mapping[str, str], consumer: Optional[str]) -> None:
    """Consumer mode takes no sequence-range option, and its own options need ``consumer``."""
    if consumer is None:
        for key, shown in (("createconsumer", "createConsumer"), ("ackwait", "ackWait")):
            if key in o:
                raise errors.InvalidOptionError(f"option '{shown}' needs option 'consumer' (the durable consumer to read through)")
        return
    for key, shown in _RANGE_ONLY.items():
        if key in o:
            raise errors.InvalidOptionError(
                f"option '{shown}' is not used with option 'consumer': the consumer's ack floor is where a read starts"
            )
    if "subjects" in o and not text_flag("createConsumer", o.get("createconsumer"), False):
        raise errors.InvalidOptionError(
            "option 'subjects' with option 'consumer' needs createConsumer=true (it is the filter of the consumer "
            "created); an existing consumer reads through its own filter"
        )
    if "ackwait" in o and not text_flag("createConsumer", o.get("createconsumer"), False):
        raise errors.InvalidOptionError("option 'ackWait' needs createConsumer=true: an existing consumer keeps its own")


@dataclass(frozen=True)
class WriteOptions:
    """The sink's options, checked."""

    subject: Optional[str]  # the subject option: overrides a subject column
    timeout: float  # publishTimeout: seconds to wait for each PubAck, default 30
    msg_id_prefix: Optional[str]
    connection: ConnectionSettings
    trace: Dict[str, str]  # traceparent / tracestate: the trace context the messages carry ({}: none given)
    # exactlyOnce=true: rows go in atomic batches, each ending with a progress
    # marker on <progressSubject>.<writeId or query id>.<partition>.
    progress_subject: Optional[str] = None  # None: exactly-once mode is off
    write_id: Optional[str] = None

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool) -> "WriteOptions":
        o = _checked(options, WRITE_STREAM if streaming else WRITE)
        exactly_once = text_flag("exactlyOnce", o.get("exactlyonce"), False)
        progress = o.get("progresssubject") or None
        write_id = o.get("writeid") or None
        if exactly_once:
            if progress is None:
                raise errors.InvalidOptionError(
                    "exactlyOnce=true needs the 'progressSubject' option: a subject of the target stream (no"
                    " wildcards) under which each partition's progress marker is stored"
                )
            subject(progress, what="option 'progressSubject'")
            if write_id is None and not streaming:
                raise errors.InvalidOptionError(
                    "exactlyOnce=true on df.write needs the 'writeId' option: the name of this write, the same"
                    " when it is run again"
                )
            if write_id is not None:
                try:
                    name("writeId", write_id)
                except errors.InvalidOptionError:  # it becomes a token of the marker's subject
                    raise errors.InvalidOptionError(
                        f"option 'writeId' must be one subject token (no '.', '*', '>', '/', '\\' or whitespace),"
                        f" got {write_id!r}"
                    ) from None
        elif progress is not None or write_id is not None:
            raise errors.InvalidOptionError(
                f"option '{'progressSubject' if progress is not None else 'writeId'}' needs exactlyOnce=true"
            )
        return cls(
            subject=subject(o["subject"]) if o.get("subject") else None,
            timeout=duration_text("publishTimeout", o.get("publishtimeout"), 30.0),
            msg_id_prefix=o.get("msgidprefix") or None,
            connection=connection_from(o),
            trace=trace_context(o.get("traceparent"), o.get("tracestate")),
            progress_subject=progress if exactly_once else None,
            write_id=write_id,
        )


_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def trace_context(traceparent: Optional[str], tracestate: Optional[str]) -> Dict[str, str]:
    """The W3C trace headers ``{"traceparent": ..., "tracestate": ...}`` of a
    write, checked ({} when neither is given)."""
    if not traceparent:
        if tracestate:
            raise errors.InvalidOptionError("option 'tracestate' needs a 'traceparent'")
        return {}
    if (not isinstance(traceparent, str) or not _TRACEPARENT.fullmatch(traceparent) or traceparent.startswith("ff")
            or traceparent[3:35] == "0" * 32 or traceparent[36:52] == "0" * 16):
        raise errors.InvalidOptionError(
            f"option 'traceparent' must be a W3C traceparent (00-<32 hex trace id>-<16 hex span id>-<2 hex flags>), "
            f"got {traceparent!r}"
        )
    out = {"traceparent": traceparent}
    if tracestate:
        if not isinstance(tracestate, str) or any(c in tracestate for c in "\r\n") or not tracestate.isprintable():
            raise errors.InvalidOptionError(f"option 'tracestate' must be one line of text, got {tracestate!r}")
        out["tracestate"] = tracestate
    return out
