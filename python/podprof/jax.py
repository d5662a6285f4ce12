"""podprof inside a JAX job: serve the profiler the agent reads, and capture the whole pod at
the job's own step boundaries.

    import podprof.jax
    podprof.jax.serve()
    with podprof.jax.capture("http://agg:7180", steps=3) as c:
        for batch in data:
            state = train_step(state, batch)
            podprof.jax.step()          # or jax.profiler.StepTraceAnnotation around the step
    c.kernels()

Every process of the job runs the same code; only the first (jax.process_index() == 0) asks
the aggregator, and nothing here ever waits on it inside a step: a step boundary costs a
clock read and a list append, the request runs on a thread of its own, and an aggregator
that cannot be reached is warned about once and the job carries on.
"""
from __future__ import annotations

import collections
import os
import threading
import time
import tomllib
import warnings
from pathlib import Path
from types import TracebackType
from typing import Any, Deque, Dict, List, Mapping, Optional, Sequence, Type, Union

import pandas as pd

from . import errors
from .client import CaptureHandle, Client, Duration, duration_s

# The agent's own default for [workload] profiler (deploy/agent.toml).
_AGENT_DEFAULT_PORT = 9999
# Step boundaries kept to estimate the step time (the median of the last few steps).
_KEPT_BOUNDARIES = 16


def profiler_port() -> int:
    """The port the host's agent reads the workload's profiler on: $PODPROF_PROFILER_PORT, else
    the first `[workload] profiler` address of the agent's configuration
    ($PODPROF_AGENT_CONFIG, else /etc/podprof/agent.toml), else the agent's default, 9999."""
    if os.environ.get("PODPROF_PROFILER_PORT"):
        return _port(os.environ["PODPROF_PROFILER_PORT"], "$PODPROF_PROFILER_PORT")
    path = Path(os.environ.get("PODPROF_AGENT_CONFIG", "/etc/podprof/agent.toml"))
    if path.is_file():
        try:
            profilers = tomllib.loads(path.read_text()).get("workload", {}).get("profiler")
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ValueError(f"{path}: {e}") from e
        if isinstance(profilers, list) and profilers:
            return _port(str(profilers[0]).rsplit(":", 1)[-1], f"{path} [workload] profiler")
    return _AGENT_DEFAULT_PORT


def _port(text: str, what: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{what} = {text!r}: want a port, 1 to 65535")
    return int(text)


def serve(port: Optional[int] = None) -> int:
    """Starts jax.profiler's server on `port` (default: profiler_port()) unless this process
    already serves one; returns the port asked for."""
    import jax
    from jax._src import profiler as jax_profiler

    port = profiler_port() if port is None else port
    if getattr(jax_profiler, "_profiler_server", None) is not None:
        return port  # already serving: JAX allows one server per process
    try:
        jax.profiler.start_server(port)
    except ValueError as e:  # started between the check and here, by another thread
        if "one profiler server" not in str(e):
            raise
    return port


class capture:
    """Asks for a pod-wide capture of `steps` steps starting at a step boundary, from inside the
    training loop (a context manager; see the module's docstring).

    `aggregator` is a Client or its URL; `labels`, `hosts` and `selector` go to the capture as
    `podprof capture` takes them. `lead` is how far ahead the window may start: the aggregator
    needs time to reach every agent (about 0.3 s plus 6 ms a host); the window is put on the
    first predicted step boundary at least that far away. `process_index` overrides
    jax.process_index() (only process 0 asks).
    """

    def __init__(self, aggregator: Union[str, Client], steps: int = 3, *,
                 labels: Optional[Mapping[str, str]] = None,
                 hosts: Optional[Sequence[str]] = None,
                 selector: Optional[Mapping[str, str]] = None, lead: Duration = "1s",
                 process_index: Optional[int] = None) -> None:
        if steps < 1:
            raise ValueError(f"steps={steps}: capture at least one step")
        self._aggregator = aggregator
        self.steps = steps
        self.labels = dict(labels or {})
        self._hosts, self._selector = hosts, selector
        self._lead_s = duration_s(lead, "lead")
        self._process_index = process_index
        self._boundaries: Deque[int] = collections.deque(maxlen=_KEPT_BOUNDARIES)
        self._all_boundaries: List[int] = []
        self._leader = False
        self._asked = False
        self._thread: Optional[threading.Thread] = None
        self.handle: Optional[CaptureHandle] = None
        # The predicted boundary process 0 asked the window to start on (Unix ns).
        self.requested_start_ns: Optional[int] = None
        self.error: Optional[BaseException] = None
        self.client: Optional[Client] = None

    # --- in the loop ---------------------------------------------------------------------------

    def __enter__(self) -> "capture":
        if self._process_index is None:
            import jax
            self._process_index = jax.process_index()
        self._leader = self._process_index == 0
        _arm(self)
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        _disarm(self)

    def step(self) -> None:
        """A step boundary (podprof.jax.step() and StepTraceAnnotation call it)."""
        now = time.time_ns()
        self._boundaries.append(now)
        self._all_boundaries.append(now)
        if self._leader and not self._asked and len(self._boundaries) >= 3:
            self._asked = True
            self._thread = threading.Thread(target=self._ask, args=(now, self._step_ns()),
                                            name="podprof-capture", daemon=True)
            self._thread.start()

    def _step_ns(self) -> int:
        b = list(self._boundaries)
        gaps = sorted(later - earlier for earlier, later in zip(b, b[1:]))
        return max(1, gaps[len(gaps) // 2])

    def _ask(self, boundary_ns: int, step_ns: int) -> None:
        """On its own thread: the capture request, its window on a predicted boundary."""
        ahead = -(-int(self._lead_s * 1e9) // step_ns)  # whole steps, at least the lead
        start_ns = boundary_ns + ahead * step_ns
        self.requested_start_ns = start_ns
        try:
            self.client = (self._aggregator if isinstance(self._aggregator, Client)
                           else Client(self._aggregator))
            # One step more than asked, so that `steps` whole steps fit whatever the boundary's
            # jitter. The instant itself, not a delay: the request's way to the aggregator
            # would move a delay by its latency.
            self.handle = self.client.start_capture(
                (self.steps + 1) * step_ns / 1e9, hosts=self._hosts, selector=self._selector,
                labels={"source": "podprof.jax", "steps": str(self.steps), **self.labels},
                start_ns=start_ns)
        except (errors.PodprofError, OSError, ValueError) as e:
            self.error = e
            warnings.warn(f"podprof: no capture ({e}); the job carries on", RuntimeWarning,
                          stacklevel=2)

    # --- afterwards ----------------------------------------------------------------------------

    @property
    def asked(self) -> bool:
        """Whether this process asked for the capture (process 0, once it saw 3 steps)."""
        return self._asked

    def wait(self, timeout: Optional[Duration] = None) -> Optional[str]:
        """Waits for the request and then for the capture; its status, or None when there is
        none (another process asked, or the aggregator could not be reached)."""
        if self._thread is not None:
            self._thread.join(None if timeout is None else duration_s(timeout, "timeout"))
        if self.handle is None:
            return None
        return self.handle.wait(timeout)

    @property
    def url(self) -> Optional[str]:
        """The capture's web page (on process 0; None elsewhere or without a capture)."""
        if self._thread is not None:
            self._thread.join()
        return self.handle.url if self.handle is not None else None

    @property
    def window_steps(self) -> int:
        """Step boundaries this process saw inside the capture's window."""
        if self.handle is None:
            return 0
        start = int(self.handle.start.value)
        end = start + int(self.handle.duration_ns)
        return sum(start <= b < end for b in self._all_boundaries)

    @property
    def step_time_ns(self) -> Optional[int]:
        """The step time, boundary to boundary (the median of the last few steps)."""
        return self._step_ns() if len(self._boundaries) >= 2 else None

    @property
    def boundary_offset_ns(self) -> Optional[int]:
        """How far the window's start is from the nearest step boundary this process saw (the
        aggregator's clock is the hosts' to within their correction); None without one."""
        if self.handle is None or not self._all_boundaries:
            return None
        start = int(self.handle.start.value)
        return min((b - start for b in self._all_boundaries), key=abs)

    def kernels(self, **kw: Any) -> pd.DataFrame:
        """The capture's kernel statistics (Client.kernels), once it is stored."""
        if self.wait() is None:
            raise RuntimeError("no capture: " + (
                f"the aggregator refused or was away ({self.error})" if self.error else
                "this is not process 0, which asks for it" if not self._leader else
                "the loop ended before three steps"))
        assert self.handle is not None
        return self.handle.kernels(**kw)


# --- the step boundary, from wherever the loop marks it ----------------------------------------

_active: List[capture] = []
_lock = threading.Lock()
_patched: Dict[str, Any] = {}


def step() -> None:
    """Marks a step boundary for the armed capture (nothing when none is armed)."""
    if _active:
        _active[-1].step()


def _arm(c: capture) -> None:
    with _lock:
        _active.append(c)
        if len(_active) == 1:
            _patch_step_annotation()


def _disarm(c: capture) -> None:
    with _lock:
        if c in _active:
            _active.remove(c)
        if not _active:
            _unpatch_step_annotation()


def _patch_step_annotation() -> None:
    """While a capture is armed, each jax.profiler.StepTraceAnnotation marks a boundary too:
    loops that annotate their steps for XProf need no change."""
    import jax

    cls = jax.profiler.StepTraceAnnotation
    original = cls.__init__

    def init(self: Any, name: str, **kwargs: Any) -> None:
        step()
        original(self, name, **kwargs)

    _patched["init"] = original
    setattr(cls, "__init__", init)


def _unpatch_step_annotation() -> None:
    import jax

    if "init" in _patched:
        setattr(jax.profiler.StepTraceAnnotation, "__init__", _patched.pop("init"))
