"""Report periods: ISO weeks (`2026-W48`) or explicit date ranges, and the period before."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from xfid.errors import ReportError

_WEEK = re.compile(r"^(\d{4})-?W(\d{1,2})$", re.IGNORECASE | re.ASCII)
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$", re.ASCII)
FIRST_DAY, LAST_DAY = date(1970, 1, 1), date(2199, 12, 31)
"""Reports cover days in this range (the period before it and the day after stay in what
pandas timestamps can hold: 1677..2262)."""


@dataclass(frozen=True)
class Period:
    """An inclusive range of calendar days (UTC) and the equally long range just before it."""

    start: date
    end: date
    label: str

    @property
    def days(self) -> int:
        """Number of days in the period."""
        return (self.end - self.start).days + 1

    @property
    def since(self) -> datetime:
        """The first instant of the period (UTC)."""
        return datetime.combine(self.start, time.min, tzinfo=UTC)

    @property
    def until(self) -> datetime:
        """The first instant after the period (UTC, exclusive)."""
        return datetime.combine(self.end + timedelta(days=1), time.min, tzinfo=UTC)

    def previous(self) -> Period:
        """The period of the same length that ends the day before this one starts."""
        end = self.start - timedelta(days=1)
        start = end - timedelta(days=self.days - 1)
        if _WEEK.match(self.label):
            y, w, _ = start.isocalendar()
            return Period(start, end, f"{y}-W{w:02d}")
        return Period(start, end, f"{start.isoformat()}..{end.isoformat()}")

    def span(self) -> str:
        """Human text: `2026-W48 (2026-11-23 – 2026-11-29)`."""
        rng = f"{self.start.isoformat()} – {self.end.isoformat()}"
        return f"{self.label} ({rng})" if _WEEK.match(self.label) else rng


def iso_week(text: str) -> Period:
    """Parse an ISO week like `2026-W48` into Monday..Sunday.

    Raises:
        ReportError: not of the form YYYY-Www, or a week the year does not have.
    """
    m = _WEEK.match(text.strip())
    if not m:
        raise ReportError("{week} {text!r} is not an ISO week; use the form 2026-W48", params=("week",), text=text)
    year, week = int(m.group(1)), int(m.group(2))
    if not FIRST_DAY.year <= year <= LAST_DAY.year - 1:
        raise ReportError("{week} {text!r}: the year must be {first}..{last}", params=("week",), text=text,
                          first=FIRST_DAY.year, last=LAST_DAY.year - 1)
    try:
        start = date.fromisocalendar(year, week, 1)
    except ValueError:
        last = date(year, 12, 28).isocalendar()[1]
        raise ReportError("{week} {text!r}: ISO year {year} has weeks 1..{last}", params=("week",), text=text,
                          year=year, last=last) from None
    return Period(start, start + timedelta(days=6), f"{year}-W{week:02d}")


def _day(text: str, param: str) -> date:
    try:
        if not _DAY.match(text.strip()):
            raise ValueError
        day = date.fromisoformat(text.strip())
    except ValueError:
        raise ReportError(f"{{{param}}} {{text!r}} is not a date; use YYYY-MM-DD, e.g. 2026-11-23", params=(param,),
                          text=text) from None
    if not FIRST_DAY <= day <= LAST_DAY:
        raise ReportError(f"{{{param}}} {{text!r}} is out of range; give a day from {FIRST_DAY} to {LAST_DAY}",
                          params=(param,), text=text)
    return day


def resolve_period(week: str | None, since: str | None, until: str | None, today: date | None = None) -> Period:
    """The period a report covers, from the CLI options.

    `--week` alone, or `--since`/`--until` (inclusive days; either may be omitted: `--since`
    defaults to 6 days before `--until`, `--until` to today). With nothing given, the last
    complete ISO week before `today`.

    Raises:
        ReportError: both forms given, bad dates, or an empty range.
    """
    today = today or datetime.now(UTC).date()
    if week and (since or until):
        raise ReportError("give either {week} or {since}/{until}, not both", params=("week", "since", "until"))
    if week:
        return iso_week(week)
    if since or until:
        end = _day(until, "until") if until else today
        start = _day(since, "since") if since else end - timedelta(days=6)
        if start > end:
            raise ReportError(f"{{since}} {start} is after {{until}} {end}; swap them", params=("since", "until"))
        return Period(start, end, f"{start.isoformat()}..{end.isoformat()}")
    y, w, _ = (today - timedelta(days=7)).isocalendar()
    return iso_week(f"{y}-W{w:02d}")
