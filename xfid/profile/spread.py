"""Run-to-run spread of a fidelity's numbers: what a model error has to be compared with."""

from __future__ import annotations

from typing import Any

import numpy as np

from xfid.profile.stats import relative_spread
from xfid.schema import FLAG_NO_REFERENCE
from xfid.store import Store

SPREAD_METRICS = ("latency", "cycles")


def reference_spread(store: Store, fidelity: str, target: str) -> dict[str, Any] | None:
    """Median relative std over the op-level keys of `fidelity` on `target` measured two or more
    times (several runs or duplicates); None when every key was measured once."""
    t = store.read({"target": [target], "fidelity": [fidelity], "metric": list(SPREAD_METRICS)},
                   ["workload", "op", "metric", "stat", "value", "flags"]).to_pandas()
    if not len(t):
        return None
    flags = t["flags"].astype(object).fillna("").astype(str)
    ok = ~flags.map(lambda f: bool(set(f.split(",")) & set(FLAG_NO_REFERENCE))) & t["value"].notna()
    t = t[ok & (t["op"].astype(str) != "")]
    vals = [x for _, g in t.groupby(["workload", "op", "metric", "stat"], observed=True)
            if (x := relative_spread(g["value"].tolist())) is not None]
    if not vals:
        return None
    return {"median": float(np.median(vals)), "keys": len(vals), "max": float(max(vals))}
