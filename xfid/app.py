"""What every command shares: the store and config chosen by the global options."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xfid.api import XfidStore
    from xfid.config import Config
    from xfid.store import Store


@dataclass
class App:
    """Resolved global options; `api` is the store of the Python API, opened on first use."""

    store_opt: str | None = None
    config_opt: str | None = None
    server: str | None = None

    @cached_property
    def api(self) -> XfidStore:
        """The local store's API, or with --server a client of that server (same methods)."""
        if self.server:
            from xfid.client import RemoteStore

            return RemoteStore(self.server, os.environ.get("XFID_TOKEN"))  # type: ignore[return-value]
        from xfid.api import open_store

        return open_store(self.store_opt, self.config_opt)

    @property
    def config(self) -> Config:
        return self.api.config

    @property
    def store_path(self) -> Path:
        return self.api.path

    def store(self, create: bool = True) -> Store:
        return self.api.backend(create=create)

    def close(self) -> None:
        if "api" in self.__dict__:
            self.api.close()


def interactive() -> bool:
    """True on a terminal outside CI: progress bars are shown only then."""
    return sys.stderr.isatty() and not os.environ.get("CI")
