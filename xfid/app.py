"""What every command shares: the store and config chosen by the global options."""

from __future__ import annotations

import getpass
import os
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xfid.config import Config
    from xfid.store import Store


@dataclass
class App:
    """Resolved global options; the config and store are opened on first use."""

    store_opt: str | None = None
    config_opt: str | None = None
    _stores: list[Store] = field(default_factory=list)

    @cached_property
    def config(self) -> Config:
        from xfid.config import load_config

        return load_config(self.config_opt)

    @property
    def store_path(self) -> Path:
        from xfid.store import resolve_store_path

        return resolve_store_path(self.store_opt, self.config.store)

    def store(self, create: bool = True) -> Store:
        from xfid.store import Store

        s = Store(self.store_path, create=create)
        self._stores.append(s)
        return s

    def close(self) -> None:
        for s in self._stores:
            s.close()


def actor(explicit: str | None = None) -> str:
    """Who is acting: --actor, then env XFID_ACTOR, then the login name."""
    if explicit:
        return explicit
    if os.environ.get("XFID_ACTOR"):
        return os.environ["XFID_ACTOR"]
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def interactive() -> bool:
    """True on a terminal outside CI: progress bars are shown only then."""
    return sys.stderr.isatty() and not os.environ.get("CI")
