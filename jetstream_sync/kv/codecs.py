"""Key and value codecs for key-value buckets (ADR-54).

A codec turns what the application uses into what the bucket stores and
back: ``js.key_value("B", key_codec=codecs.PathCodec(),
value_codec=codecs.Base64Codec())`` stores the key ``/users/ann`` as
``_root_.users.ann`` and every value base64-encoded; ``get``, ``keys()``,
``history`` and watches hand back the decoded key and value.

A codec is any object with ``encode(x)`` and ``decode(x)`` callables: str to
str for keys, bytes to bytes for values. A key codec may also have
``encode_filter(pattern)``, which keeps the wildcards ``*`` and ``>`` of a
watch or ``keys()`` pattern; one without it is given plain keys only (a
pattern with wildcards raises InvalidKeyError, as in orbit.go's kvcodec).

Built in, wire-compatible with orbit.go's ``kvcodec``:

- :class:`NoOpCodec` leaves keys and values as they are;
- :class:`Base64Codec` encodes each '.'-separated key token, or a whole
  value, as URL-safe base64 without padding (any text becomes a valid key;
  the dots still separate tokens, so wildcards still work);
- :class:`PathCodec` maps '/'-separated paths to '.' tokens: a leading '/'
  becomes the token ``_root_``, a trailing '/' is dropped; values pass;
- :class:`FuncCodec` wraps a user's ``encode`` / ``decode`` functions;
- :func:`chain` applies codecs in order when encoding, in reverse when decoding.

Codecs hold no state here and are called from any thread at once: a user's
codec must be safe for that.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from typing import Any, Callable, Optional, Sequence, Tuple, cast

from .. import errors, options

__all__ = ["Base64Codec", "ChainCodec", "FuncCodec", "NoOpCodec", "PathCodec", "chain"]

ROOT_TOKEN = "_root_"  # a path's leading '/', as orbit.go's PathCodec
_WILDCARDS = ("*", ">")


class NoOpCodec:
    """Leaves keys, patterns and values as they are."""

    def encode(self, value: Any) -> Any:
        return value

    def decode(self, value: Any) -> Any:
        return value

    def encode_filter(self, pattern: str) -> str:
        return pattern

    def __repr__(self) -> str:
        return "NoOpCodec()"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not URL-safe base64: {text!r}") from exc


class Base64Codec:
    """URL-safe base64 without padding: a key token by token (UTF-8 text;
    the '.' separators stay), a value as a whole."""

    def encode(self, value: Any) -> Any:
        if isinstance(value, str):
            return ".".join(_b64(t.encode()) for t in value.split("."))
        return _b64(bytes(value)).encode("ascii")

    def decode(self, value: Any) -> Any:
        if isinstance(value, str):
            return ".".join(_unb64(t).decode() for t in value.split("."))
        return _unb64(bytes(value).decode("ascii"))

    def encode_filter(self, pattern: str) -> str:
        return ".".join(t if t in _WILDCARDS else _b64(t.encode()) for t in pattern.split("."))

    def __repr__(self) -> str:
        return "Base64Codec()"


class PathCodec:
    """'/'-separated paths as '.'-separated keys: ``a/b`` is ``a.b``, ``/a/b``
    is ``_root_.a.b``, ``/`` is ``_root_``; a trailing '/' is dropped (so
    ``a/b/`` reads back as ``a/b``). Values pass unchanged."""

    def encode(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if value.startswith("/"):
            value = ROOT_TOKEN if value == "/" else f"{ROOT_TOKEN}.{value[1:]}"
        return value.rstrip("/").replace("/", ".")

    def decode(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if value == ROOT_TOKEN:
            return "/"
        if value.startswith(ROOT_TOKEN + "."):
            return "/" + value[len(ROOT_TOKEN) + 1 :].replace(".", "/")
        return value.replace(".", "/")

    def encode_filter(self, pattern: str) -> str:
        return str(self.encode(pattern))

    def __repr__(self) -> str:
        return "PathCodec()"


class FuncCodec:
    """A codec from two functions: ``encode`` and ``decode`` (str to str for
    keys, bytes to bytes for values), and for a key codec optionally
    ``encode_filter`` for patterns with wildcards."""

    def __init__(
        self,
        encode: Callable[[Any], Any],
        decode: Callable[[Any], Any],
        encode_filter: Optional[Callable[[str], str]] = None,
    ) -> None:
        options.codec_functions(encode, decode, encode_filter)
        self.encode = encode
        self.decode = decode
        if encode_filter is not None:
            self.encode_filter = encode_filter

    def __repr__(self) -> str:
        return f"FuncCodec({getattr(self.encode, '__name__', self.encode)!r}, {getattr(self.decode, '__name__', self.decode)!r})"


class ChainCodec:
    """Codecs applied in order to encode, in reverse order to decode. Patterns
    go through each one's ``encode_filter`` (or, without one, must be plain keys)."""

    def __init__(self, codecs: Sequence[Any]) -> None:
        self.codecs: Tuple[Any, ...] = tuple(codecs)

    def encode(self, value: Any) -> Any:
        for codec in self.codecs:
            value = codec.encode(value)
        return value

    def decode(self, value: Any) -> Any:
        for codec in reversed(self.codecs):
            value = codec.decode(value)
        return value

    def encode_filter(self, pattern: str) -> str:
        for codec in self.codecs:
            pattern = encode_filter(codec, pattern)
        return pattern

    def __repr__(self) -> str:
        return f"chain({', '.join(map(repr, self.codecs))})"


def chain(*codecs: Any) -> ChainCodec:
    """One codec from several (at least one; each checked as a codec):
    ``chain(PathCodec(), Base64Codec())`` maps the path, then base64-encodes its tokens."""
    return ChainCodec(options.codec_chain(codecs))


def encode_filter(codec: Any, pattern: str) -> str:
    """``pattern`` through ``codec`` keeping its wildcards; InvalidKeyError
    when it has wildcards and the codec cannot keep them."""
    keep = getattr(codec, "encode_filter", None)
    if callable(keep):
        return str(keep(pattern))
    if any(t in _WILDCARDS for t in pattern.split(".")):
        raise errors.InvalidKeyError(
            f"key codec {codec!r} has no encode_filter, so the pattern {pattern!r} cannot keep its wildcards;"
            " watch all keys and filter them in the application instead"
        )
    return str(codec.encode(pattern))


@dataclasses.dataclass(frozen=True)
class Codecs:
    """A handle's key and value codecs (None: as stored). Each call wraps a
    codec's failure in KeyValueCodecError, naming the codec and the input."""

    key: Any = None
    value: Any = None

    @classmethod
    def checked(cls, key_codec: Any, value_codec: Any) -> "Codecs":
        """A handle's codecs, each checked to be a codec (InvalidOptionError)."""
        return cls(options.kv_codec("key_codec", key_codec), options.kv_codec("value_codec", value_codec))

    def encode_key(self, key: str) -> str:
        return key if self.key is None else self._call("encode", self.key.encode, key, str)

    def decode_key(self, key: str) -> str:
        return key if self.key is None else self._call("decode", self.key.decode, key, str)

    def encode_filter(self, pattern: str) -> str:
        if self.key is None:
            return pattern
        return cast(str, self._call("encode", lambda p: encode_filter(self.key, p), pattern, str))

    def encode_value(self, value: Any) -> Any:
        if self.value is None:
            return value
        return self._call("encode", self.value.encode, options.as_bytes(value), bytes)

    def decode_value(self, value: bytes) -> bytes:
        return value if self.value is None else self._call("decode", self.value.decode, value, bytes)

    @staticmethod
    def _call(what: str, fn: Callable[[Any], Any], arg: Any, kind: type) -> Any:
        try:
            out = fn(arg)
        except errors.InvalidKeyError:
            raise  # a pattern the codec cannot keep wildcards of
        except Exception as exc:
            raise errors.KeyValueCodecError(f"codec could not {what} {arg!r}: {exc}") from exc
        if kind is bytes and isinstance(out, (bytearray, memoryview)):
            out = bytes(out)
        if not isinstance(out, kind):
            raise errors.KeyValueCodecError(f"codec's {what} returned {type(out).__name__}, not {kind.__name__}, for {arg!r}")
        return out


AS_STORED = Codecs()  # no codecs: keys and values as the bucket stores them
