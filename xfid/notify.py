"""Webhooks after a check that files or reopens issues: a generic JSON payload, or Slack's.

Configured in xfid.toml, one table per receiver:

    [[notify.webhook]]
    url = "https://hooks.slack.com/services/T000/B000/XXXX"
    format = "slack"        # or "json" (the default)
    timeout_s = 5           # per attempt (default 5)
    retries = 2             # further attempts after a failure (default 2), 0.5 s, 1 s, ... apart

A webhook never changes a check: it is called after the check is recorded, every failure (a
refused connection, a timeout, a non-2xx status) is a warning on stderr, and the time it can
take is bounded by (retries + 1) x timeout_s plus the back-off. The receiver's URL often holds a
secret (Slack's does, in its path), so a warning shows only its scheme and host. Nothing in a
payload is fetched or rendered by xfid; names are sent as data (JSON-escaped).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from xfid.errors import ConfigError

FORMATS = ("json", "slack")
KEYS = ("url", "format", "timeout_s", "retries")
TIMEOUT_S = 5.0
RETRIES = 2
MAX_RETRIES = 10
MAX_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Webhook:
    url: str
    format: str = "json"
    timeout_s: float = TIMEOUT_S
    retries: int = RETRIES

    @property
    def shown(self) -> str:
        """The receiver as a warning may show it: scheme and host only (the path is often a secret)."""
        u = urlsplit(self.url)
        return f"{u.scheme}://{u.hostname}{f':{u.port}' if u.port else ''}/…"


def webhooks(section: Any, where: str) -> list[Webhook]:
    """The `[[notify.webhook]]` tables of a config's `notify` section, validated.

    Raises:
        ConfigError: an unknown key, a URL that is not http(s), a bad format, timeout or retries.
    """
    if not section:
        return []
    if not isinstance(section, dict) or set(section) - {"webhook"}:
        raise ConfigError(f"{where}: [notify] takes only [[notify.webhook]] tables (url, format, timeout_s, retries)")
    hooks = section.get("webhook", [])
    if not isinstance(hooks, list) or not all(isinstance(h, dict) for h in hooks):
        raise ConfigError(f"{where}: notify.webhook must be an array of tables: write [[notify.webhook]]")
    return [_webhook(h, f"{where}: notify.webhook[{i}]") for i, h in enumerate(hooks)]


def _webhook(h: dict[str, Any], where: str) -> Webhook:
    unknown = sorted(set(h) - set(KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(KEYS)}")
    url = h.get("url")
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}: url must be an http:// or https:// URL with a host")
    fmt = h.get("format", "json")
    if fmt not in FORMATS:
        raise ConfigError(f"{where}: format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    t = h.get("timeout_s", TIMEOUT_S)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= MAX_TIMEOUT_S:
        raise ConfigError(f"{where}: timeout_s must be a number of seconds in (0, {MAX_TIMEOUT_S:g}], got {t!r}")
    r = h.get("retries", RETRIES)
    if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r <= MAX_RETRIES:
        raise ConfigError(f"{where}: retries must be an integer from 0 to {MAX_RETRIES}, got {r!r}")
    return Webhook(url, fmt, float(t), r)


def should_notify(summary: Any) -> bool:
    """Only a check that files or reopens issues calls the webhooks."""
    return bool(summary.new or summary.reopened)


def payload(summary: Any, hook: Webhook, *, store: str, actor: str | None, label: str | None) -> dict[str, Any]:
    """The body sent to `hook` for a check summary."""
    generic = {"event": "xfid.check", "store": store, "check_id": summary.check_id, "time": summary.time,
               "actor": actor, "label": label, "new": list(summary.new), "reopened": list(summary.reopened),
               "resolved": list(summary.resolved), "counts": summary.counts()}
    if hook.format == "json":
        return generic
    parts = []
    if summary.new:
        parts.append(f"{len(summary.new)} new ({', '.join(summary.new[:10])}{', …' if len(summary.new) > 10 else ''})")
    if summary.reopened:
        parts.append(f"{len(summary.reopened)} reopened ({', '.join(summary.reopened[:10])}"
                     f"{', …' if len(summary.reopened) > 10 else ''})")
    text = (f"xfid check #{summary.check_id} on {store}: " + "; ".join(parts)
            + f"; {summary.total_open} open in all")
    return {"text": text}


def send(hooks: list[Webhook], summary: Any, *, store: str, actor: str | None = None, label: str | None = None,
         warn: Callable[[str], None], sleep: Callable[[float], None] = time.sleep) -> list[bool]:
    """POST the check to every webhook when it filed or reopened issues; one bool per hook
    (delivered or not). Never raises: each failure is reported through `warn`."""
    if not hooks or not should_notify(summary):
        return []
    out = []
    for hook in hooks:
        body = json.dumps(payload(summary, hook, store=store, actor=actor, label=label)).encode()
        out.append(_deliver(hook, body, warn, sleep))
    return out


def _deliver(hook: Webhook, body: bytes, warn: Callable[[str], None], sleep: Callable[[float], None]) -> bool:
    last = ""
    for attempt in range(hook.retries + 1):
        if attempt:
            sleep(0.5 * 2 ** (attempt - 1))
        req = urllib.request.Request(hook.url, data=body, method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "xfid-webhook"})
        try:
            with urllib.request.urlopen(req, timeout=hook.timeout_s) as resp:
                if 200 <= resp.status < 300:
                    return True
                last = f"status {resp.status}"
        except urllib.error.HTTPError as e:
            last = f"status {e.code}"
            e.close()
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", e)
            last = "timed out" if "timed out" in str(reason) else type(reason).__name__
    warn(f"warning: webhook {hook.shown} not delivered after {hook.retries + 1} attempt(s) ({last}); "
         "the check is recorded all the same")
    return False
