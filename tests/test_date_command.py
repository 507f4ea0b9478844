"""The fake's GNU ``date``: exact outputs, each checked against GNU coreutils 9.1's ``date`` in the
C locale (``TZ=UTC LC_ALL=C date -d @1796319257.123456 ...``, the instant below)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from fake_server.date_command import run_date

#: Thu Dec 3 17:34:17.123456 UTC 2026, epoch 1796319257: datetime holds microseconds, so %N
#: prints 123456000.
NOW = datetime(2026, 12, 3, 17, 34, 17, 123456, tzinfo=timezone.utc)
TRY = "Try 'date --help' for more information.\n"
FULL = "+%F %T.%N %Z"


def out(*args: str, tz: str | None = None, now: datetime = NOW) -> str:
    """Stdout of a successful run (and asserts it was one)."""
    code, stdout, stderr = run_date(list(args), now, tz=tz)
    assert (code, stderr) == (0, ""), (code, stderr)
    return stdout


def test_no_arguments_print_gnus_default_format_in_utc() -> None:
    assert run_date([], NOW) == (0, "Thu Dec  3 17:34:17 UTC 2026\n", "")


def test_the_default_format_pads_the_day_with_a_space_and_names_the_zone() -> None:
    assert out(tz="America/New_York") == "Thu Dec  3 12:34:17 EST 2026\n"
    assert out(now=NOW + timedelta(days=10)) == "Sun Dec 13 17:34:17 UTC 2026\n"


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("%a|%A|%b|%B|%h", "Thu|Thursday|Dec|December|Dec"),
        ("%c", "Thu Dec  3 17:34:17 2026"),
        ("%C|%d|%D|%e|%F", "20|03|12/03/26| 3|2026-12-03"),
        ("%g|%G|%H|%I|%j|%k|%l", "26|2026|17|05|337|17| 5"),
        ("%m|%M|%p|%P|%q|%r|%R", "12|34|PM|pm|4|05:34:17 PM|17:34"),
        ("%s|%S|%T|%u|%U|%V|%w|%W", "1796319257|17|17:34:17|4|48|49|4|48"),
        ("%x|%X|%y|%Y|%z|%Z|%%", "12/03/26|17:34:17|26|2026|+0000|UTC|%"),
        ("a%nb%tc", "a\nb\tc"),
    ],
)
def test_conversions(fmt: str, expected: str) -> None:
    assert out("+" + fmt) == expected + "\n"


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("%-d|%_d|%0e|%-e|%-H|%_m", "3| 3|03|3|17|12"),
        ("%-j|%5j|%_5d|%-k|%-l", "337|00337|    3|17|5"),
        ("%^a|%^B|%#a|%#Z|%#p|%^P", "THU|DECEMBER|THU|utc|pm|pm"),
        ("%10A|%-10A|%010A", "  Thursday|Thursday|00Thursday"),
        ("%+6Y|%10s|%_10s", "+02026|1796319257|1796319257"),
    ],
)
def test_padding_and_case_flags(fmt: str, expected: str) -> None:
    assert out("+" + fmt) == expected + "\n"


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("%N", "123456000"),
        ("%3N", "123"),
        ("%6N", "123456"),
        ("%9N", "123456000"),
        ("%1N", "1"),
        ("%12N", "123456000000"),
        ("%-N", "123456000"),
        ("%-3N", "123"),
        ("%_N", "123456   "),
    ],
)
def test_nanoseconds_and_their_widths(fmt: str, expected: str) -> None:
    assert out("+" + fmt) == expected + "\n"


def test_nanoseconds_drop_trailing_zeros_only_under_a_flag() -> None:
    half = datetime(2026, 12, 3, 17, 34, 17, 120000, tzinfo=timezone.utc)
    assert out("+%N|%-3N|%_3N|%-N", now=half) == "120000000|12|12 |120000000\n"


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("%Q", "%Q"),
        ("%5Q", "  %5Q"),
        ("%", "%"),
        ("%-", "%-"),
        ("%:x", "%:x"),
        ("%5%", "   %5%"),
        ("%E%", "%E%"),
        ("%EH|%Oc|%Ey", "%EH|%Oc|26"),
    ],
)
def test_unknown_conversions_print_as_written(fmt: str, expected: str) -> None:
    assert out("+" + fmt) == expected + "\n"


def test_an_empty_format_still_ends_the_line() -> None:
    assert out("+") == "\n"


def test_epoch_seconds() -> None:
    assert out("+%s") == "1796319257\n"
    assert out("+%s", tz="America/New_York") == "1796319257\n"
    assert out("-d", "@-1.5", "+%s %N") == "-2 500000000\n"


@pytest.mark.parametrize("flag", ["-u", "--utc", "--universal", "--uct", "--un"])
def test_utc_flags_override_tz(flag: str) -> None:
    assert out(flag, tz="America/New_York") == "Thu Dec  3 17:34:17 UTC 2026\n"


@pytest.mark.parametrize("flag", ["-R", "--rfc-email", "--rfc-822", "--rfc-2822", "--rfc-e"])
def test_rfc_email(flag: str) -> None:
    assert out(flag) == "Thu, 03 Dec 2026 17:34:17 +0000\n"
    assert out(flag, tz="America/New_York") == "Thu, 03 Dec 2026 12:34:17 -0500\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-I"], "2026-12-03"),
        (["--iso-8601"], "2026-12-03"),
        (["-Idate"], "2026-12-03"),
        (["-Ihours"], "2026-12-03T17+00:00"),
        (["-Iminutes"], "2026-12-03T17:34+00:00"),
        (["-Iseconds"], "2026-12-03T17:34:17+00:00"),
        (["-Is"], "2026-12-03T17:34:17+00:00"),
        (["--iso-8601=seconds"], "2026-12-03T17:34:17+00:00"),
        (["--iso-8601=ns"], "2026-12-03T17:34:17,123456000+00:00"),
        (["--iso=m"], "2026-12-03T17:34+00:00"),
    ],
)
def test_iso_8601(args: list[str], expected: str) -> None:
    assert out(*args) == expected + "\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--rfc-3339=date"], "2026-12-03"),
        (["--rfc-3339=seconds"], "2026-12-03 17:34:17+00:00"),
        (["--rfc-3339=ns"], "2026-12-03 17:34:17.123456000+00:00"),
        (["--rfc-3339", "s"], "2026-12-03 17:34:17+00:00"),
    ],
)
def test_rfc_3339(args: list[str], expected: str) -> None:
    assert out(*args) == expected + "\n"


def test_iso_and_rfc_3339_follow_the_zone() -> None:
    assert out("-Ins", tz="Asia/Kolkata") == "2026-12-03T23:04:17,123456000+05:30\n"
    assert out("--rfc-3339=ns", tz="Asia/Kolkata") == "2026-12-03 23:04:17.123456000+05:30\n"


def test_an_invalid_format_argument_lists_the_valid_ones() -> None:
    names = ["hours", "minutes", "date", "seconds", "ns"]
    valid = "Valid arguments are:\n" + "".join(f"  - '{name}'\n" for name in names)
    assert run_date(["-Ifoo"], NOW) == (
        1,
        "",
        "date: invalid argument 'foo' for '--iso-8601'\n" + valid + TRY,
    )
    assert run_date(["--iso-8601="], NOW)[2].startswith("date: ambiguous argument '' for")
    assert run_date(["--rfc-3339"], NOW) == (
        1,
        "",
        "date: option '--rfc-3339' requires an argument\n" + TRY,
    )


@pytest.mark.parametrize(
    ("string", "expected"),
    [
        ("@1796319257", "2026-12-03 17:34:17.000000000 UTC"),
        ("@1796319257.5", "2026-12-03 17:34:17.500000000 UTC"),
        ("@-1.5", "1969-12-31 23:59:58.500000000 UTC"),
        ("@0", "1970-01-01 00:00:00.000000000 UTC"),
        ("2026-01-02", "2026-01-02 00:00:00.000000000 UTC"),
        ("2026-01-02 03:04:05", "2026-01-02 03:04:05.000000000 UTC"),
        ("2026-01-02T03:04:05Z", "2026-01-02 03:04:05.000000000 UTC"),
        ("2026-01-02T03:04:05+05:30", "2026-01-01 21:34:05.000000000 UTC"),
        ("2026-01-02T03:04:05.25-0800", "2026-01-02 11:04:05.250000000 UTC"),
        ("20260102", "2026-01-02 00:00:00.000000000 UTC"),
        ("12/25/2026", "2026-12-25 00:00:00.000000000 UTC"),
        ("Dec 25 2026", "2026-12-25 00:00:00.000000000 UTC"),
        ("25 Dec 2026", "2026-12-25 00:00:00.000000000 UTC"),
        ("2026-01-02 3pm", "2026-01-02 15:00:00.000000000 UTC"),
        ("2026-01-02 12am", "2026-01-02 00:00:00.000000000 UTC"),
    ],
)
def test_absolute_dates(string: str, expected: str) -> None:
    assert out("-d", string, FULL) == expected + "\n"


@pytest.mark.parametrize(
    ("string", "expected"),
    [
        ("now", "2026-12-03 17:34:17.123456000"),
        ("today", "2026-12-03 17:34:17.123456000"),
        ("", "2026-12-03 00:00:00.000000000"),
        ("yesterday", "2026-12-02 17:34:17.123456000"),
        ("tomorrow", "2026-12-04 17:34:17.123456000"),
        ("1 hour ago", "2026-12-03 16:34:17.123456000"),
        ("+5 minutes", "2026-12-03 17:39:17.123456000"),
        ("-2 days", "2026-12-01 17:34:17.123456000"),
        ("3 days", "2026-12-06 17:34:17.123456000"),
        ("next week", "2026-12-10 17:34:17.123456000"),
        ("last month", "2026-11-03 17:34:17.123456000"),
        ("10 secs ago", "2026-12-03 17:34:07.123456000"),
        ("1 hour 30 minutes ago", "2026-12-03 18:04:17.123456000"),
        ("2 fortnights", "2026-12-31 17:34:17.123456000"),
        ("yesterday 10:00", "2026-12-02 10:00:00.000000000"),
        ("monday", "2026-12-07 00:00:00.000000000"),
        ("next monday", "2026-12-07 00:00:00.000000000"),
        ("last monday", "2026-11-30 00:00:00.000000000"),
        ("thursday", "2026-12-03 00:00:00.000000000"),
        ("next thursday", "2026-12-10 00:00:00.000000000"),
        ("last thursday", "2026-11-26 00:00:00.000000000"),
    ],
)
def test_relative_dates(string: str, expected: str) -> None:
    assert out("-d", string, "+%F %T.%N") == expected + "\n"


@pytest.mark.parametrize(
    ("string", "expected"),
    [
        ("2026-01-31 +1 month", "2026-03-03"),
        ("2024-02-29 +1 year", "2025-03-01"),
        ("2026-03-31 1 month ago", "2026-03-03"),
    ],
)
def test_months_overflow_like_mktime(string: str, expected: str) -> None:
    assert out("-d", string, "+%F") == expected + "\n"


def test_a_signed_number_after_a_time_is_an_offset_as_in_gnu() -> None:
    # GNU reads "+5" as UTC+5 and "minutes" as one more minute; after a zone word it is relative.
    assert out("-d", "2026-01-02 10:00 +5 minutes", "+%T") == "05:01:00\n"
    assert out("-d", "2026-01-02 10:00 UTC+2 hours", "+%T") == "12:00:00\n"


def test_what_date_prints_it_reads_back() -> None:
    assert out("-d", "Thu, 03 Dec 2026 17:34:17 +0000", "+%s") == "1796319257\n"
    assert out("-d", "Thu Dec  3 12:34:17 EST 2026", "+%s") == "1796319257\n"
    printed = out(tz="Asia/Kolkata").strip()
    assert out("-d", printed, "+%s", tz="Asia/Kolkata") == "1796319257\n"


def test_iana_zone_names_and_offsets() -> None:
    fmt = "+%c %Z %z %:z %::z %:::z"
    assert out(fmt, tz="America/New_York") == (
        "Thu Dec  3 12:34:17 2026 EST -0500 -05:00 -05:00:00 -05\n"
    )
    assert out(fmt, tz="Asia/Kolkata") == (
        "Thu Dec  3 23:04:17 2026 IST +0530 +05:30 +05:30:00 +05:30\n"
    )
    summer = datetime(2026, 7, 2, 13, 46, 40, tzinfo=timezone.utc)
    assert out("+%F %T %Z %z", tz="America/New_York", now=summer) == (
        "2026-07-02 09:46:40 EDT -0400\n"
    )


@pytest.mark.parametrize(
    ("tz", "expected"),
    [
        ("UTC", "17:34 UTC +0000"),
        ("UTC0", "17:34 UTC +0000"),
        ("GMT", "17:34 GMT +0000"),
        ("", "17:34 UTC +0000"),
        (":America/New_York", "12:34 EST -0500"),
        ("Foo/Bar", "17:34 Foo +0000"),
        ("XYZ3", "14:34 XYZ -0300"),
        ("<+03>-3", "20:34 +03 +0300"),
        ("12", "17:34 UTC +0000"),  # GNU prints an empty %Z here; the fake says UTC
    ],
)
def test_tz_values(tz: str, expected: str) -> None:
    assert out("+%H:%M %Z %z", tz=tz) == expected + "\n"


def test_dates_are_read_in_the_zone() -> None:
    assert out("-d", "2026-07-02 10:00", FULL, tz="America/New_York") == (
        "2026-07-02 10:00:00.000000000 EDT\n"
    )
    assert out("-u", "-d", "2026-07-02 10:00", "+%s", tz="America/New_York") == "1782986400\n"


def test_relative_days_across_dst_follow_glibc() -> None:
    # Only relative items: now's UTC offset is kept, so it is exactly 35 * 24 hours back.
    assert out("-d", "35 days ago", "+%F %T %z", tz="America/New_York") == (
        "2026-10-29 13:34:17 -0400\n"
    )
    # With a date given, the wall-clock time is kept instead.
    assert out("-d", "2026-12-03 12:34:17 35 days ago", "+%F %T %z", tz="America/New_York") == (
        "2026-10-29 12:34:17 -0400\n"
    )


@pytest.mark.parametrize(
    "string",
    ["foo", "2026-02-30", "2026-13-01", "2026-01-02 25:00", "1 day ago ago", "tomorrow foo", "0am"],
)
def test_invalid_dates(string: str) -> None:
    assert run_date(["-d", string], NOW) == (1, "", f"date: invalid date '{string}'\n")


def test_a_skipped_wall_time_is_invalid() -> None:
    assert run_date(["-d", "2026-03-08 02:30"], NOW, tz="America/New_York") == (
        1,
        "",
        "date: invalid date '2026-03-08 02:30'\n",
    )


def test_invalid_dates_are_quoted_like_gnu() -> None:
    assert run_date(["-d", "it's"], NOW)[2] == "date: invalid date 'it\\'s'\n"
    assert run_date(["--date=é\n"], NOW)[2] == "date: invalid date '\\303\\251\\n'\n"


@pytest.mark.parametrize(
    ("args", "stderr"),
    [
        (["-x"], "date: invalid option -- 'x'\n" + TRY),
        (["-ux"], "date: invalid option -- 'x'\n" + TRY),
        (["-r", "file"], "date: invalid option -- 'r'\n" + TRY),
        (["--foo"], "date: unrecognized option '--foo'\n" + TRY),
        (["--foo=bar"], "date: unrecognized option '--foo=bar'\n" + TRY),
        (["--rfc"], "date: option '--rfc' is ambiguous; possibilities: '--rfc-email' '--rfc-3339'"),
        (["--d=x"], "date: option '--d=x' is ambiguous; possibilities: '--date' '--debug'\n"),
        (["--utc=1"], "date: option '--utc' doesn't allow an argument\n" + TRY),
        (["-d"], "date: option requires an argument -- 'd'\n" + TRY),
        (["--date"], "date: option '--date' requires an argument\n" + TRY),
        (["+%s", "+%s"], "date: extra operand '+%s'\n" + TRY),
        (["-R", "-I"], "date: multiple output formats specified\n"),
        (["-R", "+%s"], "date: multiple output formats specified\n"),
        (["-d", "@0", "-s", "@5"], "date: the options to print and set the time may not be used"),
        (["-d", "@0", "foo"], "date: the argument 'foo' lacks a leading '+';\nwhen using an"),
    ],
)
def test_usage_errors(args: list[str], stderr: str) -> None:
    code, stdout, err = run_date(args, NOW)
    assert (code, stdout) == (1, "")
    assert err.startswith(stderr)
    assert err.endswith(TRY) == (not stderr.startswith("date: multiple"))


def test_options_may_follow_the_format_and_end_at_double_dash() -> None:
    assert out("+%s", "-d", "@5", "-u") == "5\n"
    assert out("-d@5", "--", "+%s") == "5\n"
    assert run_date(["-d", "@5", "--", "-u"], NOW)[2].startswith("date: the argument '-u' lacks")


@pytest.mark.parametrize(
    ("args", "stdout"),
    [
        (["-s", "2027-01-01 00:00"], "Fri Jan  1 00:00:00 UTC 2027\n"),
        (["--set=@0", "+%s"], "0\n"),
        (["01010000"], "Thu Jan  1 00:00:00 UTC 2026\n"),
        (["-u", "120317342027.59"], "Fri Dec  3 17:34:59 UTC 2027\n"),
        (["0101000030"], "Tue Jan  1 00:00:00 UTC 2030\n"),
    ],
)
def test_setting_the_date_is_refused_but_the_date_is_printed(args: list[str], stdout: str) -> None:
    assert run_date(args, NOW) == (1, stdout, "date: cannot set date: Operation not permitted\n")


@pytest.mark.parametrize("args", [["13010000"], ["0101"], ["-s", "garbage"]])
def test_an_invalid_date_to_set_is_reported_first(args: list[str]) -> None:
    assert run_date(args, NOW) == (1, "", f"date: invalid date '{args[-1]}'\n")


def test_help_and_version() -> None:
    code, stdout, _ = run_date(["--help"], NOW)
    assert (code, stdout.splitlines()[0]) == (0, "Usage: date [OPTION]... [+FORMAT]")
    code, stdout, _ = run_date(["--vers"], NOW)
    assert (code, stdout.splitlines()[0]) == (0, "date (GNU coreutils) 9.4")


def test_an_instant_past_9999_is_out_of_range() -> None:
    assert run_date(["-d", "@253402300800"], NOW) == (
        1,
        "",
        "date: time '253402300800' is out of range\n",
    )


def test_huge_numbers_are_invalid_dates_not_crashes() -> None:
    digits = "1" * 5000
    assert run_date(["-d", "@" + digits], NOW)[:2] == (1, "")
    assert run_date(["-d", digits], NOW)[2].startswith("date: invalid date '1111")
    assert len(out(f"+%{digits}d")) == 4097  # widths are capped instead of exhausting memory
