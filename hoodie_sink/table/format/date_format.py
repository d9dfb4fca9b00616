"""Java (Joda) date patterns, evaluated vectorised over Arrow.

Hudi's ``TimestampBasedKeyGenerator`` turns partition values into paths with Joda-Time
``DateTimeFormat`` patterns (``hoodie.keygen.timebased.output.dateformat`` /
``.input.dateformat``) in a configured time zone. We reproduce those patterns without per-row Python:
a pattern is tokenized once, formatting reads the fields of all values with pyarrow.compute, and
parsing compiles the pattern to one regex (one named group per field) and assembles epoch millis with
numpy. Also here: time-zone ids as Java accepts them, and the ``scalar.time.unit`` conversion to millis.
"""

from __future__ import annotations

import datetime
import functools
import re
import zoneinfo
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieConfigError, HoodieKeyError

TIME_UNIT_MS = {  # hoodie.keygen.timebased.timestamp.scalar.time.unit -> (multiplier, divisor) to millis
    "NANOSECONDS": (1, 1_000_000),
    "MICROSECONDS": (1, 1_000),
    "MILLISECONDS": (1, 1),
    "SECONDS": (1_000, 1),
    "MINUTES": (60_000, 1),
    "HOURS": (3_600_000, 1),
    "DAYS": (86_400_000, 1),
}


@dataclass(frozen=True)
class _Token:
    letter: str  # pattern letter, or "" for literal text
    width: int
    text: str = ""


# Letters we can print / parse. Joda knows more (G, C, x, w, e, z, ...); those are refused.
_FORMAT_LETTERS = set("yYMdDHhKkmsSaEZX")
_PARSE_LETTERS = set("yYMdHhKkmsSaEZX")
_NUMERIC_LETTERS = set("yYdDHhKkmsS")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December")  # fmt: skip
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MAX_DIGITS = {"y": 9, "Y": 9, "D": 3, "S": 9}
_REGEX_META = re.compile(r"([\\.^$|?*+()\[\]{}])")


def _is_numeric(token: _Token) -> bool:
    return token.letter in _NUMERIC_LETTERS or (token.letter == "M" and token.width <= 2)


@functools.lru_cache(maxsize=64)
def _tokenize(pattern: str, option: str) -> tuple[_Token, ...]:
    """Split a Java/Joda date pattern into letter runs and literal text ('quoted', '' = quote)."""
    tokens: list[_Token] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c.isascii() and c.isalpha():
            j = i
            while j < n and pattern[j] == c:
                j += 1
            tokens.append(_Token(c, j - i))
            i = j
            continue
        if c != "'":
            text, i = c, i + 1
        elif pattern.startswith("''", i):
            text, i = "'", i + 2
        else:
            end = i + 1
            chunk: list[str] = []
            while True:
                if end >= n:
                    raise HoodieConfigError(
                        f"{option}='{pattern}' has an unterminated quote. "
                        f"Help: close literal text with ', e.g. 'T'."
                    )
                if pattern.startswith("''", end):
                    chunk.append("'")
                    end += 2
                elif pattern[end] == "'":
                    break
                else:
                    chunk.append(pattern[end])
                    end += 1
            text, i = "".join(chunk), end + 1
        if tokens and not tokens[-1].letter:
            tokens[-1] = _Token("", 1, tokens[-1].text + text)
        else:
            tokens.append(_Token("", 1, text))
    return tuple(tokens)


def _unsupported_letter(pattern: str, option: str, token: _Token) -> HoodieConfigError:
    return HoodieConfigError(
        f"{option}='{pattern}' uses the pattern letter '{token.letter * token.width}', which hoodie_sink "
        f"does not support. Help: use y, M, d, H, h, a, m, s, S, E, D and Z (e.g. yyyy/MM/dd/HH); quote "
        f"literal text like 'T'."
    )


@functools.lru_cache(maxsize=64)
def compile_format(pattern: str, option: str) -> tuple[_Token, ...]:
    """Tokens of an output pattern; refuses letters we cannot print."""
    tokens = _tokenize(pattern, option)
    for t in tokens:
        if t.letter and (t.letter not in _FORMAT_LETTERS or (t.letter == "Z" and t.width > 2)):
            raise _unsupported_letter(pattern, option, t)
    return tokens


@dataclass(frozen=True)
class _Parser:
    pattern: str
    regex: str
    groups: tuple[tuple[str, _Token], ...]  # (regex group name, token)
    has_offset: bool


@functools.lru_cache(maxsize=64)
def compile_parser(pattern: str, option: str) -> _Parser:
    """A regex with one named group per field. As Joda, a numeric field directly followed by
    another numeric field is fixed-width (``yyyyMMdd``); otherwise it takes 1..max digits."""
    tokens = _tokenize(pattern, option)
    parts: list[str] = ["^"]
    groups: list[tuple[str, _Token]] = []
    for i, t in enumerate(tokens):
        if not t.letter:
            parts.append(_REGEX_META.sub(r"\\\1", t.text))
            continue
        if t.letter not in _PARSE_LETTERS or (t.letter == "Z" and t.width > 2):
            raise _unsupported_letter(pattern, option, t)
        name = f"g{i}"
        adjacent = i + 1 < len(tokens) and _is_numeric(tokens[i + 1])
        if t.letter in "yY" and t.width == 2:
            body = r"\d{2}"
        elif _is_numeric(t):
            body = (
                rf"\d{{{t.width}}}" if adjacent else rf"\d{{1,{max(t.width, _MAX_DIGITS.get(t.letter, 2))}}}"
            )
        elif t.letter == "M":
            body = "(?i:" + "|".join(m.lower() for m in _MONTHS + tuple(m[:3] for m in _MONTHS)) + ")"
        elif t.letter == "E":
            body = "(?i:" + "|".join(d.lower() for d in _DAYS + tuple(d[:3] for d in _DAYS)) + ")"
        elif t.letter == "a":
            body = "(?i:am|pm)"
        else:  # Z, ZZ, X..: 'Z' or an offset +hh, +hhmm, +hh:mm
            body = r"Z|[+-]\d{2}(?::?\d{2})?"
        parts.append(f"(?P<{name}>{body})")
        groups.append((name, t))
    parts.append("$")
    has_offset = any(t.letter in "ZX" for _, t in groups)
    return _Parser(pattern, "".join(parts), tuple(groups), has_offset)


def normalize_zone(zone: str) -> str:
    """The Arrow time-zone name for a Java time-zone id."""
    # Java's TimeZone.getTimeZone accepts GMT+8 / UTC+08:00; Arrow wants +08:00.
    m = re.fullmatch(r"(?:GMT|UTC)?([+-])(\d{1,2})(?::?(\d{2}))?", zone.strip())
    if m:
        return f"{m.group(1)}{int(m.group(2)):02d}:{m.group(3) or '00'}"
    return zone.strip()


def check_zone(zone: str, option: str) -> None:
    """Refuse a time zone that Arrow does not know."""
    normalized = normalize_zone(zone)
    try:
        if not re.fullmatch(r"[+-]\d{2}:\d{2}", normalized):
            zoneinfo.ZoneInfo(normalized)
        pc.local_timestamp(pa.array([0], pa.timestamp("ms", tz=normalized)))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, pa.ArrowInvalid) as e:
        # Java silently falls back to GMT for unknown ids; a typo should not move partitions.
        raise HoodieConfigError(
            f"{option}='{zone}' is not a known time zone ({e}). Help: use an IANA id such as UTC or "
            f"Europe/Paris, or an offset like +08:00."
        ) from e


def _np(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    return np.asarray(col.to_numpy(zero_copy_only=False))


def _digits(values: np.ndarray, width: int) -> pa.Array:
    return pc.utf8_lpad(pa.array(values).cast(pa.string()), width=width, padding="0")


def format_millis(millis: pa.Array, tokens: tuple[_Token, ...], zone: str) -> pa.Array:
    """Render epoch millis (no nulls) with a Joda pattern in ``zone`` (English names)."""
    zoned = millis.cast(pa.timestamp("ms", tz=zone))
    # Fields are read from the naive local time: one time-zone conversion instead of one per field.
    ts = pc.local_timestamp(zoned)
    parts: list[Any] = []
    for t in tokens:
        w = t.width
        if not t.letter:
            parts.append(t.text)
        elif t.letter in "yY":
            year = _np(pc.year(ts))
            parts.append(_digits(year % 100, 2) if w == 2 else _digits(year, w))
        elif t.letter == "M":
            month = _np(pc.month(ts))
            parts.append(_names(_MONTHS, month - 1, w) if w >= 3 else _digits(month, w))
        elif t.letter in "dDmsHhKk":
            parts.append(_digits(_clock_field(ts, t.letter), w))
        elif t.letter == "S":
            frac = pc.utf8_lpad(pc.millisecond(ts).cast(pa.string()), width=3, padding="0")
            parts.append(
                pc.utf8_slice_codeunits(frac, 0, w) if w <= 3 else pc.utf8_rpad(frac, width=w, padding="0")
            )
        elif t.letter == "a":
            parts.append(pc.if_else(pc.less(pc.hour(ts), 12), "AM", "PM"))
        elif t.letter == "E":
            parts.append(_names(_DAYS, _np(pc.day_of_week(ts)), w))
        else:  # Z, ZZ, X, XX, XXX: the zone offset
            parts.append(_offset_text(ts, millis, t))  # ts is local time: offset = local - utc
    if not any(isinstance(p, (pa.Array, pa.ChunkedArray)) for p in parts):
        return pa.repeat(pa.scalar("".join(parts), pa.string()), len(millis))
    return pc.binary_join_element_wise(*parts, "")


def _names(names: tuple[str, ...], index: np.ndarray, width: int) -> pa.Array:
    table = pa.array(list(names) if width >= 4 else [n[:3] for n in names])
    return table.take(pa.array(index))


def _clock_field(ts: pa.Array, letter: str) -> np.ndarray:
    if letter == "d":
        return _np(pc.day(ts))
    if letter == "D":
        return _np(pc.day_of_year(ts))
    if letter == "m":
        return _np(pc.minute(ts))
    if letter == "s":
        return _np(pc.second(ts))
    hour = _np(pc.hour(ts))
    return {"H": hour, "h": (hour + 11) % 12 + 1, "K": hour % 12, "k": np.where(hour == 0, 24, hour)}[letter]


def _offset_text(local_ts: pa.Array, millis: pa.Array, token: _Token) -> pa.Array:
    minutes = (_np(local_ts.cast(pa.int64())) - _np(millis)) // 60_000
    sign = pc.if_else(pa.array(minutes < 0), "-", "+")
    hh, mm = _digits(np.abs(minutes) // 60, 2), _digits(np.abs(minutes) % 60, 2)
    if token.letter == "Z":  # Joda prints +0000 (Z) / +00:00 (ZZ), also for UTC
        return pc.binary_join_element_wise(sign, hh, ":" if token.width == 2 else "", mm, "")
    # java.time X: 'Z' for zero, else +hh[mm] (X, minutes only when not zero), +hhmm (XX), +hh:mm (XXX)
    tail = pc.binary_join_element_wise(":" if token.width >= 3 else "", mm, "")
    if token.width == 1:
        tail = pc.if_else(pa.array(np.abs(minutes) % 60 == 0), "", mm)
    return pc.if_else(pa.array(minutes == 0), "Z", pc.binary_join_element_wise(sign, hh, tail, ""))


def _int_group(match: pa.StructArray, name: str, valid: pa.Array, default: int) -> np.ndarray:
    values = pc.if_else(valid, pc.struct_field(match, name), str(default))
    return _np(values.cast(pa.int64()))


# pattern letter -> parsed field ('h'/'K' are 12-hour clocks combined with the 'a' marker)
_PARSED_FIELD = {
    "M": "month",
    "d": "day",
    "H": "hour",
    "k": "hour",
    "K": "hour12",
    "h": "hour12",
    "m": "minute",
    "s": "second",
}


def parse_with(strings: pa.Array, parser: _Parser, zone: str) -> pa.Array:
    """Epoch millis of each string matching ``parser`` (null where it does not match)."""
    match = pc.extract_regex(strings, parser.regex)
    valid = pc.fill_null(match.is_valid(), False)
    fields: dict[str, np.ndarray] = {}
    pm = np.zeros(len(strings), dtype=bool)
    offset_minutes = np.zeros(len(strings), dtype=np.int64)
    for name, t in parser.groups:
        if t.letter in "yY":
            year = _int_group(match, name, valid, 1970)
            fields["year"] = _two_digit_year(year) if t.width == 2 else year
        elif t.letter == "M" and t.width >= 3:
            text = pc.utf8_lower(pc.if_else(valid, pc.struct_field(match, name), "jan"))
            lowered = pa.array([m.lower() for m in _MONTHS] + [m[:3].lower() for m in _MONTHS])
            fields["month"] = _np(pc.index_in(text, value_set=lowered)) % 12 + 1
        elif t.letter == "a":
            pm = _np(pc.equal(pc.utf8_lower(pc.if_else(valid, pc.struct_field(match, name), "am")), "pm"))
        elif t.letter == "S":
            frac = pc.utf8_rpad(
                pc.utf8_slice_codeunits(pc.struct_field(match, name), 0, 3), width=3, padding="0"
            )
            fields["millis"] = _np(pc.if_else(valid, frac, "0").cast(pa.int64()))
        elif t.letter in "ZX":
            offset_minutes = _offset_minutes(pc.if_else(valid, pc.struct_field(match, name), "Z"))
        elif t.letter != "E":  # day-of-week names are matched and ignored, as Joda does
            fields[_PARSED_FIELD[t.letter]] = _int_group(match, name, valid, 0)
    year, month = (
        fields.get("year", np.full(len(strings), 1970)),
        fields.get("month", np.ones(len(strings), int)),
    )
    day = fields.get("day", np.ones(len(strings), int))
    hour = fields["hour12"] % 12 + np.where(pm, 12, 0) if "hour12" in fields else fields.get("hour", 0) % 24
    ok = _np(valid) & (month >= 1) & (month <= 12) & (day >= 1)
    month_start = ((year - 1970) * 12 + np.clip(month, 1, 12) - 1).astype("datetime64[M]")
    days_in_month = ((month_start + 1).astype("datetime64[D]") - month_start.astype("datetime64[D]")).astype(
        int
    )
    ok &= day <= days_in_month
    ok &= (fields.get("minute", 0) < 60) & (fields.get("second", 0) < 60) & (fields.get("hour", 0) <= 24)
    days = month_start.astype("datetime64[D]").astype(np.int64) + day - 1
    seconds = ((hour * 60 + fields.get("minute", 0)) * 60) + fields.get("second", 0)
    local = days * 86_400_000 + seconds * 1000 + fields.get("millis", 0)
    utc = local - offset_minutes * 60000 if parser.has_offset else local_to_utc(local, ok, zone)
    return pa.array(utc, pa.int64(), mask=~ok)


def _two_digit_year(yy: np.ndarray) -> np.ndarray:
    # Joda 'yy': the century is chosen so the year falls within [pivot-50, pivot+49], pivot = now - 30.
    low = datetime.date.today().year - 30 - 50
    year = low - low % 100 + yy
    return np.where(year < low, year + 100, year)


def _offset_minutes(text: pa.Array) -> np.ndarray:
    parts = pc.extract_regex(
        pc.if_else(pc.equal(text, "Z"), "+00:00", text), r"^(?P<s>[+-])(?P<h>\d{2}):?(?P<m>\d{2})?$"
    )
    hours = _np(pc.struct_field(parts, "h").cast(pa.int64()))
    minutes = _np(
        pc.if_else(pc.equal(pc.struct_field(parts, "m"), ""), "0", pc.struct_field(parts, "m")).cast(
            pa.int64()
        )
    )
    sign = np.where(_np(pc.equal(pc.struct_field(parts, "s"), "-")), -1, 1)
    result: np.ndarray = sign * (hours * 60 + minutes)
    return result


def local_to_utc(local: np.ndarray, ok: np.ndarray, zone: str) -> np.ndarray:
    """Epoch millis of local wall-clock millis in ``zone`` (rows where ``ok`` is False are ignored)."""
    arrow_zone = normalize_zone(zone)
    if arrow_zone in ("UTC", "GMT", "+00:00", "Etc/UTC"):
        return local
    naive = pa.array(np.where(ok, local, 0), pa.int64()).cast(pa.timestamp("ms"))
    try:
        zoned = pc.assume_timezone(naive, arrow_zone, ambiguous="earliest", nonexistent="raise")
    except pa.ArrowInvalid as e:
        raise HoodieKeyError(
            f"A partition value names a local time that does not exist in time zone {zone} (DST gap): {e}. "
            f"Help: include the offset in the value (pattern letter Z) or use "
            f"hoodie.keygen.timebased.timezone=UTC."
        ) from e
    return _np(zoned.cast(pa.int64()))


def unit_to_millis(values: np.ndarray, unit: str) -> np.ndarray:
    """``values`` in ``unit`` (a ``TIME_UNIT_MS`` key) converted to millis."""
    mult, div = TIME_UNIT_MS[unit]
    if div == 1:
        return values * mult
    result: np.ndarray = np.sign(values) * (
        np.abs(values) // div
    )  # Java TimeUnit.convert truncates toward zero
    return result
