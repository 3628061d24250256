"""Units for people: durations as short text (every other unit is SI inside, named at the edges)."""

from __future__ import annotations


def duration(seconds: float) -> str:
    """Seconds as a short human duration: '42.0 s', '8.1 min', '3.2 h', '4.5 days'."""
    if seconds != seconds:  # NaN
        return "n/a"
    if seconds < 120:
        return f"{seconds:,.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:,.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:,.1f} h"
    return f"{seconds / 86400:,.1f} days"
