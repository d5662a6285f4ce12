"""The fleet store in ClickHouse from Python: `podprof fleet history|top|regressions` as DataFrames.

Each aggregator replicates its captures' statistics into ClickHouse (docs/FLEET.md); `Fleet`
asks the same questions of it as `podprof fleet` does, with the same SQL (fleet/queries.cc),
and returns what `podprof fleet ... --format csv` prints: the same columns in the same order,
the same rows in the same order, the same values, typed (picoseconds and counts as int64,
capture starts as datetime64[ns, UTC], names and ids as strings, verdicts as bool).

Percentiles are read from sketches merged inside ClickHouse (sumMap of the DDSketch bins), by a
port of trace/ddsketch.h's Quantile: they equal the CLI's to the picosecond. ClickHouse is asked
through clickhouse-connect (`pip install 'podprof[fleet]'`), imported on first use only, so
`import podprof` works without it. (`podprof fleet status` asks an aggregator, not the
store, and is not here.)
"""
from __future__ import annotations

import datetime
import math
import os
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, \
    Union

import pandas as pd

from . import errors

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

__all__ = ["Fleet"]

Since = Union[str, datetime.timedelta]
Labels = Union[Mapping[str, str], Sequence[str]]

# The columns `podprof fleet ... --format csv` prints (cli/fleet_command.cc), in its order.
HISTORY_COLUMNS = ("pod", "kernel", "module", "capture", "start_ns", "count", "chips", "mean_ps",
                   "p50_ps", "p90_ps", "p99_ps", "total_ps")
TOP_COLUMNS = ("pod", "host", "module", "kernel", "count", "total_ps", "captures", "pods",
               "mean_ps", "p50_ps", "p99_ps")
REGRESSION_COLUMNS = ("pod", "kernel", "module", "baseline_captures", "candidate_captures",
                      "baseline_p50_ps", "candidate_p50_ps", "baseline_p99_ps",
                      "candidate_p99_ps", "p50_change", "p99_change", "p50_regressed",
                      "p99_regressed")
_TEXT = frozenset({"pod", "host", "module", "kernel", "capture"})
_INSTANTS = frozenset({"start_ns"})

# The CLI's defaults (cli/fleet_command.cc).
_DEFAULT_DATABASE = "podprof"
_DEFAULT_TIMEOUT_S = 30.0
_MAX_PATTERN_BYTES = 4096  # common/pattern.h: kMaxUserPatternBytes

# ClickHouse's error codes as fleet/clickhouse.cc sorts them: refused credentials or rights,
# a missing database, table or column, and a statement or value that is wrong in itself (with
# 427, a regular expression that does not compile, which the CLI catches locally with RE2).
_REFUSED = frozenset({192, 193, 194, 195, 516, 164, 497})
_MISSING = frozenset({81, 60, 16, 47})
_BAD_REQUEST = frozenset({6, 26, 27, 32, 33, 38, 41, 53, 62, 69, 70, 72, 117, 130, 131, 132,
                          170, 250, 251, 321, 395, 427})

_INSTALL = "pip install 'podprof[fleet]'"


class Fleet:
    """The fleet store at `url` (ClickHouse's HTTP interface), as `podprof fleet` reaches it.

    Arguments mirror `podprof fleet`'s flags and, where one is not given, the same environment:
    `url` ($PODPROF_CLICKHOUSE), `user` ($PODPROF_CLICKHOUSE_USER, else "default"), the password
    from `password`, else `password_file` ($PODPROF_CLICKHOUSE_PASSWORD_FILE), else
    $PODPROF_CLICKHOUSE_PASSWORD; `database` (default "podprof"); `timeout`, the seconds to
    wait to connect and for each part of an answer (whole seconds, default 30). A read-only
    user (profile setting readonly = 2) will do.

    Nothing is sent until the first query: an unreachable server raises
    podprof.errors.UnreachableError (a ConnectionError) there, refused credentials a
    RefusedError (a PermissionError). A bad argument raises ValueError naming it.
    """

    def __init__(self, url: Optional[str] = None, *, user: Optional[str] = None,
                 password: Optional[str] = None,
                 password_file: Optional[Union[str, "os.PathLike[str]"]] = None,
                 database: str = _DEFAULT_DATABASE, timeout: float = _DEFAULT_TIMEOUT_S) -> None:
        url = url or os.environ.get("PODPROF_CLICKHOUSE", "")
        self.url, self._host, self._port = _parse_url(url)
        self.user = user or os.environ.get("PODPROF_CLICKHOUSE_USER") or "default"
        self._password = _password(password, password_file)
        if not re.fullmatch(r"[A-Za-z0-9_]+", database):
            raise ValueError(f"database {database!r} must be letters, digits and underscores")
        self.database = database
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
                not 0 < timeout < math.inf:
            raise ValueError(f"timeout {timeout!r} must be a positive number of seconds")
        self.timeout = float(timeout)
        self._client: Optional[Client] = None

    def __repr__(self) -> str:
        return f"Fleet({self.url!r}, user={self.user!r}, database={self.database!r})"

    def close(self) -> None:
        """Lets go of the connection; a later query makes a new one."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> "Fleet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the questions: fleet/queries.cc's SQL, the CLI's CSV as frames --------------------

    def history(self, regex: str, *, since: Since = "30d", pod: Optional[str] = None,
                labels: Optional[Labels] = None) -> pd.DataFrame:
        """`podprof fleet history REGEX`: each matching kernel's figures per capture, per pod.

        `regex` is RE2 (ClickHouse's match(), a partial match) on the op name; `since` how far
        back capture starts go ("30d", "24h", or a timedelta); `pod` only that pod; `labels`
        only captures with every one of them ({"job": "train"} or ["job=train"]). Rows are
        ordered by module, kernel, pod, start, capture, as the CLI's.
        """
        if not isinstance(regex, str):
            raise ValueError(f"regex {regex!r}: give the kernel op names to match (RE2)")
        if len(regex.encode()) > _MAX_PATTERN_BYTES:
            raise ValueError(f"regex: pattern is {len(regex.encode())} bytes, "
                             f"at most {_MAX_PATTERN_BYTES}")
        where = _where(_since_ns(since), _pod(pod), _labels(labels))
        sql = ("SELECT pod, module, op_name, capture_id, start_ns, sum(count), sum(total_ps), "
               "max(chips), sum(zero_count), sumMap(bin_index, bin_count) FROM "
               f"{self._table('kernel_rollups')} WHERE {where} AND match(op_name, {_quote(regex)}) "
               "GROUP BY pod, module, op_name, capture_id, start_ns "
               "ORDER BY module, op_name, pod, start_ns, capture_id")
        rows = []
        for pod_, module, kernel, capture, start, count, total, chips, zero, bins in \
                self._rows(sql, regex=regex):
            s = _Sketch.of(zero, bins)
            rows.append((pod_, kernel, module, capture, start, count, chips,
                         _llround(_mean(total, count)), _llround(s.quantile(0.5)),
                         _llround(s.quantile(0.9)), _llround(s.quantile(0.99)), total))
        return _frame(HISTORY_COLUMNS, rows)

    def top(self, *, by: str = "kernel", since: Since = "24h", pod: Optional[str] = None,
            top: int = 20) -> pd.DataFrame:
        """`podprof fleet top`: where the fleet's kernel time went, most first.

        `by` is "kernel", "pod" or "host" (a host's rows come from the per-chip table); the
        columns a grouping does not use are empty strings, as the CLI prints them. At most
        `top` rows; `since` and `pod` as in history().
        """
        if by not in ("kernel", "pod", "host"):
            raise ValueError(f"by {by!r}: group by 'kernel', 'pod' or 'host'")
        keys, group = _TOP_BY[by]
        if isinstance(top, bool) or not isinstance(top, int) or top < 1:
            raise ValueError(f"top {top!r}: the number of rows to return, at least 1")
        table = self._table("kernel_stats" if by == "host" else "kernel_rollups")
        sql = (f"SELECT {keys}, sum(count), sum(total_ps) AS total, uniqExact(pod, capture_id), "
               "uniqExact(pod), sum(zero_count), sumMap(bin_index, bin_count) FROM "
               f"{table} WHERE {_where(_since_ns(since), _pod(pod), {})} GROUP BY {group} "
               f"ORDER BY total DESC, {group} LIMIT {top}")
        rows = []
        for pod_, host, module, kernel, count, total, captures, pods, zero, bins in self._rows(sql):
            s = _Sketch.of(zero, bins)
            rows.append((pod_, host, module, kernel, count, total, captures, pods,
                         _llround(_mean(total, count)), _llround(s.quantile(0.5)),
                         _llround(s.quantile(0.99))))
        return _frame(TOP_COLUMNS, rows)

    def regressions(self, *, since: Since = "7d", pod: Optional[str] = None,
                    threshold: float = 0.05) -> pd.DataFrame:
        """`podprof fleet regressions`: per pod and kernel, [now - since, now) against the
        period before it.

        A median regressed when it rose by more than `threshold` (0.05 = 5%; never less than
        twice the sketch's error) and beyond the earlier period's p90; a p99 when it rose by
        more than `threshold` and beyond the earlier period's p99.9. Regressions come first,
        largest change first; kernels seen in only one period are left out. The changes are
        full doubles, as `--format json` gives them (the CSV prints 6 significant digits).
        """
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or \
                not 0 <= threshold < math.inf:
            raise ValueError(f"threshold {threshold!r}: the smallest rise that counts, a "
                             "fraction >= 0 (0.05 = 5%)")
        period = _positive_ns(since, "since")
        now = time.time_ns()
        mid = now - period
        sql = (f"SELECT pod, module, op_name, start_ns >= {mid} AS current, uniqExact(capture_id), "
               "sum(zero_count), sumMap(bin_index, bin_count) FROM "
               f"{self._table('kernel_rollups')} WHERE {_where(now - 2 * period, _pod(pod), {})} "
               f"AND start_ns < {now} GROUP BY pod, module, op_name, current")
        groups: Dict[Tuple[str, str, str], _Regression] = {}
        for pod_, module, kernel, current, captures, zero, bins in self._rows(sql):
            g = groups.setdefault((pod_, module, kernel), _Regression(pod_, module, kernel))
            if current:
                g.candidate, g.candidate_captures = _Sketch.of(zero, bins), captures
            else:
                g.baseline, g.baseline_captures = _Sketch.of(zero, bins), captures
        # The CLI walks its groups in key order (a std::map), then sorts them stably: ties keep
        # that order.
        judged = [groups[k].judged(float(threshold)) for k in sorted(groups)
                  if groups[k].baseline.count and groups[k].candidate.count]
        return _frame(REGRESSION_COLUMNS, [r.row() for r in sorted(judged, key=_Regression.key)])

    # --- ClickHouse ---------------------------------------------------------------------------

    def _table(self, name: str) -> str:
        # The `_all` tables hold every shard's rows (a Merge or Distributed table).
        return f"{self.database}.{name}_all"

    def _rows(self, sql: str, *, regex: Optional[str] = None) -> List[Sequence[Any]]:
        client = self._connect()
        try:
            return list(client.query(sql).result_rows)
        except Exception as e:
            if not _from_library(e):
                raise
            raise self._error(e, regex) from e

    def _connect(self) -> "Client":
        if self._client is None:
            try:
                self._client = _client(self._host, self._port, self.user, self._password,
                                       self.timeout)
            except Exception as e:
                if not _from_library(e):
                    raise  # ImportError with the pip command, ServerError, a bug
                raise self._error(e, None) from e
        return self._client

    def _error(self, e: Exception, regex: Optional[str]) -> errors.PodprofError:
        """clickhouse-connect's exception `e` as one of podprof.errors' kinds, as the CLI
        sorts ClickHouse's answers (fleet/clickhouse.cc)."""
        code = getattr(e, "code", None)
        text = str(e)
        if not isinstance(code, int):
            found = re.search(r"\bCode:\s*(\d+)", text)
            code = int(found.group(1)) if found else None
        status = re.search(r"HTTP status (\d+)", text)
        if code is None and status is None:
            # No answer from ClickHouse at all: refused, reset, timed out, no such host.
            reason = _cause(e)
            if reason == "timed out":
                return errors.UnreachableError(f"ClickHouse at {self.url}: no answer within "
                                               f"{math.ceil(self.timeout)} s (timeout=)")
            return errors.UnreachableError(f"cannot reach ClickHouse at {self.url}: {reason}")
        what = f"ClickHouse at {self.url}: {_exception_text(text)}" + \
            (f" (code {code})" if code is not None else "")
        err: errors.PodprofError
        if code in _REFUSED or (status is not None and status.group(1) in ("401", "403")):
            err = errors.RefusedError(f"{what} (user {self.user!r}: check user= and its "
                                      "password, or the user's rights on the database)")
        elif code in _MISSING:
            err = errors.NotFoundError(f"{what} (does database {self.database!r} hold the "
                                       "fleet's tables? an aggregator with [fleet] makes them)")
        elif code == 427 and regex is not None:
            err = errors.BadRequestError(f"regex {regex!r} is not a regular expression: {what}")
        elif code in _BAD_REQUEST:
            err = errors.BadRequestError(what)
        else:
            err = errors.ServerError(what)
        err.status = int(status.group(1)) if status else None
        return err


# --- arguments, as the CLI reads them ------------------------------------------------------

def _parse_url(url: str) -> Tuple[str, str, int]:
    """(the URL as messages name it, host, port) of http://host[:port], as
    fleet/clickhouse.cc's ClickHouse::Create reads it (a path is ignored)."""
    if not url:
        raise ValueError("url: no ClickHouse to ask: give url='http://host:8123' or set "
                         "$PODPROF_CLICKHOUSE")
    if not isinstance(url, str) or not url.startswith("http://"):
        raise ValueError(f"url {url!r} is not http://host:port (ClickHouse's HTTP interface)")
    rest = url[len("http://"):].split("/", 1)[0]
    if "@" in rest:
        raise ValueError(f"url {url!r} carries credentials: give user= and password= instead")
    host, port = rest, "8123"
    if ":" in rest:
        host, port = rest.rsplit(":", 1)
        if not port.isdigit() or not 0 < int(port) <= 65535:
            raise ValueError(f"url {url!r} has a bad port {port!r}")
    if not host:
        raise ValueError(f"url {url!r} names no host")
    return f"http://{host}:{int(port)}", host.strip("[]"), int(port)


def _password(password: Optional[str], password_file: Optional[Union[str, "os.PathLike[str]"]]
              ) -> str:
    if password is not None and password_file is not None:
        raise ValueError("give password= or password_file=, not both")
    if password is not None:
        return password
    path = password_file if password_file is not None else \
        os.environ.get("PODPROF_CLICKHOUSE_PASSWORD_FILE")
    if not path:
        return os.environ.get("PODPROF_CLICKHOUSE_PASSWORD", "")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().rstrip()  # as the CLI: trailing whitespace (the newline) is not in it
    except OSError as e:
        raise ValueError(f"password_file {os.fspath(path)!r}: {e.strerror or e}") from e


_UNIT_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9,
            "h": 3600 * 10**9, "d": 86400 * 10**9}


def _positive_ns(value: Since, what: str) -> int:
    """A duration ("30d", "1.5h", "500ms", or a timedelta) in ns, read as the CLI's
    ParseDurationNs (common/clock.cc) reads it; ValueError naming `what` unless positive."""
    if isinstance(value, datetime.timedelta):
        ns = int(pd.Timedelta(value).value)  # keeps a pandas Timedelta's nanoseconds
    elif isinstance(value, str):
        ns = _parse_duration(value, what)
    else:
        raise ValueError(f"{what} {value!r}: give a duration such as '30d' or a timedelta")
    if ns <= 0:
        raise ValueError(f"{what} {value!r} must be positive")
    return ns


def _parse_duration(text: str, what: str) -> int:
    m = re.fullmatch(r"([+-]?)([0-9]+)(?:\.([0-9]+))?(ns|us|ms|s|m|h|d)", text)
    if not m:
        raise ValueError(f"{what} {text!r} is not a duration: a number and a unit "
                         "(use ns, us, ms, s, m, h, d)")
    unit = _UNIT_NS[m.group(4)]
    fraction = 0.0
    for digit in reversed(m.group(3) or ""):  # as common/clock.cc, from the last digit in
        fraction = (fraction + int(digit)) / 10
    ns = int(m.group(2)) * unit + _llround(fraction * unit)
    if ns >= 2**63:
        raise ValueError(f"{what} {text!r} is out of range")
    return -ns if m.group(1) == "-" else ns


def _since_ns(since: Since) -> int:
    return time.time_ns() - _positive_ns(since, "since")


def _pod(pod: Optional[str]) -> str:
    if pod is not None and not isinstance(pod, str):
        raise ValueError(f"pod {pod!r} must be a pod's name")
    return pod or ""


def _labels(labels: Optional[Labels]) -> Dict[str, str]:
    """`labels` as the CLI's ParseLabels (cli/capture_rows.cc) reads --label key=value."""
    if labels is None:
        return {}
    if isinstance(labels, Mapping):
        out = {}
        for k, v in labels.items():
            if not isinstance(k, str) or not k or not isinstance(v, str):
                raise ValueError(f"labels: bad label {k!r}: {v!r}: want non-empty str keys, "
                                 "str values")
            out[k] = v
        return out
    out = {}
    for pair in [labels] if isinstance(labels, str) else labels:
        key, eq, value = pair.partition("=") if isinstance(pair, str) else ("", "", "")
        if not eq or not key:
            raise ValueError(f"labels: bad label {pair!r}: want key=value with a non-empty key")
        if key in out:
            raise ValueError(f"labels: label {key!r} given twice")
        out[key] = value
    return out


# --- the SQL: fleet/queries.cc's ----------------------------------------------------------

_TOP_BY = {"kernel": ("'', '', module, op_name", "module, op_name"),
           "pod": ("pod, '', '', ''", "pod"),
           "host": ("pod, host, '', ''", "pod, host")}


def _quote(text: str) -> str:
    """`text` as a ClickHouse string literal, as fleet/clickhouse.cc's Quote()."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _where(since_ns: int, pod: str, labels: Mapping[str, str]) -> str:
    conds = [f"start_ns >= {max(0, since_ns)}"]
    if pod:
        conds.append(f"pod = {_quote(pod)}")
    # In key order, as the CLI's std::map gives them (code point order is UTF-8 byte order).
    for k in sorted(labels):
        conds.append(f"label_values[indexOf(label_keys, {_quote(k)})] = {_quote(labels[k])}")
    return " AND ".join(conds)


# --- sketches and verdicts: trace/ddsketch.h and insight/change.h in Python -------------------

def _exp2(x: float) -> float:
    # libm's exp2, as the C++ calls it (Python 3.11+); pow() where older Pythons lack it.
    f: Optional[Callable[[float], float]] = getattr(math, "exp2", None)
    return f(x) if f is not None else 2.0 ** x


_GAMMA = _exp2(1.0 / 64.0)
_RELATIVE_ERROR = (_GAMMA - 1) / (_GAMMA + 1)


def _llround(x: float) -> int:
    """C's llround: halves away from zero (Python's round() takes them to even)."""
    whole = math.floor(abs(x))
    n = whole + 1 if abs(x) - whole >= 0.5 else whole
    return -n if x < 0 else n


def _mean(total_ps: int, count: int) -> float:
    # Each converted to a double first, as the CLI's MeanPs (Python's int / int is exact).
    return float(total_ps) / float(count) if count > 0 else 0.0


@dataclass(frozen=True)
class _Sketch:
    """A DDSketch from its zero count and (index, count) bins, for its quantiles."""

    zero: int = 0
    bins: Tuple[Tuple[int, int], ...] = ()
    count: int = 0  # zero and every bin's

    @staticmethod
    def of(zero: int, bins: Sequence[Sequence[int]]) -> "_Sketch":
        """From sum(zero_count) and sumMap(bin_index, bin_count) (two parallel arrays)."""
        indices, counts = bins
        if len(indices) != len(counts):
            raise errors.ServerError(f"sketch bins: {len(indices)} indices but {len(counts)} "
                                     "counts")
        merged: Dict[int, int] = {}
        for i, c in zip(indices, counts):
            if c:
                merged[int(i)] = merged.get(int(i), 0) + int(c)
        return _Sketch(int(zero), tuple(sorted(merged.items())), int(zero) + sum(merged.values()))

    def quantile(self, q: float) -> float:
        """The value at rank floor(q (count - 1)), as DDSketch::Quantile."""
        if self.count == 0:
            return 0.0
        rank = int(min(max(q, 0.0), 1.0) * float(self.count - 1))
        if rank < self.zero:
            return 0.0
        seen = self.zero
        for index, c in self.bins:
            seen += c
            if seen > rank:
                return _value_of(index)
        return _value_of(self.bins[-1][0])


def _value_of(index: int) -> float:
    # The point of bucket (gamma^(i-1), gamma^i] equally far, relatively, from both ends.
    return 2.0 * _exp2(index / 64.0) / (_GAMMA + 1.0)


def _shift(baseline: _Sketch, candidate: _Sketch, q: float, spread_q: float,
           threshold: float) -> Tuple[float, bool]:
    """(change, regressed) of quantile `q`, as insight/change.cc's Shift."""
    floor = max(threshold, 2 * _RELATIVE_ERROR)
    b, c = baseline.quantile(q), candidate.quantile(q)
    change = c / b - 1 if b > 0 and c > 0 else 0.0
    return change, change > floor and c > baseline.quantile(spread_q)


@dataclass
class _Regression:
    pod: str
    module: str
    kernel: str
    baseline: _Sketch = field(default_factory=_Sketch)
    candidate: _Sketch = field(default_factory=_Sketch)
    baseline_captures: int = 0
    candidate_captures: int = 0
    p50: Tuple[float, bool] = (0.0, False)
    p99: Tuple[float, bool] = (0.0, False)

    def judged(self, threshold: float) -> "_Regression":
        self.p50 = _shift(self.baseline, self.candidate, 0.5, 0.9, threshold)
        self.p99 = _shift(self.baseline, self.candidate, 0.99, 0.999, threshold)
        return self

    def key(self) -> Tuple[int, float]:
        """The CLI's order: regressions first, then the larger of the two changes, largest
        first."""
        return (0 if self.p50[1] or self.p99[1] else 1, -max(self.p50[0], self.p99[0]))

    def row(self) -> Tuple[Any, ...]:
        b, c = self.baseline, self.candidate
        return (self.pod, self.kernel, self.module, self.baseline_captures,
                self.candidate_captures, _llround(b.quantile(0.5)), _llround(c.quantile(0.5)),
                _llround(b.quantile(0.99)), _llround(c.quantile(0.99)), self.p50[0], self.p99[0],
                self.p50[1], self.p99[1])


# --- std::sort, as libstdc++ does it ------------------------------------------------------

def _frame(columns: Sequence[str], rows: List[Tuple[Any, ...]]) -> pd.DataFrame:
    """`rows` as a frame of `columns`, typed by what each holds."""
    return pd.DataFrame({name: _series(name, [r[i] for r in rows])
                         for i, name in enumerate(columns)})


def _series(name: str, values: List[Any]) -> "pd.Series[Any]":
    if name in _TEXT:
        return pd.Series(values, dtype=str)
    if name in _INSTANTS:
        return pd.Series(pd.to_datetime(pd.Series(values, dtype="int64"), unit="ns", utc=True))
    if name.endswith("_change"):
        return pd.Series(values, dtype="float64")
    if name.endswith("_regressed"):
        return pd.Series(values, dtype=bool)
    return pd.Series(values, dtype="int64")


# --- clickhouse-connect -----------------------------------------------------------------------

def _client(host: str, port: int, user: str, password: str, timeout: float) -> "Client":
    """A clickhouse-connect client of the server; ImportError with the pip command without it."""
    try:
        import clickhouse_connect
        from clickhouse_connect.driver.exceptions import DatabaseError
    except ImportError as e:
        raise ImportError(f"podprof.fleet needs clickhouse-connect: {_INSTALL}") from e
    seconds = max(1, math.ceil(timeout))
    options: Dict[str, Any] = dict(
        host=host, port=port, username=user, password=password, interface="http",
        connect_timeout=seconds, send_receive_timeout=seconds,
        # No server-side session: each query stands alone (as the CLI's), and a Fleet used
        # from two threads does not trip over a session held by the other.
        autogenerate_session_id=False)
    try:
        return clickhouse_connect.get_client(**options)
    except DatabaseError as e:
        if not _is_old_server(e):
            raise
    try:
        return _old_server_client(options)
    except DatabaseError as e:
        if not _is_old_server(e):
            raise
        raise errors.ServerError(_TOO_OLD + f"; clickhouse-connect {clickhouse_connect.__version__}"
                                 f" still asks for it: {e}") from e


def _is_old_server(e: Exception) -> bool:
    # On connect clickhouse-connect reads `SELECT name, value, readonly FROM system.settings`;
    # servers before ClickHouse 20 (Debian 12 ships 18.16) have no `readonly` column there:
    # "Code: 47, e.displayText() = DB::Exception: Unknown identifier: readonly".
    text = str(e)
    return "readonly" in text and (getattr(e, "code", None) == 47 or "Code: 47" in text)


_TOO_OLD = "this ClickHouse predates version 20 (its system.settings has no readonly column)"
_SETTINGS_QUERY = "SELECT name, value, readonly FROM system.settings LIMIT 10000"
# The same answer from an older server: every setting is read-only for a readonly = 1 user,
# none for the others (readonly = 2 lets a user change settings for its queries).
_OLD_SETTINGS_QUERY = ("SELECT name, value, toUInt8((SELECT value FROM system.settings WHERE "
                       "name = 'readonly') = '1') AS readonly FROM system.settings LIMIT 10000")


def _old_server_client(options: Dict[str, Any]) -> "Client":
    """clickhouse-connect's HTTP client with its connect-time settings query answered in a form
    that ClickHouse before 20 understands; the rest of the library is used as it is.

    No option of clickhouse-connect 1.12 skips that query, so this replaces it, and only it,
    through the library's internal operation hook (clickhouse_connect.driver._backend). With a
    version of the library that lacks the hook, or no longer asks through it, ServerError
    says so.
    """
    try:
        from clickhouse_connect.driver._backend.operations import Operation, QueryOp
        from clickhouse_connect.driver.httpclient import HttpClient
    except ImportError as e:
        raise errors.ServerError(f"{_TOO_OLD}, and this clickhouse-connect has no way to "
                                 f"talk to it: {e}") from e

    class OldServerClient(HttpClient):
        def _execute_operation(self, operation: Operation) -> object:
            if isinstance(operation, QueryOp) and operation.text == _SETTINGS_QUERY:
                operation = QueryOp(_OLD_SETTINGS_QUERY, operation.settings)
            return super()._execute_operation(operation)

    o = dict(options)
    return OldServerClient("http", o.pop("host"), o.pop("port"), o.pop("username"),
                           o.pop("password"), None, **{k: v for k, v in o.items()
                                                       if k != "interface"})


def _from_library(e: Exception) -> bool:
    """Whether clickhouse-connect raised `e` for what the server or the network did."""
    return type(e).__module__.startswith("clickhouse_connect.")


def _exception_text(text: str) -> str:
    """ClickHouse's message without its frame, as fleet/clickhouse.cc's ExceptionText: old
    servers say "Code: N, e.displayText() = DB::Exception: MESSAGE, e.what() = ...", new ones
    "Code: N. DB::Exception: MESSAGE. (NAME) (version ...)"."""
    at = text.find("DB::Exception: ")
    if at >= 0:
        text = text[at + len("DB::Exception: "):]
    for end in (", e.what() =", " (version", " (for url "):
        cut = text.find(end)
        if cut >= 0:
            text = text[:cut]
    return text.strip()


def _cause(e: BaseException) -> str:
    # clickhouse-connect wraps urllib3's error, which wraps the socket's: the innermost says it.
    inner = e
    while (outer := inner.__cause__ or inner.__context__) is not None:
        inner = outer
    reason = str(inner) or type(inner).__name__
    if isinstance(inner, ConnectionRefusedError) or "Connection refused" in reason:
        return "connection refused (is ClickHouse's http_port there?)"
    if isinstance(inner, TimeoutError) or "timed out" in reason:
        return "timed out"
    return reason
