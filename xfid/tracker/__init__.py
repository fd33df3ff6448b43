"""Discrepancy issues and their lifecycle: `Tracker(store)` over the store's SQLite database."""

from __future__ import annotations

from xfid.tracker.lifecycle import ACTIONS, ACTIVE, AUTO, FILING_KINDS, STATES, allowed_actions
from xfid.tracker.tracker import CheckSummary, Tracker

__all__ = ["ACTIONS", "ACTIVE", "AUTO", "FILING_KINDS", "STATES", "CheckSummary", "Tracker", "allowed_actions"]
