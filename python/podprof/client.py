"""`podprof.Client`: the aggregator's HTTP API as DataFrames, mirroring the CLI.

Every table comes from the API's CSV, which the aggregator writes with the code the CLI prints
with: a method's frame has the CLI's columns, rows and values (tests/python/test_client.py
holds them equal), with real dtypes (podprof._frames).
"""
from __future__ import annotations

import datetime as dt
import os
import sys
import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, \
    Sequence, Union

import pandas as pd

from . import _frames, errors, profile as profiles
from ._http import Params, Tls, Transport

if TYPE_CHECKING:
    from .dcn import DcnReport
    from .fleet import Fleet

Duration = Union[float, int, str, dt.timedelta]
# `podprof captures --format csv`'s columns, then the rest of its JSON.
_CAPTURE_COLUMNS = ["capture", "start_ns", "end_ns", "status", "hosts", "chips", "kernels",
                    "events", "labels", "created_ns", "source", "window", "host_names",
                    "error_message", "options"]
# A point of a capture's window: ns from its start (int), or an instant on the pod's clock.
Instant = Union[int, dt.datetime, pd.Timestamp]

_DEFAULT_TIMEOUT_S = 30.0


def duration_s(value: Duration, what: str = "duration") -> float:
    """Seconds from 2.5, "2500ms", "2.5s" or a timedelta; ValueError naming `what` otherwise."""
    if isinstance(value, dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, str):
        seconds = profiles.parse_duration_s(value, what)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise ValueError(f"{what}={value!r}: give seconds, a string such as '2s', or a timedelta")
    if seconds <= 0:
        raise ValueError(f"{what}={value!r} must be positive")
    return seconds


class Client:
    """A client of one aggregator's HTTP API (its `[http] listen`).

    `url` is http://HOST:PORT, or https:// with `cert`, `key` and `ca` (PEM files: this
    client's certificate and key, the deployment's CA). `profile` reads the CLI's configuration
    file (podprof.profile): its `http`, `tls_*` and `timeout`, under whatever is given here.
    """

    def __init__(self, url: Optional[str] = None, *, cert: Optional[str] = None,
                 key: Optional[str] = None, ca: Optional[str] = None,
                 profile: Optional[str] = None, timeout: Optional[Duration] = None) -> None:
        p = profiles.load(profile or os.environ.get("PODPROF_PROFILE") or None) \
            if profile is not None or url is None else profiles.Profile()
        url = url or os.environ.get("PODPROF_HTTP") or p.http
        if not url:
            raise ValueError("no aggregator: give url= (its [http] listen, e.g. "
                             "http://127.0.0.1:7180) or profile= with an `http` key")
        files = (cert or p.tls_cert, key or p.tls_key, ca or p.tls_ca)
        if any(files) and not all(files):
            raise ValueError("give all three of cert=, key= and ca= (or none, for plain HTTP)")
        tls = Tls(*files) if all(files) else None  # type: ignore[arg-type]
        seconds = duration_s(timeout, "timeout") if timeout is not None else p.timeout_s
        self._http = Transport(url, tls, seconds or _DEFAULT_TIMEOUT_S)
        self.url = self._http.base

    def __repr__(self) -> str:
        return f"podprof.Client({self.url!r})"

    # --- reading ---------------------------------------------------------------------------

    def captures(self, *, status: Optional[str] = None,
                 labels: Optional[Mapping[str, str]] = None, limit: Optional[int] = None,
                 all: bool = False) -> pd.DataFrame:
        """Stored captures, newest first (`podprof captures`): its table's columns, then the
        rest of what `--format json` holds (labels and options as dicts). `limit` per page (the
        aggregator's 100 by default); `all` follows the pages."""
        params: Dict[str, Any] = {
            "status": status, "limit": limit,
            "label": [f"{k}={v}" for k, v in (labels or {}).items()] or None}
        rows: List[Dict[str, Any]] = []
        while True:
            page = self._http.json("GET", "/api/v1/captures", params)
            rows.extend(page.get("captures", []))
            params["page_token"] = page.get("next_page_token")
            if not all or not params["page_token"]:
                break
        frame = pd.DataFrame(rows, columns=_CAPTURE_COLUMNS)
        for column in ("start_ns", "end_ns", "created_ns"):
            frame[column] = pd.to_datetime(frame[column].astype("int64"), unit="ns", utc=True)
        for column in ("status", "source"):
            frame[column] = frame[column].astype("category")
        for column in ("hosts", "chips", "kernels", "events"):
            frame[column] = frame[column].astype("int64")
        return frame

    def capture(self, capture: str) -> pd.DataFrame:
        """A capture's hosts: outcome, clock correction (offset, uncertainty, drift), events and
        who analysed each. The capture's own fields are in `.attrs["capture"]`."""
        path = f"/api/v1/captures/{_segment(capture)}"
        frame = self._table(path)
        summary = self._http.json("GET", path)
        summary.pop("hosts_detail", None)
        frame.attrs["capture"] = summary
        return frame

    def kernels(self, capture: str, *, by: str = "chip", kernel: Optional[str] = None,
                top: Optional[int] = None, category: Optional[str] = None,
                host: Optional[str] = None, chip: Optional[int] = None,
                sort: str = "total") -> pd.DataFrame:
        """Kernel statistics of a capture (`podprof stats --format csv`): rows per chip (its
        default for data), kernel, host or category; `kernel` is a regular expression (RE2)
        found anywhere in the op name; `sort` is total, count, mean, p50, p99, max or name."""
        if by not in ("kernel", "chip", "host", "category"):
            raise ValueError(f"by={by!r}: use kernel, chip, host or category")
        return self._table(f"/api/v1/captures/{_segment(capture)}/kernels",
                           {"by": by, "kernel": kernel, "top": top, "category": category,
                            "host": host, "chip": chip, "sort": sort})

    def history(self, kernel: str, *, since: Duration = "30d",
                module: Optional[str] = None) -> pd.DataFrame:
        """How `kernel` behaved over the stored captures (`podprof history`), a row per capture."""
        return self._table(f"/api/v1/kernels/{_segment(kernel)}/history",
                           {"since": _since(since), "module": module})

    def diff(self, baseline: str, candidate: str, *, threshold: float = 0.05,
             kernel: Optional[str] = None) -> pd.DataFrame:
        """Two captures' kernels compared, regressions flagged (`podprof diff`)."""
        return self._table("/api/v1/diff", {"baseline": baseline, "candidate": candidate,
                                            "threshold": threshold, "kernel": kernel})

    def stragglers(self, capture: str) -> pd.DataFrame:
        """Chips that arrived last at the capture's collectives (`podprof stragglers`)."""
        return self._table(f"/api/v1/captures/{_segment(capture)}/stragglers")

    def dcn(self, capture: str, *, top: Optional[int] = None) -> "DcnReport":
        """A multi-slice capture's cross-slice (DCN) transfers (`podprof dcn`): the verdict, and
        the links, producing slices, worst transfers (up to `top`; the aggregator's 20 by
        default, at most 1000) and XProf's per-host rows as DataFrames (podprof.dcn)."""
        from .dcn import DcnReport
        return DcnReport(self._http.json("GET", f"/api/v1/captures/{_segment(capture)}/dcn",
                                         {"top": top}))

    def sql(self, capture: str, query: str, *, max_rows: Optional[int] = None) -> pd.DataFrame:
        """One read-only SQL statement over the capture's tables (`podprof sql`; docs/SQL.md):
        events, kernels, collectives, counters and telemetry, every time on the pod's clock. The
        frame's `attrs` hold `truncated` (more rows than `max_rows`: the aggregator's 1,000 by
        default, at most 10,000) and `provenance` (capture, hosts, window, clock error)."""
        body: Dict[str, Any] = {"capture": capture, "query": query}
        if max_rows is not None:
            body["max_rows"] = max_rows
        answer = self._http.json("POST", "/api/v1/sql", body=body)
        frame = pd.DataFrame(answer["rows"], columns=answer["columns"])
        frame.attrs["truncated"] = answer["truncated"]
        frame.attrs["provenance"] = answer["provenance"]
        return frame

    def agents(self) -> pd.DataFrame:
        """Registered agents with their clock offset, uncertainty and drift (`podprof agents`)."""
        return self._table("/api/v1/agents")

    def telemetry(self, *, since: Duration = "1h",
                  hosts: Optional[Sequence[str]] = None, limit: int = 10_000) -> pd.DataFrame:
        """The stored always-on telemetry (`podprof telemetry`), a row per chip and stored
        interval, oldest first: steps, step_mean_us, step_max_us, duty_cycle_percent,
        hbm_used_bytes, queued (-1 where the runtime reported nothing)."""
        return self._table("/api/v1/telemetry",
                           {"since": _since(since), "limit": limit,
                            "host": ",".join(hosts) if hosts else None})

    def triggers(self) -> Dict[str, Any]:
        """The flight recorder's trigger settings and their last events (what fired, what was
        held back and why, the snapshot taken), as GET /api/v1/triggers gives them."""
        out: Dict[str, Any] = self._http.json("GET", "/api/v1/triggers")
        return out

    def kernel(self, name: str, *, capture: Optional[str] = None,
               module: Optional[str] = None) -> Dict[str, Any]:
        """One kernel as `podprof kernel NAME --format json` gives it (a dict)."""
        out: Dict[str, Any] = self._http.json(
            "GET", f"/api/v1/kernels/{_segment(name)}", {"capture": capture, "module": module})
        return out

    def timeline(self, capture: str, *, hosts: Optional[Sequence[str]] = None,
                 chips: Optional[Sequence[int]] = None, start: Optional[Instant] = None,
                 end: Optional[Instant] = None, kernel: Optional[str] = None) -> pd.DataFrame:
        """The events of a window, a row each, on the pod's clock (`podprof export --format
        csv`): `start`/`end` as ns from the capture's start or instants; `hosts`, `chips` and
        `kernel` (a regular expression) narrow it."""
        params = self._window(capture, start, end)
        params.update({"format": "csv", "hosts": ",".join(hosts) if hosts else None,
                       "kernel": kernel})
        frame = _frames.read_csv(self._http.read(
            "GET", f"/api/v1/captures/{_segment(capture)}/export", params, accept="text/csv"))
        if chips is not None and len(frame):
            frame = frame[frame["chip"].astype(int).isin(list(chips))].reset_index(drop=True)
        return frame

    def export(self, capture: str, path: Union[str, os.PathLike[str]], *,
               format: str = "perfetto", start: Optional[Instant] = None,
               end: Optional[Instant] = None, hosts: Optional[Sequence[str]] = None,
               kernel: Optional[str] = None, progress: Optional[bool] = None) -> Path:
        """Writes the capture's timeline to `path` as `podprof export` does (perfetto, chrome,
        xprof: a tar of the session, csv), streamed; with progress when tqdm is installed
        (`progress=None`: when the output is a terminal or notebook)."""
        if format not in ("perfetto", "chrome", "xprof", "csv"):
            raise ValueError(f"format={format!r}: use perfetto, chrome, xprof or csv")
        params = self._window(capture, start, end)
        params.update({"format": format, "hosts": ",".join(hosts) if hosts else None,
                       "kernel": kernel})
        target = Path(path)
        partial = target.with_name(target.name + ".part")
        conn, resp = self._http.open("GET", f"/api/v1/captures/{_segment(capture)}/export",
                                     params, accept="*/*", timeout=max(self._http.timeout, 300))
        try:
            with open(partial, "wb") as f, _progress(progress, capture) as tick:
                while True:
                    block = resp.read(1 << 20)
                    if not block:
                        break
                    f.write(block)
                    tick(len(block))
        except OSError as e:
            partial.unlink(missing_ok=True)
            raise errors.UnreachableError(f"the export of {capture} broke off: {e}") from e
        finally:
            conn.close()
        partial.replace(target)
        return target

    def fleet(self) -> "Fleet":
        """The fleet store this aggregator replicates to (its `[fleet]`), asked through it:
        podprof.fleet.Fleet's history(), top() and regressions() (GET /api/v1/fleet/...)."""
        from .fleet import Fleet
        return Fleet(aggregator=self, timeout=self._http.timeout)

    # --- writing (the operator role) -----------------------------------------------------------

    def start_capture(self, duration: Duration, *, hosts: Optional[Sequence[str]] = None,
                      selector: Optional[Mapping[str, str]] = None,
                      labels: Optional[Mapping[str, str]] = None,
                      delay: Optional[Duration] = None,
                      start_ns: Optional[int] = None) -> "CaptureHandle":
        """Starts a pod-wide capture of `duration` (`podprof capture`); needs the operator role.
        Returns at once with a handle: `.wait()` follows it to the end. `start_ns` (Unix ns on
        the aggregator's clock, instead of `delay`) fixes the window's start: an instant too
        close for the aggregator to reach every host is refused, not moved."""
        body: Dict[str, Any] = {"duration_ms": _ms(duration, "duration")}
        body.update(_targets(hosts, selector, labels))
        if delay is not None:
            body["delay_ms"] = _ms(delay, "delay") if delay != 0 else 0
        if start_ns is not None:
            if isinstance(start_ns, bool) or not isinstance(start_ns, int) or start_ns <= 0:
                raise ValueError(f"start_ns must be a positive int (Unix ns), got {start_ns!r}")
            body["start_ns"] = start_ns
        answer = self._http.json("POST", "/api/v1/captures", body=body)
        return CaptureHandle(self, answer, body["duration_ms"] * 1_000_000)

    def snapshot(self, window: Duration = "5s", *, reason: Optional[str] = None,
                 hosts: Optional[Sequence[str]] = None,
                 selector: Optional[Mapping[str, str]] = None,
                 labels: Optional[Mapping[str, str]] = None) -> "CaptureHandle":
        """Stores the `window` before now of every chosen host from the agents' flight
        recorders (`podprof snapshot`; the operator role), labelled trigger=manual and
        `reason`. Returns at once with a handle, as start_capture does. When a chosen host has
        no armed recorder the pod is captured for the `window` after the request instead (or
        refused, by the aggregator's [snapshots] without_recorder): the handle's `window` says
        which once it is over ("before-request" or "after-request")."""
        body: Dict[str, Any] = {"window_ms": _ms(window, "window")}
        if reason is not None:
            body["reason"] = reason
        body.update(_targets(hosts, selector, labels))
        answer = self._http.json("POST", "/api/v1/snapshots", body=body)
        return CaptureHandle(self, answer, body["window_ms"] * 1_000_000)

    def cancel(self, capture: str) -> Dict[str, Any]:
        """Cancels a running capture (the operator role)."""
        out: Dict[str, Any] = self._http.json(
            "POST", f"/api/v1/captures/{_segment(capture)}/cancel", body={})
        return out

    def page(self, capture: str) -> str:
        """The capture's web page."""
        return f"{self.url}/captures/{_segment(capture)}"

    # --- helpers --------------------------------------------------------------------------------

    def _table(self, path: str, params: Optional[Params] = None) -> pd.DataFrame:
        return _frames.read_csv(self._http.read("GET", path, {**(params or {}), "format": "csv"},
                                                accept="text/csv"))

    def _window(self, capture: str, start: Optional[Instant],
                end: Optional[Instant]) -> Dict[str, Any]:
        """from_ns/to_ns (ns from the capture's start) for `start` and `end`."""
        params: Dict[str, Any] = {}
        if start is None and end is None:
            return params
        origin: Optional[int] = None
        for name, value in (("from_ns", start), ("to_ns", end)):
            if value is None:
                continue
            if isinstance(value, (dt.datetime, pd.Timestamp)):
                if origin is None:
                    origin = int(self._http.json(
                        "GET", f"/api/v1/captures/{_segment(capture)}")["start_ns"])
                value = _epoch_ns(value) - origin
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name[:-3] if name == 'from_ns' else 'end'}={value!r}: give ns "
                                 "from the capture's start (>= 0) or an instant inside it")
            params[name] = value
        return params


class CaptureHandle:
    """A capture started by `Client.start_capture`: its id, start and hosts, and its progress
    as the aggregator's server-sent events tell it."""

    def __init__(self, client: Client, answer: Mapping[str, Any], duration_ns: int) -> None:
        self.client = client
        self.id: str = str(answer["capture"])
        self.start = pd.Timestamp(int(answer["start_ns"]), unit="ns", tz="UTC")
        self.duration_ns = duration_ns
        self.hosts: List[str] = list(answer.get("hosts", []))
        self.status: str = "running"
        self.progress: Dict[str, Any] = {}
        # Why the capture failed (the aggregator's reason), once it has; None otherwise.
        self.error: Optional[str] = None
        # A snapshot's window once it is stored: "before-request" (the flight recorders' last
        # seconds), "after-request" (a host had no armed recorder: captured from the request
        # on), "mixed"; None for other captures and before the end. `start` is then the stored
        # window's start (docs/RECORDER.md).
        self.window: Optional[str] = None

    def __repr__(self) -> str:
        return f"<podprof capture {self.id} {self.status}, {len(self.hosts)} hosts>"

    @property
    def url(self) -> str:
        """The capture's web page."""
        return self.client.page(self.id)

    def events(self, timeout: Optional[float] = None) -> Iterator[Dict[str, Any]]:
        """Each progress event (a host's state, events, bytes, clock correction), then the last,
        `done`, with the capture's status."""
        path = f"/api/v1/captures/{_segment(self.id)}/events"
        for name, data in self.client._http.events(path, timeout):
            self.progress = data
            if name == "done" or data.get("status") not in (None, "unspecified"):
                self.status = str(data.get("status", self.status))
            if name == "done" and self.status in _FAILED:
                self.error = self._reason(data)
            elif name == "done":
                self._stored_window()
            yield {"event": name, **data}
            if name == "done":
                return

    def wait(self, timeout: Optional[Duration] = None,
             on_progress: Optional[Callable[[Dict[str, Any]], None]] = None) -> str:
        """Follows the capture until it is over; returns its status (complete, partial, failed,
        cancelled). `on_progress` gets every event; TimeoutError past `timeout`."""
        limit = duration_s(timeout, "timeout") if timeout is not None else None
        deadline = time.monotonic() + limit if limit is not None else None
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"capture {self.id} still {self.status} after {timeout}")
            try:
                for event in self.events(timeout=left):
                    if on_progress is not None:
                        on_progress(event)
                    if event["event"] == "done":
                        return self.status
                    # A stream that keeps sending progress never idles out: the deadline is
                    # checked at each event too.
                    if deadline is not None and time.monotonic() >= deadline:
                        raise TimeoutError(f"capture {self.id} still {self.status} after {timeout}")
            except errors.UnreachableError as e:
                if "timed out" not in str(e):
                    raise
            # The stream ended or idled out without `done`: follow it again.

    def cancel(self) -> Dict[str, Any]:
        """Cancels the capture."""
        return self.client.cancel(self.id)

    def kernels(self, **kw: Any) -> pd.DataFrame:
        """`Client.kernels` of this capture, once it is over; podprof.CaptureFailedError (a
        RuntimeError) with the aggregator's reason when it failed or was cancelled, rather
        than an empty table."""
        if self.status == "running":
            self.wait()
        if self.status in _FAILED:
            raise errors.CaptureFailedError(
                f"capture {self.id} {self.status}: {self.error or 'no reason given'}",
                capture=self.id)
        return self.client.kernels(self.id, **kw)

    def _stored_window(self) -> None:
        """The stored window and a snapshot's label, which may differ from the planned start."""
        try:
            stored = self.client._http.json("GET", f"/api/v1/captures/{_segment(self.id)}")
        except errors.PodprofError:
            return
        self.window = stored.get("window")
        if stored.get("start_ns"):
            self.start = pd.Timestamp(int(stored["start_ns"]), unit="ns", tz="UTC")

    def _reason(self, done: Mapping[str, Any]) -> str:
        """The capture's error, else its hosts' (the stored capture's, else the last event's)."""
        try:
            stored = self.client._http.json("GET", f"/api/v1/captures/{_segment(self.id)}")
        except errors.PodprofError as e:
            stored = {"error_message": f"(its reason could not be read: {e})"}
        reasons = [str(stored.get("error_message") or "")]
        reasons += [f"{h.get('host')}: {h.get('error')}" for h in stored.get("hosts_detail", [])
                    if h.get("error")]
        host = done.get("host") or {}
        if not any(reasons) and host.get("error"):
            reasons.append(f"{host.get('host')}: {host['error']}")
        return "; ".join(r for r in reasons if r) or str(done.get("detail") or "")


# The ends of a capture that leave nothing to read.
_FAILED = ("failed", "cancelled")


def _targets(hosts: Optional[Sequence[str]], selector: Optional[Mapping[str, str]],
             labels: Optional[Mapping[str, str]]) -> Dict[str, Any]:
    """A write body's hosts, selector and labels, those given."""
    out: Dict[str, Any] = {}
    if hosts:
        out["hosts"] = list(hosts)
    if selector:
        out["selector"] = dict(selector)
    if labels:
        out["labels"] = dict(labels)
    return out


def _segment(text: str) -> str:
    if not text:
        raise ValueError("an empty name or capture id")
    return urllib.parse.quote(text, safe="")


def _since(value: Duration) -> str:
    if isinstance(value, str):
        return value
    return f"{int(duration_s(value, 'since'))}s"


def _ms(value: Duration, what: str) -> int:
    return max(1, round(duration_s(value, what) * 1000))


def _epoch_ns(value: Union[dt.datetime, pd.Timestamp]) -> int:
    ts = pd.Timestamp(value)
    if ts.tzinfo is None:
        raise ValueError(f"{value!r} has no time zone: instants on the pod's clock are UTC")
    return int(ts.value)


class _Tick:
    def __init__(self, bar: Any) -> None:
        self.bar = bar

    def __enter__(self) -> Callable[[int], None]:
        return (lambda n: None) if self.bar is None else self.bar.update

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()


def _progress(wanted: Optional[bool], capture: str) -> _Tick:
    if wanted is False or (wanted is None and not sys.stderr.isatty() and "ipykernel" not in
                           sys.modules):
        return _Tick(None)
    try:
        from tqdm.auto import tqdm
    except ImportError:
        if wanted:
            raise ImportError("progress=True needs tqdm: pip install 'podprof[progress]'")
        return _Tick(None)
    return _Tick(tqdm(desc=f"export {capture}", unit="B", unit_scale=True, unit_divisor=1024))
