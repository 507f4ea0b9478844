"""GNU ``date`` computed over the fake's clock rather than the host's.

A script inside a fake sandbox must see the time a test froze or advanced, so the fake answers
``date`` itself instead of letting the interpreter read the host clock. This module is pure: it
takes the arguments, the instant and ``TZ`` and returns what GNU coreutils writes in the C
locale. The formatter is our own: the platform ``strftime`` knows none of GNU's extensions
(``%N``, ``%:z``, the ``-_0^#`` flags) and follows the host's locale.

Example::

    from datetime import datetime, timezone
    from fake_server.date_command import run_date

    now = datetime(2026, 12, 3, 17, 34, 17, tzinfo=timezone.utc)
    assert run_date([], now) == (0, "Thu Dec  3 17:34:17 UTC 2026\\n", "")
    assert run_date(["-d", "1 hour ago", "+%H:%M"], now, tz="America/New_York")[1] == "11:34\\n"

Deliberate gaps: ``-f``/``--file`` and ``-r``/``--reference`` are reported as invalid options;
``--debug`` is accepted and ignored; years outside 1..9999 are out of range. An unknown ``TZ`` is
read as a POSIX ``std offset`` string when it starts like one (``XYZ3``; ``Foo/Bar`` names its
zone ``Foo``, as glibc does; a daylight-saving rule after it is ignored) and as ``UTC``
otherwise, where glibc would print an empty ``%Z``. ``-d`` reads ``@EPOCH``, ISO, ``M/D/Y``,
``YYYYMMDD`` and ``Dec 3 2026``-style dates, times with seconds, fractions, ``am``/``pm`` and
offsets, zone words, weekdays and relative items (``N unit [ago]``, ``next``/``last``/``this``,
``today``, ``yesterday``, ``tomorrow``), so whatever this ``date`` prints it can read back.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

from fake_server.gnu_options import Failure, Options, quote, version_text

__all__ = ["run_date"]

_NS = 10**9
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")  # fmt: skip
_DEFAULT_FORMAT = "%a %b %e %H:%M:%S %Z %Y"
_RFC_EMAIL = "%a, %d %b %Y %H:%M:%S %z"
# In the order GNU lists them when an argument is invalid.
_ISO = {"hours": "%Y-%m-%dT%H%:z", "minutes": "%Y-%m-%dT%H:%M%:z", "date": "%Y-%m-%d",
        "seconds": "%Y-%m-%dT%H:%M:%S%:z", "ns": "%Y-%m-%dT%H:%M:%S,%N%:z"}  # fmt: skip
_RFC_3339 = {"date": "%Y-%m-%d", "seconds": "%Y-%m-%d %H:%M:%S%:z",
             "ns": "%Y-%m-%d %H:%M:%S.%N%:z"}  # fmt: skip
_HELP = """Usage: date [OPTION]... [+FORMAT]
  or:  date [-u|--utc|--universal] [MMDDhhmm[[CC]YY][.ss]]
Display date and time in the given FORMAT.
With -s, or with [MMDDhhmm[[CC]YY][.ss]], set the date and time.
"""
_VERSION = version_text("date", "David MacKenzie")
# Long options as (name, argument, key) in glibc's table order, which its ambiguity messages
# follow.
_OPTIONS = Options(
    long=(
        ("date", "req", "d"),
        ("debug", "no", "debug"),
        ("iso-8601", "opt", "I"),
        ("rfc-email", "no", "R"),
        ("rfc-822", "no", "R"),
        ("rfc-2822", "no", "R"),
        ("rfc-3339", "req", "rfc-3339"),
        ("set", "req", "s"),
        ("uct", "no", "u"),
        ("utc", "no", "u"),
        ("universal", "no", "u"),
        ("help", "no", "help"),
        ("version", "no", "version"),
    ),
    short={"d": "req", "I": "opt", "R": "no", "s": "req", "u": "no"},
)


def run_date(args: list[str], now: datetime, *, tz: str | None = None) -> tuple[int, str, str]:
    """GNU date over a given instant: returns (exit_code, stdout, stderr).

    ``now`` is an aware datetime (the fake clock's wall time), ``tz`` the ``TZ`` variable if set.
    Setting the clock is refused as GNU refuses it to a user without the right: the new date is
    still printed, with ``cannot set date: Operation not permitted`` and exit status 1.
    """
    try:
        return _run(args, now, tz)
    except Failure as failure:
        return 1, "", failure.text("date")


def _run(args: list[str], now: datetime, tz: str | None) -> tuple[int, str, str]:
    zone = _zone(tz)
    fmt: str | None = None
    datestr: str | None = None
    setstr: str | None = None
    operands: list[str] = []
    for key, value in _OPTIONS.parse(args, operands):
        new_format = None
        if key == "d":
            datestr = value
        elif key == "s":
            setstr = value
        elif key == "u":
            zone = timezone.utc
        elif key == "R":
            new_format = _RFC_EMAIL
        elif key == "I":
            new_format = _ISO[_argmatch("--iso-8601", "date" if value is None else value, _ISO)]
        elif key == "rfc-3339":
            new_format = _RFC_3339[_argmatch("--rfc-3339", value or "", _RFC_3339)]
        elif key in ("help", "version"):
            return 0, _HELP if key == "help" else _VERSION, ""
        # GNU dies at the second format option, before it reads any later option.
        if new_format is not None:
            if fmt is not None:
                raise Failure("multiple output formats specified")
            fmt = new_format
    if setstr is not None and datestr is not None:
        raise Failure("the options to print and set the time may not be used together", usage=True)
    if len(operands) > 1:
        raise Failure(f"extra operand {quote(operands[1])}", usage=True)
    if operands and operands[0].startswith("+"):
        if fmt is not None:
            raise Failure("multiple output formats specified")
        fmt = operands.pop()[1:]
    elif operands and (setstr is not None or datestr is not None):
        raise Failure(
            f"the argument {quote(operands[0])} lacks a leading '+';\n"
            "when using an option to specify date(s), any non-option\n"
            "argument must be a format string beginning with '+'",
            usage=True,
        )
    base = (now - _EPOCH) // timedelta(microseconds=1) * 1000
    text = setstr if setstr is not None else datestr
    when: int | None = base
    if operands:  # MMDDhhmm[[CC]YY][.ss]: a request to set the clock
        text = operands[0]
        when = _posix_time(text, base, zone)
    elif text is not None:
        try:
            when = _parse_date(text, base, zone)
        except ValueError:  # a number too long for int(): far out of time_t's range anyway
            when = None
    if when is None:
        raise Failure(f"invalid date {quote(text or '')}")
    sec, ns = divmod(when, _NS)
    try:
        local = (_EPOCH + timedelta(seconds=sec)).astimezone(zone)
    except OverflowError:
        raise Failure(f"time {quote(str(sec))} is out of range") from None
    out = _format(_DEFAULT_FORMAT if fmt is None else fmt, local, ns, sec) + "\n"
    if operands or setstr is not None:
        # GNU prints the date it failed to set; nothing inside a sandbox may set the clock.
        return 1, out, "date: cannot set date: Operation not permitted\n"
    return 0, out, ""


def _argmatch(option: str, value: str, table: dict[str, str]) -> str:
    """gnulib ``XARGMATCH``: an exact name or an unambiguous prefix of one."""
    found = [n for n in table if n == value] or [n for n in table if n.startswith(value)]
    if len(found) == 1:
        return found[0]
    problem = "ambiguous" if found else "invalid"
    valid = "\n".join(f"  - '{name}'" for name in table)
    message = f"{problem} argument {quote(value)} for '{option}'\nValid arguments are:\n{valid}"
    raise Failure(message, usage=True)


_POSIX_TZ = re.compile(r"([A-Za-z]{3,}|<[^>]*>)(?:([+-]?)(\d{1,2})(?::(\d\d))?(?::(\d\d))?)?")


def _zone(tz: str | None) -> tzinfo:
    """The zone ``TZ`` names; unset or empty is UTC, the sandbox image's zone."""
    key = (tz or "").removeprefix(":")
    if not key:
        return timezone.utc
    try:
        return ZoneInfo(key)
    except (KeyError, ValueError, OSError):  # no such zone, not a valid key, not a TZif file
        pass
    match = _POSIX_TZ.match(key)
    if match is None:
        return timezone.utc
    name, sign, hours, minutes, seconds = match.groups()
    # POSIX offsets count west of Greenwich: EST5 is five hours behind UTC.
    west = timedelta(hours=int(hours or 0), minutes=int(minutes or 0), seconds=int(seconds or 0))
    try:
        return timezone(west if sign == "-" else -west, name.strip("<>"))
    except ValueError:  # a day or more
        return timezone.utc


def _east(moment: datetime) -> int:
    """Seconds east of UTC."""
    return int((moment.utcoffset() or timedelta()).total_seconds())


def _fill(text: str, width: int, pad: str) -> str:
    """gnulib ``width_add``: left-pad to ``width``, with zeros for ``0``/``+``, else spaces."""
    if pad == "-" or len(text) >= width:
        return text
    return ("0" if pad in ("0", "+") else " ") * (width - len(text)) + text


def _number(
    value: int, digits: int, width: int, pad: str, sign: bool = False, body: str = ""
) -> str:
    """gnulib ``do_number_sign_and_padding``: a sign goes before zeros but after spaces."""
    body = body or str(abs(value))
    pad = pad or "0"
    width = digits if width < 0 else width
    sign_char = "-" if value < 0 else "+" if sign else ""
    out = ""
    if sign_char:
        shortage = width - 1 - len(body)
        if pad == "_" and shortage > 0:
            out, width = " " * shortage, width - shortage
        out, width = out + sign_char, width - 1
    return out + _fill(body, width, pad)


def _offset(seconds: int, colons: int, width: int, pad: str) -> str:
    """``%z``, ``%:z``, ``%::z``, and ``%:::z`` (the shortest of them that is exact)."""
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if colons == 3:
        colons = 2 if secs else 1 if minutes else 3
    body = (f"{hours * 100 + minutes}", f"{hours}:{minutes:02}", f"{hours}:{minutes:02}:{secs:02}",
            f"{hours}")[colons]  # fmt: skip
    return _number(-1 if seconds < 0 else 1, (5, 6, 9, 3)[colons], width, pad, True, body)


def _nanoseconds(ns: int, width: int, pad: str) -> str:
    """``%N``: a width is a precision; a flag trades trailing zeros for its padding."""
    if width < 0 and pad in ("", "-"):
        return f"{ns:09}"
    width = 9 if width <= 0 else width
    digits = f"{ns:09}"[: min(width, 9)].rstrip("0") or "0"
    if pad == "-":
        return digits
    return digits + ("0" if pad in ("", "0", "+") else " ") * (width - len(digits))


# The conversions gnulib accepts an E or O modifier on (a no-op in the C locale).
_E_OK = frozenset("cCxXyYzZpPsnt:qRrT")
_O_OK = frozenset("bBhCdeHIjklmMSuUVgGwWyzZNsnt:pPqRrT")
_MAX_WIDTH = 4096
_SUBFORMATS = {"c": "%a %b %e %H:%M:%S %Y", "D": "%m/%d/%y", "x": "%m/%d/%y", "T": "%H:%M:%S",
               "X": "%H:%M:%S", "R": "%H:%M", "r": "%I:%M:%S %p"}  # fmt: skip


def _format(fmt: str, dt: datetime, ns: int, epoch: int, upcase: bool = False) -> str:
    """gnulib ``nstrftime`` in the C locale, GNU's flags and ``%N``/``%:z`` included."""
    wday, yday = (dt.weekday() + 1) % 7, dt.timetuple().tm_yday - 1
    iso_year, iso_week, _ = dt.isocalendar()
    hour12 = dt.hour % 12 or 12
    offset = _east(dt)
    numbers = {"C": (dt.year // 100, 2), "d": (dt.day, 2), "e": (dt.day, 2),
               "g": (iso_year % 100, 2), "G": (iso_year, 4), "H": (dt.hour, 2),
               "I": (hour12, 2), "j": (yday + 1, 3), "k": (dt.hour, 2), "l": (hour12, 2),
               "m": (dt.month, 2), "M": (dt.minute, 2),
               "q": ((dt.month + 2) // 3, 1), "S": (dt.second, 2), "u": (wday or 7, 1),
               "U": ((yday - wday + 7) // 7, 2), "V": (iso_week, 2), "w": (wday, 1),
               "W": ((yday - (wday - 1) % 7 + 7) // 7, 2), "y": (dt.year % 100, 2),
               "Y": (dt.year, 4)}  # fmt: skip
    out: list[str] = []
    i, end = 0, len(fmt)
    while i < end:
        if fmt[i] != "%":
            out.append(fmt[i])
            i += 1
            continue
        start, i = i, i + 1
        pad, upper, swap, width, modifier = "", upcase, False, -1, ""
        while i < end and fmt[i] in "_-0+^#":
            upper, swap = upper or fmt[i] == "^", swap or fmt[i] == "#"
            pad = fmt[i] if fmt[i] in "_-0+" else pad
            i += 1
        digits_start = i
        while i < end and fmt[i] in "0123456789":
            i += 1
        # GNU saturates a width at INT_MAX and then runs out of memory; a cap spares the fake.
        spec = fmt[digits_start:i]
        width = (min(int(spec), _MAX_WIDTH) if len(spec) < 5 else _MAX_WIDTH) if spec else -1
        if i < end and fmt[i] in "EO":
            modifier, i = fmt[i], i + 1
        conv = fmt[i] if i < end else ""
        text, lower = "", False
        # A `%` after flags or a width (`%5%`) is no `%%`: the flags print, the `%` restarts.
        bad = conv == "" or (conv == "%" and i != start + 1)
        if bad or (modifier and conv not in (_E_OK if modifier == "E" else _O_OK)):
            bad = True
        elif conv in "aAbBh":
            name = _DAYS[wday] if conv in "aA" else _MONTHS[dt.month - 1]
            text, upper = (name if conv in "AB" else name[:3]), upper or swap
        elif conv in "pP":
            text, lower = ("AM" if dt.hour < 12 else "PM"), conv == "P" or swap
        elif conv == "Z":
            text, lower = dt.tzname() or "", swap
        elif conv in _SUBFORMATS:
            text = _format(_SUBFORMATS[conv], dt, ns, epoch, upper)
        elif conv in "nt%":
            text = {"n": "\n", "t": "\t", "%": "%"}[conv]
        elif conv == "F":
            year = _number(dt.year, 4, width - 6 if width >= 0 else -1, pad, dt.year > 9999)
            text, width = f"{year}-{dt.month:02}-{dt.day:02}", -1
        elif conv == "N":
            text, width = _nanoseconds(ns, width, pad), -1
        elif conv == "s":
            text, width = _number(epoch, 1, width, pad), -1
        elif conv in "z:":
            colons = len(fmt[i:]) - len(fmt[i:].lstrip(":"))
            if fmt[i + colons : i + colons + 1] != "z":
                bad = True  # `%:` not before a `z` prints as written
            else:
                i += colons
                bad = colons > 3
                text, width = _offset(offset, colons % 4, width, pad), -1
        elif conv in numbers:
            value, digits = numbers[conv]
            # GNU's `+` flag signs a year that overflows its digits or is padded wider.
            big = value > (99 if digits == 2 else 9999) or digits < width
            sign = conv in "CgGyY" and pad == "+" and big
            text = _number(value, digits, width, pad or ("_" if conv in "ekl" else "0"), sign)
            width = -1
        else:
            bad = True
        if bad:
            # GNU copies an unknown conversion as written, padded to its width.
            stop = i if conv in ("", "%") else i + 1
            text, lower, i = fmt[start:stop], False, stop - 1
        text = text.lower() if lower else text.upper() if upper else text
        out.append(_fill(text, width, pad))
        i += 1
    return "".join(out)


_UNITS = {"year": ("months", 12), "month": ("months", 1), "fortnight": ("days", 14),
          "week": ("days", 7), "day": ("days", 1), "hour": ("seconds", 3600),
          "minute": ("seconds", 60), "min": ("seconds", 60), "second": ("seconds", 1),
          "sec": ("seconds", 1)}  # fmt: skip
_SHIFTS = {"now": 0, "today": 0, "yesterday": -1, "tomorrow": 1}
_ORDINALS = {"last": -1, "this": 0, "next": 1}
# gnulib's zone abbreviations, in minutes east of UTC (daylight-saving hour included).
_ZONES = {"utc": 0, "gmt": 0, "ut": 0, "z": 0, "zulu": 0, "wet": 0, "west": 60, "bst": 60,
          "art": -180, "brt": -180, "brst": -120, "nst": -210, "ndt": -150, "ast": -240,
          "adt": -180, "clt": -240, "clst": -180, "est": -300, "edt": -240, "cst": -360,
          "cdt": -300, "mst": -420, "mdt": -360, "pst": -480, "pdt": -420, "akst": -540,
          "akdt": -480, "hst": -600, "hast": -600, "hadt": -540, "sst": -720, "wat": 60,
          "cet": 60, "cest": 120, "met": 60, "mez": 60, "mest": 120, "mesz": 120, "eet": 120,
          "eest": 180, "cat": 120, "sast": 120, "eat": 180, "msk": 180, "msd": 240, "ist": 330,
          "sgt": 480, "kst": 540, "jst": 540, "gst": 600, "nzst": 720, "nzdt": 780}  # fmt: skip
_EPOCH_DATE = re.compile(r"@\s*([+-]?)(\d+)(?:[.,](\d+))?")
_ISO_DATE = re.compile(r"(\d{4})-(\d\d?)-(\d\d?)(?:t(?=\d))?")
_SLASH_DATE = re.compile(r"(\d\d?)/(\d\d?)(?:/(\d+))?")
_TIME = re.compile(r"(\d\d?)(?::(\d\d)(?::(\d\d)(?:[.,](\d+))?)?|(?=\s*[ap]\.?m\b))"
                   r"(?:\s*([ap])\.?m\b\.?)?")  # fmt: skip
_SIGNED_OFFSET = re.compile(r"\s*([+-])\s*(\d+)(?::(\d\d))?")
_NUMBER = re.compile(r"([+-]?)\s*(\d+)")
_WORD = re.compile(r"\s*([a-z]+)\.?")
_AGO = re.compile(r"\s*ago\b")
_COMMA = re.compile(r"\s*,")
_DAY_OF_MONTH = re.compile(r"\s*(\d\d?)(?![\d:])")
_MONTH_OF = {key: number for number, name in enumerate(_MONTHS, start=1)
             for key in (name.lower(), name[:3].lower())} | {"sept": 9}  # fmt: skip
_WEEKDAY_OF = {key: number for number, name in enumerate(_DAYS)
               for key in (name.lower(), name[:3].lower())}  # fmt: skip
_WEEKDAY_OF |= {"tues": 2, "wednes": 3, "thur": 4, "thurs": 4}
_YEAR = re.compile(r"\s*,?\s*(\d{4})(?![\d:])")


def _unit(word: str) -> tuple[str, int] | None:
    return _UNITS.get(word) or (_UNITS.get(word[:-1]) if word.endswith("s") else None)


def _parse_date(text: str, base: int, zone: tzinfo) -> int | None:
    """A subset of gnulib ``parse_datetime``: nanoseconds since the epoch, or None if invalid."""
    s = text.lower().strip()
    if epoch := _EPOCH_DATE.fullmatch(s):
        magnitude = int(epoch[2]) * _NS + int((epoch[3] or "")[:9].ljust(9, "0"))
        return None if magnitude >= 2**63 * _NS else -magnitude if epoch[1] == "-" else magnitude
    sec, now_ns = divmod(base, _NS)
    now = (_EPOCH + timedelta(seconds=sec)).astimezone(zone)
    ymd: list[int | None] | None = None  # year, month, day; a missing year is this year
    hms: tuple[int, int, int, int] | None = None  # hours, minutes, seconds, nanoseconds
    offset: int | None = None  # seconds east of UTC named in the string
    day: tuple[int, int] | None = None  # (ordinal, weekday) as in "next monday"
    rel = {"months": 0, "days": 0, "seconds": 0}
    rels_seen = False
    pos = 0

    def take(pattern: re.Pattern[str]) -> re.Match[str] | None:
        nonlocal pos
        match = pattern.match(s, pos)
        pos = match.end() if match else pos
        return match

    def zone_offset(after_word: bool) -> int | None:
        # As in gnulib, a signed number right after a time is a UTC offset (even in "10:00 +5
        # minutes": 10:00 at UTC+5, plus a minute); after a zone word, only if no unit follows.
        match = _SIGNED_OFFSET.match(s, pos)
        if match is None or (
            after_word and (unit := _WORD.match(s, match.end())) and _unit(unit[1])
        ):
            return 0
        take(_SIGNED_OFFSET)
        hours, minutes = int(match[2]), int(match[3] or 0)
        if match[3] is None and len(match[2]) > 2:
            hours, minutes = divmod(hours, 100)
        sign = -1 if match[1] == "-" else 1
        return None if hours > 24 or minutes > 59 else sign * (hours * 3600 + minutes * 60)

    # The local zone's own abbreviations (EST and EDT in New York) come before gnulib's table.
    local = [now.replace(month=month, day=1) for month in (1, 7)] + [now]
    zones = _ZONES | {(t.tzname() or "").lower(): _east(t) // 60 for t in local}
    while (pos := len(s) - len(s[pos:].lstrip())) < len(s):
        if m := take(_ISO_DATE):
            if ymd is not None:
                return None
            ymd = [int(m[1]), int(m[2]), int(m[3])]
        elif m := take(_SLASH_DATE):
            year = None if m[3] is None else int(m[3])
            if year is not None and len(m[3]) == 2:
                year += 1900 if year >= 69 else 2000
            if ymd is not None:
                return None
            ymd = [year, int(m[1]), int(m[2])]
        elif m := take(_TIME):
            hour, minute, meridian = int(m[1]), int(m[2] or 0), m[5]
            if hms is not None or hour > (12 if meridian else 23) or hour < bool(meridian):
                return None
            if meridian:
                hour = hour % 12 + (12 if meridian == "p" else 0)
            hms = (hour, minute, int(m[3] or 0), int((m[4] or "")[:9].ljust(9, "0")))
            has_offset = _SIGNED_OFFSET.match(s, pos) is not None
            if has_offset and (offset is not None or (offset := zone_offset(False)) is None):
                return None
        elif m := take(_NUMBER):
            value = int(m[2]) * (-1 if m[1] == "-" else 1)
            after = _WORD.match(s, pos)
            unit = _unit(after[1]) if after else None
            month = _MONTH_OF.get(after[1]) if after else None
            if unit and after:
                pos = after.end()
                rel[unit[0]] += value * unit[1] * (-1 if take(_AGO) else 1)
                rels_seen = True
            elif month and after and not m[1] and ymd is None:
                pos = after.end()
                year_match = take(_YEAR)
                ymd = [int(year_match[1]) if year_match else None, month, value]
            elif not m[1] and len(m[2]) == 8 and ymd is None:
                ymd = [int(m[2][:4]), int(m[2][4:6]), int(m[2][6:])]
            elif not m[1] and ymd is not None and ymd[0] is None:
                ymd[0] = value  # "Thu Dec  3 17:34:17 UTC 2026": the year comes last
            else:
                return None
        elif m := take(_WORD):
            word = m[1]
            if (unit := _unit(word)) is not None:
                rel[unit[0]] += unit[1] * (-1 if take(_AGO) else 1)
                rels_seen = True
            elif word in _SHIFTS:
                rel["days"] += _SHIFTS[word]
                rels_seen = True
            elif word in _ORDINALS and (follow := take(_WORD)) is not None:
                if (unit := _unit(follow[1])) is not None:
                    rel[unit[0]] += unit[1] * _ORDINALS[word]
                    rels_seen = True
                elif (weekday := _WEEKDAY_OF.get(follow[1])) is not None and day is None:
                    day = (_ORDINALS[word], weekday)
                else:
                    return None
            elif (month := _MONTH_OF.get(word)) is not None and ymd is None:
                number = take(_DAY_OF_MONTH)
                year_match = take(_YEAR) if number else None
                ymd = [int(year_match[1]) if year_match else None, month,
                       int(number[1]) if number else 1]  # fmt: skip
            elif (weekday := _WEEKDAY_OF.get(word)) is not None and day is None:
                day = (0, weekday)
                take(_COMMA)
            elif word not in zones or offset is not None or (shift := zone_offset(True)) is None:
                return None
            else:
                offset = zones[word] * 60 + shift
        else:
            return None
    try:
        year, month, mday = ymd if ymd is not None else (now.year, now.month, now.day)
        start = date(now.year if year is None else year, month or 1, mday or 1)
        if day is not None and ymd is None:
            ordinal, weekday = day
            today = (start.weekday() + 1) % 7
            ordinal -= ordinal > 0 and today != weekday  # "next thu" on a Monday is this week's
            start += timedelta(days=ordinal * 7 + (weekday - today) % 7)
        if ymd is None and day is None and hms is None:
            # Only relative items keep the time of day, and glibc's mktime keeps now's DST flag:
            # "35 days ago" from a New York December is 35 * 24 hours, across the DST change.
            hms = (now.hour, now.minute, now.second, now_ns) if rels_seen else (0, 0, 0, 0)
            offset = _east(now) if offset is None else offset
        hms = hms or (0, 0, 0, 0)  # a date or a weekday alone means midnight
        place = zone if offset is None else timezone(timedelta(seconds=offset))
        wall = datetime(start.year, start.month, start.day, *hms[:3], tzinfo=place)
        if wall.astimezone(timezone.utc).astimezone(place).replace(tzinfo=None) != wall.replace(
            tzinfo=None
        ):
            return None  # a wall time that a DST change skips, such as 02:30 on a spring night
        # Months overflow into days as mktime normalises them: Jan 31 + 1 month is Mar 3.
        years, month0 = divmod(start.year * 12 + start.month - 1 + rel["months"], 12)
        target = date(years, month0 + 1, 1) + timedelta(days=start.day - 1 + rel["days"])
        wall = datetime(target.year, target.month, target.day, *hms[:3], tzinfo=place)
    except (ValueError, OverflowError):
        return None
    return ((wall - _EPOCH) // timedelta(seconds=1) + rel["seconds"]) * _NS + hms[3]


def _posix_time(text: str, base: int, zone: tzinfo) -> int | None:
    """A ``MMDDhhmm[[CC]YY][.ss]`` operand as nanoseconds since the epoch, or None."""
    match = re.fullmatch(r"(\d\d)(\d\d)(\d\d)(\d\d)(\d{4}|\d{2})?(?:\.(\d\d))?", text)
    if match is None:
        return None
    month, mday, hour, minute = (int(part) for part in match.groups()[:4])
    year = (_EPOCH + timedelta(seconds=base // _NS)).astimezone(zone).year
    if match[5] is not None:
        year = int(match[5]) + (
            (1900 if int(match[5]) >= 69 else 2000) if len(match[5]) == 2 else 0
        )
    try:
        wall = datetime(year, month, mday, hour, minute, int(match[6] or 0), tzinfo=zone)
    except ValueError:
        return None
    return (wall - _EPOCH) // timedelta(seconds=1) * _NS
