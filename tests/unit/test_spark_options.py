"""The Spark integration's option strings (options/spark.py, options/connection.py):
the known options of each role, did-you-mean, errors that name their option,
the one parser of connection settings, and secrets kept out of messages. No pyspark."""

import pickle

import pytest

import jetstream_sync as jss
from jetstream_sync.options.connection import ConnectionSettings, TlsSettings, connection_settings
from jetstream_sync.options.spark import (
    ANY_READ,
    KNOWN_OPTIONS,
    READ,
    READ_STREAM,
    WRITE,
    WRITE_STREAM,
    ReadOptions,
    WriteOptions,
    check_names,
    parse_offset,
    trace_context,
)

NATS = {"servers": "nats://127.0.0.1:4222"}
SOURCE = {**NATS, "stream": "S"}


def parse(role, options):
    """Parse as Spark hands the options over: keys lower-cased."""
    given = {k.lower(): v for k, v in options.items()}
    if role in (READ, READ_STREAM, ANY_READ):
        return ReadOptions.parse({**{k.lower(): v for k, v in SOURCE.items()}, **given}, {READ: False, READ_STREAM: True}.get(role))
    if role in (WRITE, WRITE_STREAM):
        return WriteOptions.parse({"servers": NATS["servers"], **given}, role == WRITE_STREAM)
    return connection_settings({**NATS, **options})


MISSPELLED = [
    (ANY_READ, "subject", "subjects"),
    (READ, "subject", "subjects"),
    (READ_STREAM, "subject", "subjects"),
    (READ, "startingOffset", "startingOffsets"),
    (READ_STREAM, "startingOffset", "startingOffsets"),
    (READ, "endingOffset", "endingOffsets"),
    (ANY_READ, "maxOffsetPerTrigger", "maxOffsetsPerTrigger"),
    (READ_STREAM, "maxOffsetPerTrigger", "maxOffsetsPerTrigger"),
    (READ, "maxOffsetPerTrigger", "maxOffsetsPerTrigger"),  # and it says it is a streaming option
    (READ, "server", "servers"),
    (WRITE, "server", "servers"),
    (WRITE_STREAM, "server", "servers"),
    ("helper", "server", "servers"),
    (READ, "failOnDataLos", "failOnDataLoss"),
    (READ, "includeHeader", "includeHeaders"),
    (READ, "minPartition", "minPartitions"),
    (READ, "fetchTimout", "fetchTimeout"),
    (READ, "startTime", "startingTime"),
    (READ, "tls.cafile", "tls.ca"),
    ("helper", "tls.certificate", "tls.cert"),
    ("helper", "passwd", "password"),
    (WRITE, "subjects", "subject"),
    (WRITE, "publishTimout", "publishTimeout"),
    (WRITE_STREAM, "msgIdPrefx", "msgIdPrefix"),
    (READ_STREAM, "consumr", "consumer"),
    (READ_STREAM, "createConsumers", "createConsumer"),
    (READ_STREAM, "ackWiat", "ackWait"),
    (READ, "consumers", "consumer"),  # and it says it is a streaming option
]


@pytest.mark.parametrize("role,typo,meant", MISSPELLED, ids=[f"{r}:{t}" for r, t, _ in MISSPELLED])
def test_a_misspelled_option_names_the_closest_known_one(role, typo, meant):
    bad = {"servers": "nats://x:1"} if typo in ("server",) else {}
    with pytest.raises(jss.InvalidOptionError, match=f"unknown option '{typo.lower()}'.*did you mean '{meant}'") as e:
        parse(role, {**bad, typo: "1"})
    assert isinstance(e.value, ValueError)


def test_an_option_of_another_role_says_whose_it_is():
    with pytest.raises(jss.InvalidOptionError, match=r"'endingOffsets' for spark.readStream.*option of spark.read only"):
        parse(READ_STREAM, {"endingOffsets": "5"})
    with pytest.raises(jss.InvalidOptionError, match=r"'maxOffsetsPerTrigger' is an option of spark.readStream only"):
        parse(READ, {"maxOffsetsPerTrigger": "5"})
    with pytest.raises(jss.InvalidOptionError, match=r"'checkpointLocation' is an option of df.writeStream only"):
        parse(WRITE, {"checkpointLocation": "/tmp/x"})
    with pytest.raises(jss.InvalidOptionError, match=r"unknown option 'stream' for publish_partition/shared_client"):
        connection_settings({**NATS, "stream": "S"})


def test_the_names_alone_are_checked_when_spark_builds_the_source():
    """DataSource.__init__ runs before Spark says what for: the names tell what they can."""
    with pytest.raises(jss.InvalidOptionError, match=r"'msgidprefx' for df.write/writeStream; did you mean 'msgIdPrefix'"):
        check_names({"servers": "x", "subject": "a", "msgidprefx": "j"})
    with pytest.raises(jss.InvalidOptionError, match=r"'subjects' for df.writeStream; did you mean 'subject'\?"):
        check_names({"servers": "x", "subjects": "a", "checkpointlocation": "/ck"})
    with pytest.raises(jss.InvalidOptionError, match=r"'subject' for spark.read/readStream; did you mean 'subjects'\?"):
        check_names({"servers": "x", "stream": "S", "subject": "a"})
    with pytest.raises(jss.InvalidOptionError, match=r"'colour' for the jetstream data source; its options are"):
        check_names({"colour": "red"})
    check_names({"servers": "x", "subjects": "a", "startingoffsets": "earliest"})  # a read short of 'stream': for schema() to say
    check_names({"servers": "x", "subjects": "a"})  # a writeStream with 'subjects' too: its first batch says


def test_an_unknown_option_with_nothing_close_lists_the_known_ones():
    with pytest.raises(jss.InvalidOptionError, match=r"unknown option 'colour' for df.write; its options are: servers, .*msgIdPrefix"):
        parse(WRITE, {"colour": "red"})


@pytest.mark.parametrize("role", [READ, READ_STREAM, ANY_READ, WRITE, WRITE_STREAM])
def test_every_documented_option_of_a_role_is_accepted_in_any_case(role):
    for name in KNOWN_OPTIONS[role]:
        assert name.lower() in {k.lower() for k in KNOWN_OPTIONS[role]}
    streaming = {READ: False, READ_STREAM: True, ANY_READ: None}
    if role in streaming:
        o = ReadOptions.parse({"SERVERS": NATS["servers"], "Stream": "S", "MAXOFFSETSPERTRIGGER" if role != READ else "endingoffsets": "5"},
                              streaming[role])  # fmt: skip
        assert o.stream == "S"
    else:
        o = WriteOptions.parse({"Servers": NATS["servers"], "SUBJECT": "a.b", "queryname": "q"} if role == WRITE_STREAM
                               else {"Servers": NATS["servers"], "SUBJECT": "a.b"}, role == WRITE_STREAM)  # fmt: skip
        assert o.subject == "a.b"


@pytest.mark.parametrize("role", [READ, READ_STREAM, WRITE, WRITE_STREAM])
def test_servers_is_required_there_is_no_default(role):
    options = {"stream": "S"} if role in (READ, READ_STREAM) else {}
    with pytest.raises(jss.InvalidOptionError, match="option 'servers' is required"):
        if role in (READ, READ_STREAM):
            ReadOptions.parse(options, role == READ_STREAM)
        else:
            WriteOptions.parse({**options, "servers": " , "}, role == WRITE_STREAM)
    with pytest.raises(jss.InvalidOptionError, match="option 'servers' is required"):
        connection_settings({"user": "u"})


def test_stream_is_required_for_reads():
    with pytest.raises(jss.InvalidOptionError, match="option 'stream' is required"):
        ReadOptions.parse(NATS, False)


BAD_VALUES = [
    ({"endingOffsets": '{"seq":"x"}'}, r"""endingOffsets='{"seq":"x"}': the sequence must be an integer >= 1"""),
    ({"startingOffsets": "soon"}, r"startingOffsets='soon': an offset is earliest, latest"),
    ({"startingOffsets": '{"stream": "OTHER", "seq": 3}'}, r"startingOffsets=.*another stream than 'S'"),
    ({"endingOffsets": "0"}, r"endingOffsets='0'"),
    ({"minPartitions": "0"}, r"minPartitions='0': expected an integer >= 1"),
    ({"fetchBatch": "many"}, r"fetchBatch='many': expected an integer"),
    ({"failOnDataLoss": "maybe"}, r"failOnDataLoss='maybe': expected true or false"),
    ({"includeHeaders": "2"}, r"includeHeaders='2': expected true or false"),
    ({"fetchTimeout": "x"}, r"fetchTimeout must be a number of seconds"),
    ({"fetchTimeout": "inf"}, r"fetchTimeout must be a finite"),
    ({"startingTime": "yesterday"}, r"startingTime='yesterday': expected ISO 8601"),
    ({"subjects": "a b"}, r"subjects must not contain whitespace"),
    ({"stream": "A.B"}, r"stream name must not contain"),
    ({"servers": "http://h:1"}, r"unsupported URL scheme 'http'"),
    ({"tls.key": "/k.pem"}, r"option 'tls.key' needs option 'tls.cert'"),
    ({"password": "p"}, r"option 'password' needs option 'user'"),
]


@pytest.mark.parametrize("options,message", BAD_VALUES, ids=[next(iter(o)) for o, _ in BAD_VALUES])
def test_every_parse_error_names_its_option(options, message):
    with pytest.raises(jss.InvalidOptionError, match=message):
        ReadOptions.parse({**SOURCE, **{k.lower(): v for k, v in options.items()}}, False)


# Consumer mode (readStream): each refused option, and why.
CONSUMER_MODE = [
    ({"consumer": "A.B"}, r"consumer name must not contain"),
    ({"consumer": "c", "createConsumer": "perhaps"}, r"createConsumer='perhaps': expected true or false"),
    ({"consumer": "c", "createConsumer": "true", "ackWait": "soon"}, r"ackWait must be a number of seconds"),
    ({"consumer": "c", "createConsumer": "true", "ackWait": "0"}, r"ackWait"),
    ({"createConsumer": "true"}, r"option 'createConsumer' needs option 'consumer'"),
    ({"ackWait": "5"}, r"option 'ackWait' needs option 'consumer'"),
    ({"consumer": "c", "ackWait": "5"}, r"option 'ackWait' needs createConsumer=true"),
    ({"consumer": "c", "subjects": "a.>"}, r"option 'subjects' with option 'consumer' needs createConsumer=true"),
    ({"consumer": "c", "startingOffsets": "earliest"}, r"option 'startingOffsets' is not used with option 'consumer'"),
    ({"consumer": "c", "startingTime": "0"}, r"option 'startingTime' is not used with option 'consumer'"),
    ({"consumer": "c", "failOnDataLoss": "false"}, r"option 'failOnDataLoss' is not used with option 'consumer'"),
]


@pytest.mark.parametrize("options,message", CONSUMER_MODE, ids=[",".join(o) for o, _ in CONSUMER_MODE])
def test_consumer_mode_option_checks(options, message):
    with pytest.raises(jss.InvalidOptionError, match=message):
        ReadOptions.parse({**SOURCE, **{k.lower(): v for k, v in options.items()}}, True)


def test_consumer_mode_options_are_for_readstream_only_and_parse():
    with pytest.raises(jss.InvalidOptionError, match=r"unknown option 'consumer' for spark.read .*spark.readStream only"):
        ReadOptions.parse({**SOURCE, "consumer": "c"}, False)
    o = ReadOptions.parse({**SOURCE, "consumer": "c", "createconsumer": "TRUE", "ackwait": "2.5", "subjects": "a.>"}, True)
    assert (o.consumer, o.create_consumer, o.ack_wait, o.subjects) == ("c", True, 2.5, ("a.>",))
    o = ReadOptions.parse({**SOURCE, "consumer": "c"}, None)
    assert (o.consumer, o.create_consumer, o.ack_wait) == ("c", False, 30.0)
    assert ReadOptions.parse(SOURCE, True).consumer is None


def test_parsed_values():
    o = ReadOptions.parse({**SOURCE, "startingoffsets": '{"stream":"S","seq":5}', "endingoffsets": "9",
                           "startingtime": "1700000000000", "includeheaders": "NO"}, False)  # fmt: skip
    assert (o.starting, o.ending, o.include_headers) == (5, 9, False)
    assert o.starting_time is not None and o.starting_time.timestamp() == 1_700_000_000
    assert ReadOptions.parse({**SOURCE, "startingtime": "2024-05-01T12:00:00"}, False).starting_time.utcoffset().total_seconds() == 0
    assert parse_offset("endingOffsets", " LATEST ", "S") == "latest"
    w = WriteOptions.parse({**NATS, "publishtimeout": "2.5", "msgidprefix": "job"}, False)
    assert (w.subject, w.timeout, w.msg_id_prefix) == (None, 2.5, "job")


SECRETS = {"password": "pw-SECRET-1", "token": "tok-SECRET-2", "nkey": "SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU",
           "tls.key": "-----BEGIN PRIVATE KEY-----\nKEY-SECRET-3\n-----END PRIVATE KEY-----\n", "tls.keyPassword": "kp-SECRET-4"}  # fmt: skip


def test_secrets_never_appear_in_a_repr_or_a_message():
    given = {"servers": "nats://u:url-SECRET-5@127.0.0.1:4222", "user": "u", "tls.cert": "/c.pem", **SECRETS}
    settings = connection_settings(given)
    shown = repr(settings) + str(settings) + repr(ReadOptions.parse({**{k.lower(): v for k, v in given.items()}, "stream": "S"}, False))
    for secret in [*SECRETS.values(), "url-SECRET-5"]:
        assert secret not in shown
    assert "u:***@127.0.0.1" in shown and "/c.pem" in shown
    for key in ("password", "tls.keyPassword", "token"):  # a bad value is described, never quoted
        with pytest.raises(jss.InvalidOptionError) as e:
            connection_settings({**given, key: 42})
        assert "int" in str(e.value) and all(s not in str(e.value) for s in SECRETS.values())
    with pytest.raises(jss.InvalidOptionError) as e:
        connection_settings({**given, "servers": "nats://u:url-SECRET-5@h:x"})
    assert "url-SECRET-5" not in str(e.value)


def test_settings_are_plain_data_that_pickle_and_hash():
    settings = connection_settings({"servers": "nats://a:1,nats://b:2", "user": "u", "tls.cert": "/c", **SECRETS})
    assert settings.servers == ("nats://a:1", "nats://b:2")
    assert pickle.loads(pickle.dumps(settings)) == settings
    assert hash(settings) == hash(connection_settings({"servers": "nats://a:1,nats://b:2", "user": "u", "tls.cert": "/c", **SECRETS}))
    assert settings.tls == TlsSettings(cert="/c", key=SECRETS["tls.key"], key_password=SECRETS["tls.keyPassword"])
    assert connection_settings(settings) is settings
    assert connection_settings("nats://a:1, nats://b:2").servers == ("nats://a:1", "nats://b:2")
    with pytest.raises(jss.InvalidOptionError, match="servers string or a mapping"):
        connection_settings(["nats://a:1"])


def test_connect_keywords():
    seed = connection_settings({**NATS, "nkey": SECRETS["nkey"], "Name": "n"}).connect_options()
    assert seed == {"nkeys_seed_str": SECRETS["nkey"], "name": "n"}
    assert connection_settings({**NATS, "nkey": "/keys/user.nk"}).connect_options() == {"nkeys_seed": "/keys/user.nk"}
    full = connection_settings({**NATS, "user": "u", "password": "p", "creds": "/u.creds", "token": "t"}).connect_options()
    assert full == {"user": "u", "password": "p", "user_credentials": "/u.creds", "token": "t"}
    assert ConnectionSettings(servers=("nats://a:1",)).tls is None


def test_the_guide_s_option_table_lists_every_option_of_every_role():
    import re
    from pathlib import Path

    from jetstream_sync.options.connection import HELPER_ROLE

    guide = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "pyspark.md").read_text()
    table = guide[guide.index("| option | type | default | read |"):].split("\n\n")[0].splitlines()[2:]
    columns = (READ, READ_STREAM, WRITE, WRITE_STREAM, HELPER_ROLE)
    documented = {role: set() for role in columns}
    for row in table:
        cells = [c.strip() for c in row.strip("|").split("|")]
        for name in re.findall(r"`([^`]+)`", cells[0]):
            for role, mark in zip(columns, cells[3:]):
                if mark == "✓":
                    documented[role].add(name)
    assert documented == {role: set(KNOWN_OPTIONS[role]) for role in columns}


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_write_carries_the_trace_context_of_its_options():
    opts = WriteOptions.parse({"servers": "nats://h:4222", "traceparent": TRACEPARENT, "traceState": "k=v"}, streaming=False)
    assert opts.trace == {"traceparent": TRACEPARENT, "tracestate": "k=v"}
    assert WriteOptions.parse({"servers": "nats://h:4222"}, streaming=True).trace == {}


@pytest.mark.parametrize("parent, state, match", [
    ("00-abc", None, "W3C traceparent"),
    (TRACEPARENT.upper(), None, "W3C traceparent"),  # lower-case hex only
    ("ff" + TRACEPARENT[2:], None, "W3C traceparent"),  # version ff is invalid
    ("00-" + "0" * 32 + TRACEPARENT[35:], None, "W3C traceparent"),  # all-zero trace id
    (TRACEPARENT[:36] + "0" * 16 + "-01", None, "W3C traceparent"),  # all-zero span id
    (None, "k=v", "needs a 'traceparent'"),
    (TRACEPARENT, "k=v\r\nX: y", "one line"),
])  # fmt: skip
def test_a_malformed_trace_context_is_refused(parent, state, match):
    with pytest.raises(jss.InvalidOptionError, match=match):
        trace_context(parent, state)


EXACTLY_ONCE_REFUSED = [
    (WRITE_STREAM, {"exactlyOnce": "true"}, "needs the 'progressSubject' option"),
    (WRITE_STREAM, {"exactlyOnce": "true", "progressSubject": "p.>"}, "must not contain wildcards"),
    (WRITE, {"exactlyOnce": "true", "progressSubject": "p"}, "needs the 'writeId' option"),
    (WRITE, {"exactlyOnce": "true", "progressSubject": "p", "writeId": "a.b"}, "one subject token"),
    (WRITE, {"writeId": "w"}, "'writeId' needs exactlyOnce=true"),
    (WRITE_STREAM, {"progressSubject": "p"}, "'progressSubject' needs exactlyOnce=true"),
    (WRITE, {"exactlyOnce": "maybe"}, "exactlyOnce='maybe': expected true or false"),
]


@pytest.mark.parametrize("role, given, message", EXACTLY_ONCE_REFUSED)
def test_exactly_once_options_that_cannot_work_are_refused(role, given, message):
    with pytest.raises(jss.InvalidOptionError, match=message.replace("(", r"\(").replace("*", r"\*")):
        parse(role, given)


def test_exactly_once_options():
    stream = parse(WRITE_STREAM, {"exactlyOnce": "TRUE", "progressSubject": "orders.progress"})
    assert (stream.progress_subject, stream.write_id) == ("orders.progress", None)  # the query id, per task
    batch = parse(WRITE, {"exactlyOnce": "yes", "progressSubject": "p", "writeId": "load-1"})
    assert (batch.progress_subject, batch.write_id) == ("p", "load-1")
    assert parse(WRITE, {"exactlyOnce": "false"}).progress_subject is None
