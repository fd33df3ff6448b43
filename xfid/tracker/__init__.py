"""Discrepancy issues and their lifecycle: `Tracker(store)` over the store's SQLite database."""

from __future__ import annotations

from xfid.tracker.lifecycle import (
    ACTIONS,
    ACTIVE,
    AUTO,
    EVENTS,
    FILING_KINDS,
    STATES,
    TransitionRefused,
    allowed_actions,
    apply,
)
from xfid.tracker.recording import CheckSummary
from xfid.tracker.tracker import Tracker

__all__ = ["ACTIONS", "ACTIVE", "AUTO", "EVENTS", "FILING_KINDS", "STATES", "CheckSummary", "Tracker",
           "TransitionRefused", "allowed_actions", "apply"]
