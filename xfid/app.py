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
    from xfid.outfile import StoreArea
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

    def store_areas(self) -> list[StoreArea]:
        """The store the global options name, as `xfid.outfile.guard` protects it, without
        opening it (a command that writes a file but never opens the store is guarded too)."""
        from urllib.parse import urlsplit

        from xfid.errors import XfidError
        from xfid.locations import env_records_url
        from xfid.outfile import store_area
        from xfid.records import OBJECT_SCHEMES
        from xfid.store import resolve_store_path

        try:
            root, records = self.api.path, self.api.locations()["records"]
        except XfidError:  # a broken config: the command says so; the store's folder is still known
            root, records = resolve_store_path(self.store_opt), env_records_url()
        if records is None:
            return [store_area(root)]
        url = urlsplit(str(records))
        if url.scheme.lower() in OBJECT_SCHEMES:
            return [store_area(root, url=f"{url.scheme}://{url.hostname or ''}{url.path}")]
        return [store_area(root, Path(url.path) if url.scheme.lower() == "file" else Path(str(records)))]

    def close(self) -> None:
        from xfid import outfile

        outfile.unprotect(self)
        if "api" in self.__dict__:
            self.api.close()


def interactive() -> bool:
    """True on a terminal outside CI: progress bars are shown only then."""
    return sys.stderr.isatty() and not os.environ.get("CI")
