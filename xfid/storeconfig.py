"""One config per store: every check records the config it was judged by; later commands use it.

A discrepancy, a drift verdict and a report are only as comparable as the configs behind them
(tolerances, op maps, pairs, targets). So each check records its config (hash, path and text:
xfid.tracker.config_db), and:

* A command given a config (`--config`, env XFID_CONFIG, or ./xfid.toml) whose hash differs
  from the store's last check warns once on stderr, naming both (path and hash) and how to use
  the other.
* A command given none, on a store whose last check recorded one, uses the store's config and
  says so once on stderr — never silently, and never the bundled defaults instead. The notice
  names the file and how to pick another (`--config PATH`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from xfid.errors import XfidError

if TYPE_CHECKING:
    from xfid.config import Config
    from xfid.store import Store
    from xfid.tracker.config_db import RecordedConfig


def record_of(config: Config) -> tuple[str, str | None, str | None]:
    """(hash, absolute path, text) of `config`, as a check records it."""
    path = str(Path(config.path).resolve()) if config.path is not None else None
    return config.hash(), path, config.text


def judged_hash(config: Config) -> str:
    """The hash of what judges the numbers: the config without `[store]` (where the store is, which
    differs between the machines of one team store without changing any verdict)."""
    import hashlib
    import json

    raw = {k: v for k, v in config.raw.items() if k != "store"}
    return hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()[:16]


def describe(path: str | Path | None, config_hash: str) -> str:
    """`PATH (hash H)`, or the bundled config when there is no file."""
    where = str(path) if path is not None else "the bundled config (no xfid.toml)"
    return f"{where} (hash {config_hash})"


def last_recorded(store: Store) -> RecordedConfig | None:
    """The config of the store's last check (None: no check yet, or the store cannot say)."""
    from xfid import sqlbackend
    from xfid.tracker import config_db

    try:
        return config_db.last(store.conn)
    except sqlbackend.errors():
        return None


def config_of(rec: RecordedConfig) -> Config | None:
    """The effective config a recorded check used, rebuilt from its text (None: not recorded)."""
    from xfid.config import config_from_text

    if not rec.known:
        return None
    try:
        return config_from_text(rec.content, Path(rec.path) if rec.path else None)
    except XfidError:
        return None  # a recorded config this version no longer accepts: the caller warns instead


def _pick(rec: RecordedConfig) -> str:
    """How to run with the recorded config."""
    if rec.path is None:
        return "run without --config where no ./xfid.toml is found"
    gone = "" if Path(rec.path).is_file() else " (that file is gone now; the store keeps its text)"
    return f"pass --config {rec.path}{gone}"


def mismatch(config: Config, rec: RecordedConfig) -> str | None:
    """The warning for a command run with `config` on a store last checked with `rec`; None: the
    same config, or a last check that did not record its config (recorded before checks kept it,
    or by a direct Tracker call: its hash alone names no file to pick, so nothing is said)."""
    h, path, _ = record_of(config)
    if h == rec.config_hash or not rec.known:
        return None
    theirs_config = config_of(rec)
    if theirs_config is not None and judged_hash(theirs_config) == judged_hash(config):
        return None  # only where the store is differs ([store]: another machine of a team store)
    theirs = describe(rec.path, rec.config_hash)
    return (f"warning: this command uses {describe(path, h)}, but the store's last check (#{rec.check_id}) used "
            f"{theirs}: discrepancies, drift and reports will differ from that check's. To use the store's "
            f"config, {_pick(rec)}; a check run with this one (`xfid check`) makes it the store's.")


def adopted(rec: RecordedConfig, config: Config) -> str:
    """The notice for a command without a config that uses the store's recorded one."""
    h = config.hash()
    drift = "" if h == rec.config_hash else (f"; rebuilt here with this version's bundled defaults its hash is {h}, "
                                             "so bundled targets or rules have changed since")
    return (f"note: no --config and no ./xfid.toml: using the config of the store's last check (#{rec.check_id}), "
            f"{describe(rec.path, rec.config_hash)}{drift}. Pass --config PATH to use another.")


def say(message: str) -> None:
    """One line on stderr (paths come from the user: control characters escaped)."""
    from xfid.textsafe import terminal

    print(f"xfid: {terminal(message)}", file=sys.stderr)
