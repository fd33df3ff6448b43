"""Capability profiles: what a target achieves against its bounds, what limits it, how far a model transfers."""

from __future__ import annotations

from xfid.profile.build import Profile, profile

__all__ = ["Profile", "profile"]
