"""The fleet store in ClickHouse from Python: `podprof fleet history|top|regressions` as DataFrames.

podprof answers the fleet's questions in one place, fleet/queries.cc (docs/FLEET.md); `Fleet`
asks it, and computes nothing itself:

- through an aggregator that replicates to the fleet store (its `[fleet]`), over its HTTP API:
  `Fleet(aggregator="http://127.0.0.1:7180")`, or `Client.fleet()` for one already made (TLS
  included). The routes are GET /api/v1/fleet/history, /top and /regressions (docs/HTTP.md);
- or, without an aggregator, from ClickHouse itself by running the `podprof` binary:
  `Fleet("http://clickhouse:8123", ...)` runs `podprof fleet ... --format json`.

Either way the frame holds what `podprof fleet ... --format csv` prints: the same columns in
the same order, the same rows in the same order, the same values, typed (picoseconds and counts
as int64, capture starts as datetime64[ns, UTC], names and ids as strings, verdicts as bool,
changes as the full doubles of `--format json`). (`podprof fleet status` asks an aggregator
about its replication and is not here.)
"""
from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
import warnings
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Union

import pandas as pd

from . import errors

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Fleet"]

Since = Union[str, datetime.timedelta]
Labels = Union[Mapping[str, str], Sequence[str]]

# The columns `podprof fleet ... --format csv` prints (report/fleet_rows.cc), in its order.
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

_DEFAULT_DATABASE = "podprof"
_DEFAULT_TIMEOUT_S = 30.0
# cli/exit_codes.h: what a failed `podprof fleet` says by its exit status.
_EXIT_BAD_INPUT, _EXIT_UNREACHABLE, _EXIT_DENIED = 2, 3, 4


class Fleet:
    """The fleet store, asked through an aggregator or through the `podprof` binary.

    With `aggregator` (its HTTP address, or a podprof.Client), the aggregator's /api/v1/fleet
    routes answer from the ClickHouse its `[fleet]` names; the other arguments but `timeout`
    are then not given.

    Without it, `url` is ClickHouse's HTTP interface and the arguments mirror `podprof fleet`'s
    flags and, where one is not given, the same environment: `url` ($PODPROF_CLICKHOUSE),
    `user` ($PODPROF_CLICKHOUSE_USER), the password from `password`, else `password_file`
    ($PODPROF_CLICKHOUSE_PASSWORD_FILE), else $PODPROF_CLICKHOUSE_PASSWORD; `database`
    (default "podprof"). A read-only user (profile setting readonly = 2) will do. `podprof` is
    the binary to run, else $PODPROF_BIN, else `podprof` on the PATH. `timeout` is the seconds
    a question may take (default 30).

    Nothing is asked until the first question: an unreachable server raises
    podprof.errors.UnreachableError (a ConnectionError) there, refused credentials a
    RefusedError (a PermissionError), a bad argument a ValueError naming it.
    """

    def __init__(self, url: Optional[str] = None, *, user: Optional[str] = None,
                 password: Optional[str] = None,
                 password_file: Optional[Union[str, "os.PathLike[str]"]] = None,
                 database: str = _DEFAULT_DATABASE, timeout: float = _DEFAULT_TIMEOUT_S,
                 aggregator: Optional[Union[str, "Client"]] = None,
                 podprof: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
                not 0 < timeout < float("inf"):
            raise ValueError(f"timeout {timeout!r} must be a positive number of seconds")
        self.timeout = float(timeout)
        self._client: Optional["Client"] = None
        if aggregator is not None:
            given = [n for n, v in (("url", url), ("user", user), ("password", password),
                                    ("password_file", password_file), ("podprof", podprof))
                     if v is not None]
            if given or database != _DEFAULT_DATABASE:
                raise ValueError(f"aggregator= asks the aggregator's [fleet] ClickHouse: give "
                                 f"{', '.join(given) or 'database'}= only without it")
            self._client = aggregator if not isinstance(aggregator, str) else \
                _client_of(aggregator, self.timeout)
            self.url = self._client.url
            return
        self.url = _clickhouse_url(url or os.environ.get("PODPROF_CLICKHOUSE", ""))
        self.user = user or os.environ.get("PODPROF_CLICKHOUSE_USER") or "default"
        if password is not None and password_file is not None:
            raise ValueError("give password= or password_file=, not both")
        self._password = password
        self._password_file = password_file
        if not isinstance(database, str) or not re.fullmatch(r"[A-Za-z0-9_]+", database):
            raise ValueError(f"database {database!r} must be letters, digits and underscores")
        self.database = database
        self._binary = podprof

    def __repr__(self) -> str:
        if self._client is not None:
            return f"Fleet(aggregator={self.url!r})"
        return f"Fleet({self.url!r}, user={self.user!r}, database={self.database!r})"

    def close(self) -> None:
        """Nothing is held between questions; kept for `with Fleet(...)`."""

    def __enter__(self) -> "Fleet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the questions ------------------------------------------------------------------------

    def history(self, regex: str, *, since: Since = "30d", pod: Optional[str] = None,
                labels: Optional[Labels] = None) -> pd.DataFrame:
        """`podprof fleet history REGEX`: each matching kernel's figures per capture, per pod.

        `regex` is RE2 (a partial match) on the op name; `since` how far back capture starts go
        ("30d", "24h", or a timedelta); `pod` only that pod; `labels` only captures with every
        one of them ({"job": "train"} or ["job=train"]). Rows come in the CLI's order: by
        module, kernel, pod, start, capture.
        """
        if not isinstance(regex, str) or not regex:
            raise ValueError(f"regex {regex!r}: give the kernel op names to match (RE2)")
        pairs = _labels(labels)
        if self._client is not None:
            if any("," in p for p in pairs):
                raise ValueError(f"labels {pairs!r}: over an aggregator a label may not hold a "
                                 "comma (ask ClickHouse through the podprof binary instead)")
            answer = self._ask("history", {"regex": regex, "since": _since(since), "pod": pod,
                                           "label": ",".join(pairs) or None})
        else:
            args = ["history", regex, "--since", _since(since)] + _pod_flag(pod)
            answer = self._run(args + [a for p in pairs for a in ("--label", p)])
        return _frame(HISTORY_COLUMNS, answer["points"])

    def top(self, *, by: str = "kernel", since: Since = "24h", pod: Optional[str] = None,
            top: int = 20) -> pd.DataFrame:
        """`podprof fleet top`: where the fleet's kernel time went, most first.

        `by` is "kernel", "pod" or "host"; the columns a grouping does not use are empty
        strings, as the CLI prints them. At most `top` rows; `since` and `pod` as in history().
        """
        if by not in ("kernel", "pod", "host"):
            raise ValueError(f"by {by!r}: group by 'kernel', 'pod' or 'host'")
        if isinstance(top, bool) or not isinstance(top, int) or top < 1:
            raise ValueError(f"top {top!r}: the number of rows to return, at least 1")
        if self._client is not None:
            answer = self._ask("top", {"by": by, "since": _since(since), "pod": pod, "top": top})
        else:
            answer = self._run(["top", "--by", by, "--since", _since(since), "--top", str(top)] +
                               _pod_flag(pod))
        return _frame(TOP_COLUMNS, answer["rows"])

    def regressions(self, *, since: Since = "7d", pod: Optional[str] = None,
                    threshold: float = 0.05) -> pd.DataFrame:
        """`podprof fleet regressions`: per pod and kernel, [now - since, now) against the
        period before it, judged as docs/FLEET.md says (`threshold`: the smallest rise that
        counts, 0.05 = 5%). Regressions come first, largest change first; kernels seen in only
        one period are left out. The changes are full doubles, as `--format json` gives them
        (the CSV prints 6 significant digits).
        """
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or \
                not 0 <= threshold < float("inf"):
            raise ValueError(f"threshold {threshold!r}: the smallest rise that counts, a "
                             "fraction >= 0 (0.05 = 5%)")
        if self._client is not None:
            answer = self._ask("regressions", {"since": _since(since), "pod": pod,
                                               "threshold": repr(float(threshold))})
        else:
            answer = self._run(["regressions", "--since", _since(since), "--threshold",
                                repr(float(threshold))] + _pod_flag(pod))
        return _frame(REGRESSION_COLUMNS, answer["kernels"])

    # --- the two ways to the one implementation ------------------------------------------------

    def _ask(self, question: str, params: Dict[str, Any]) -> Dict[str, Any]:
        """GET /api/v1/fleet/QUESTION of the aggregator: its JSON."""
        assert self._client is not None
        answer: Dict[str, Any] = self._client._http.json("GET", f"/api/v1/fleet/{question}",
                                                         params)
        if answer.get("truncated"):
            warnings.warn(f"the aggregator cut its fleet {question} short at its row limit: "
                          "narrow since=, pod= or the regex", stacklevel=3)
        return answer

    def _run(self, args: List[str]) -> Dict[str, Any]:
        """`podprof fleet ARGS --format json` against ClickHouse: its JSON."""
        binary = _binary(self._binary)
        command = [binary, "fleet", *args, "--format", "json", "--clickhouse", self.url,
                   "--clickhouse-user", self.user, "--database", self.database]
        env = dict(os.environ)
        # The password never goes on the command line, where every user of the host sees it.
        env.pop("PODPROF_CLICKHOUSE_PASSWORD", None)
        env.pop("PODPROF_CLICKHOUSE_PASSWORD_FILE", None)
        if self._password is not None:
            env["PODPROF_CLICKHOUSE_PASSWORD"] = self._password
        elif self._password_file is not None:
            command += ["--clickhouse-password-file", os.fspath(self._password_file)]
        elif os.environ.get("PODPROF_CLICKHOUSE_PASSWORD_FILE"):
            command += ["--clickhouse-password-file",
                        os.environ["PODPROF_CLICKHOUSE_PASSWORD_FILE"]]
        elif os.environ.get("PODPROF_CLICKHOUSE_PASSWORD") is not None:
            env["PODPROF_CLICKHOUSE_PASSWORD"] = os.environ["PODPROF_CLICKHOUSE_PASSWORD"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env,
                                  timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired as e:
            raise errors.UnreachableError(f"ClickHouse at {self.url}: no answer within "
                                          f"{self.timeout:g} s (timeout=)") from e
        if done.returncode != 0:
            raise _error(done.returncode, done.stderr.strip() or f"exit status {done.returncode}",
                         self.user)
        try:
            answer: Dict[str, Any] = json.loads(done.stdout)
        except ValueError as e:
            raise errors.ServerError(f"{binary} fleet {args[0]} printed no JSON: {e}") from e
        return answer


# --- arguments ------------------------------------------------------------------------------

def _client_of(url: str, timeout: float) -> "Client":
    from .client import Client
    return Client(url, timeout=timeout)


def _clickhouse_url(url: str) -> str:
    """ClickHouse's http://host[:port], refused here when plainly not one (the binary checks
    the rest: fleet/clickhouse.cc)."""
    if not url:
        raise ValueError("url: no ClickHouse to ask: give url='http://host:8123' or set "
                         "$PODPROF_CLICKHOUSE (or aggregator= for an aggregator with [fleet])")
    if not isinstance(url, str) or not url.startswith("http://"):
        raise ValueError(f"url {url!r} is not http://host:port (ClickHouse's HTTP interface)")
    if "@" in url.split("/", 3)[2]:
        raise ValueError(f"url {url!r} carries credentials: give user= and password= instead")
    return url


def _binary(given: Optional[Union[str, "os.PathLike[str]"]]) -> str:
    """The podprof binary: `given`, else $PODPROF_BIN, else `podprof` on the PATH (a folder
    given or in $PODPROF_BIN, a build's bin/, is looked in for `podprof`)."""
    name = os.fspath(given) if given is not None else os.environ.get("PODPROF_BIN") or "podprof"
    if os.path.isdir(name):
        name = os.path.join(name, "podprof")
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"the podprof binary {name!r} is not there: give podprof= or set "
                                "$PODPROF_BIN, or ask an aggregator with [fleet] (aggregator=)")
    return found


def _since(value: Since) -> str:
    """A duration as the CLI and the API read it: "30d" as it is, a timedelta in ns."""
    if isinstance(value, datetime.timedelta):
        return f"{int(pd.Timedelta(value).value)}ns"
    if isinstance(value, str):
        return value
    raise ValueError(f"since {value!r}: give a duration such as '30d' or a timedelta")


def _pod_flag(pod: Optional[str]) -> List[str]:
    if pod is not None and not isinstance(pod, str):
        raise ValueError(f"pod {pod!r} must be a pod's name")
    return ["--pod", pod] if pod else []


def _labels(labels: Optional[Labels]) -> List[str]:
    """`labels` as key=value pairs, each key once."""
    if labels is None:
        return []
    if isinstance(labels, Mapping):
        pairs = []
        for k, v in labels.items():
            if not isinstance(k, str) or not k or not isinstance(v, str):
                raise ValueError(f"labels: bad label {k!r}: {v!r}: want non-empty str keys, "
                                 "str values")
            pairs.append(f"{k}={v}")
        return pairs
    pairs, keys = [], set()
    for pair in [labels] if isinstance(labels, str) else labels:
        key, eq, _ = pair.partition("=") if isinstance(pair, str) else ("", "", "")
        if not eq or not key:
            raise ValueError(f"labels: bad label {pair!r}: want key=value with a non-empty key")
        if key in keys:
            raise ValueError(f"labels: label {key!r} given twice")
        keys.add(key)
        pairs.append(pair)
    return pairs


def _error(status: int, stderr: str, user: str) -> errors.PodprofError:
    """A failed `podprof fleet` (exit `status`, its message on `stderr`) as one of
    podprof.errors' kinds."""
    message = stderr.splitlines()[-1] if stderr else stderr
    err: errors.PodprofError
    if status == _EXIT_UNREACHABLE:
        err = errors.UnreachableError(f"cannot reach ClickHouse: {message}")
    elif status == _EXIT_DENIED:
        err = errors.RefusedError(f"{message} (user {user!r}: check user= and its password, or "
                                  "the user's rights on the database)")
    elif status == _EXIT_BAD_INPUT:
        err = errors.BadRequestError(message)
    else:
        err = errors.ServerError(message)
    return err


# --- the frames -----------------------------------------------------------------------------

def _frame(columns: Sequence[str], rows: List[Mapping[str, Any]]) -> pd.DataFrame:
    """The answer's `rows` (JSON objects) as a frame of `columns`, typed by what each holds."""
    return pd.DataFrame({name: _series(name, [r[name] for r in rows]) for name in columns})


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
