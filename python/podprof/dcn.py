"""A capture's cross-slice (DCN) transfers as DataFrames (`Client.dcn`, `podprof dcn`)."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping

import pandas as pd

# The answer's tables: the attribute, and the key of GET /api/v1/captures/{id}/dcn's JSON.
_TABLES = (("links", "links"), ("producers", "producers"), ("transfers", "worst"),
           ("xprof", "xprof"))


class DcnReport:
    """What `podprof dcn CAPTURE --format json` gives, read once: `verdict` (one line: the
    named late slice and/or slow link with the evidence, or why none is), `slices`,
    `transfers` (receives paired with their sends), `expected_transit_ns`,
    `runtime_network` (the network's parts come from the runtime's own latency, beyond
    `expected_runtime_latency_ns`: its transmission budget when `runtime_budget`),
    `named_after_instances` (-1 when nothing is named), and a DataFrame per table, each with
    the columns of `podprof dcn --format csv --table NAME` (capture first; durations and
    instants in ns, XProf's figures in us): `links` and `producers` (judged, most waiting
    caused first), `transfers` (the worst waits, worst first, up to the `top` asked) and
    `xprof` (every host's rows as XProf's megascale_stats shows them). A table without rows is
    an empty frame with its columns."""

    def __init__(self, answer: Mapping[str, Any]) -> None:
        self.capture: str = str(answer["capture"])
        self.verdict: str = str(answer["verdict"])
        self.slices = int(answer["slices"])
        self.transfers_paired = int(answer["transfers"])
        self.expected_transit_ns = int(answer["expected_transit_ns"])
        self.runtime_network = bool(answer["runtime_network"])
        self.expected_runtime_latency_ns = int(answer["expected_runtime_latency_ns"])
        self.runtime_budget = bool(answer["runtime_budget"])
        self.named_after_instances = int(answer["named_after_instances"])
        frames: Dict[str, pd.DataFrame] = {}
        for name, key in _TABLES:
            rows: List[Dict[str, Any]] = [{"capture": self.capture, **r} for r in answer[key]]
            frames[name] = pd.DataFrame(rows, columns=answer["columns"][key])
        self.links = frames["links"]
        self.producers = frames["producers"]
        self.transfers = frames["transfers"]
        self.xprof = frames["xprof"]

    def __repr__(self) -> str:
        return f"<podprof DCN of {self.capture}: {self.verdict}>"
