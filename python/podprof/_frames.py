"""The API's CSV answers as DataFrames with real dtypes, by the CLI's column names.

The aggregator writes the CSV the CLI prints (the same code on its side), so a frame read
from it holds the CLI's columns in the CLI's order. Text stays text; the rest is typed by what
the column holds: picoseconds and counts as int64, instants (ns since the Unix epoch) as
datetime64[ns, UTC], judgements as categories.
"""
from __future__ import annotations

import io
from typing import FrozenSet

import pandas as pd

# Instants, ns since the Unix epoch. Other *_ns columns are durations or offsets (int64).
INSTANTS: FrozenSet[str] = frozenset(
    {"created_ns", "start_ns", "end_ns", "last_heartbeat_ns", "first_ns", "last_ns", "time_ns"})
# A judgement from a short list: categories.
CATEGORIES: FrozenSet[str] = frozenset(
    {"verdict", "baseline_verdict", "candidate_verdict", "cause", "status", "state", "source",
     "analysed_by", "category", "line", "recorder"})
# Text even when it looks like a number: names, identifiers (64-bit ids exceed int64 and are
# only ever compared), JSON held as text, and `chip`, which is "*" on roll-up rows.
TEXT: FrozenSet[str] = frozenset(
    {"capture", "host", "kernel", "module", "error", "error_message", "address", "labels",
     "options", "host_names", "active_capture_id", "kernel_id", "program_id", "hlo_text_hash",
     "collective_id", "straggler", "verdict_text", "name", "unit", "chip", "warnings"})


def read_csv(data: bytes) -> pd.DataFrame:
    """The CSV `data` (one header line, RFC 4180 fields) as a typed frame."""
    if not data.strip():
        return pd.DataFrame()
    frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, na_values=[""])
    for column in frame.columns:
        frame[column] = _typed(str(column), frame[column])
    return frame


def _typed(name: str, values: "pd.Series[str]") -> "pd.Series":
    if name in TEXT:
        return values
    if name in CATEGORIES:
        return values.astype("category")
    if name in INSTANTS:
        return pd.to_datetime(_integers(values), unit="ns", utc=True)
    lowered = values.dropna().str.lower()
    if len(lowered) and lowered.isin(["true", "false"]).all():
        return values.str.lower().map({"true": True, "false": False}).astype(
            "boolean" if values.isna().any() else "bool")
    if name.endswith(("_ps", "_ns", "_bytes")) or _all_integers(values):
        try:
            return _integers(values)
        except (ValueError, TypeError):
            pass
    try:
        return pd.to_numeric(values)
    except (ValueError, TypeError):
        return values


def _all_integers(values: "pd.Series[str]") -> bool:
    present = values.dropna()
    return bool(len(present)) and bool(present.str.fullmatch(r"-?[0-9]+").all())


def _integers(values: "pd.Series[str]") -> "pd.Series":
    # int() per value keeps every digit of an int64 (through float, 2^53 and beyond round).
    if values.isna().any():
        return pd.Series(pd.array([None if pd.isna(v) else int(v) for v in values], dtype="Int64"),
                         index=values.index)
    return pd.Series([int(v) for v in values], index=values.index, dtype="int64")
