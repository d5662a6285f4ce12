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
the aggregator, once the last 8 step gaps lie within 20% of their median (compilation and
warm-up left out; `steady=` and `tolerance=` set them), for `steps + 1` of those steps from a
predicted boundary. Nothing here ever waits on it inside a step: a step boundary costs a clock
read, a list append and, on process 0 until it asks, a look at the last few gaps; the request
runs on a thread of its own, and an aggregator that refuses or cannot be reached, or a capture
that fails, is warned about with its reason (`c.error`, raised by `c.kernels()`) and the job
carries on.
"""
from __future__ import annotations

import os
import threading
import time
import tomllib
import warnings
from pathlib import Path
from types import TracebackType
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Type, Union

import pandas as pd

from . import errors
from .client import CaptureHandle, Client, Duration, duration_s

# The agent's own default for [workload] profiler (deploy/agent.toml).
_AGENT_DEFAULT_PORT = 9999
# Step boundaries kept to tell the step time before a request (the median of the last few).
_KEPT_BOUNDARIES = 16
# capture()'s defaults: the steady steps it waits for (their gaps all within the tolerance, a
# fraction, of their median) before it estimates the step time and asks.
STEADY_STEPS = 8
STEADY_TOLERANCE = 0.2
# A loop whose steps never hold steady (a loaded host, an input pipeline that stalls) is not
# left without a capture: after this many times `steady` boundaries, process 0 asks with the
# last `steady` gaps anyway (compilation long behind it), and says so in `warnings`.
UNSTEADY_PATIENCE = 4
# The pause before the one retry of a capture whose agent could not reach the job's profiler.
RETRY_PAUSE_S = 2.0


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

    Compilation and warm-up are left out: process 0 asks only once the last `steady` step gaps
    all lie within `tolerance` (a fraction) of their median, estimates the step time from those
    gaps alone (a least-squares line through their boundaries: period and phase), and asks for
    a window of `steps + 1` such steps starting on the first predicted boundary at least `lead`
    ahead (the aggregator needs time to reach every agent: about 0.3 s plus 6 ms a host). Steps
    that never hold steady are asked with after UNSTEADY_PATIENCE times `steady` boundaries,
    from the last `steady` gaps, and `warnings` says so.

    `aggregator` is a Client or its URL; `labels`, `hosts` and `selector` go to the capture as
    `podprof capture` takes them. `process_index` overrides jax.process_index() (only process 0
    asks). A capture that is refused or fails is warned about (RuntimeWarning) with its reason,
    held in `error`, and raised by `kernels()`; one whose agent could not reach this job's
    profiler (often the agent's connection still backing off after an earlier failure) is asked
    once more, with a fresh request, while the loop runs.
    """

    def __init__(self, aggregator: Union[str, Client], steps: int = 3, *,
                 labels: Optional[Mapping[str, str]] = None,
                 hosts: Optional[Sequence[str]] = None,
                 selector: Optional[Mapping[str, str]] = None, lead: Duration = "1s",
                 steady: int = STEADY_STEPS, tolerance: float = STEADY_TOLERANCE,
                 process_index: Optional[int] = None) -> None:
        if steps < 1:
            raise ValueError(f"steps={steps}: capture at least one step")
        if steady < 2:
            raise ValueError(f"steady={steady}: wait for at least two steady steps")
        if not 0 < tolerance < 1:
            raise ValueError(f"tolerance={tolerance}: a fraction of the step time, in (0, 1)")
        self._aggregator = aggregator
        self.steps = steps
        self.steady = steady
        self.tolerance = tolerance
        self.labels = dict(labels or {})
        self._hosts, self._selector = hosts, selector
        self._lead_s = duration_s(lead, "lead")
        self._process_index = process_index
        self._all_boundaries: List[int] = []
        self._leader = False
        self._asked = False
        self._armed = False
        self._thread: Optional[threading.Thread] = None
        self._requested = threading.Event()
        self.handle: Optional[CaptureHandle] = None
        # The predicted boundary process 0 asked the window to start on (Unix ns).
        self.requested_start_ns: Optional[int] = None
        self._asked_at_ns = 0
        # The step time the request was sized with (ns), from steady steps only.
        self.estimated_step_ns: Optional[int] = None
        self.error: Optional[BaseException] = None
        # What was warned about (RuntimeWarning), in order: a failure, a retry, a moved estimate.
        self.warnings: List[str] = []
        self.attempts = 0
        self.client: Optional[Client] = None

    # --- in the loop ---------------------------------------------------------------------------

    def __enter__(self) -> "capture":
        if self._process_index is None:
            import jax
            self._process_index = jax.process_index()
        self._leader = self._process_index == 0
        self._armed = True
        _arm(self)
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        _disarm(self)
        self._armed = False
        if self._leader and not self._asked and kind is None:
            self._warn(f"podprof: no capture: {self._why_not_asked()}")

    def step(self) -> None:
        """A step boundary (podprof.jax.step() and StepTraceAnnotation call it)."""
        now = time.time_ns()
        self._all_boundaries.append(now)
        if self._leader and not self._asked and len(self._all_boundaries) > self.steady:
            steady = self._steady_run()
            if steady is None and len(self._all_boundaries) > UNSTEADY_PATIENCE * self.steady:
                steady = self._all_boundaries[-self.steady - 1:]
                # Kept on the handle, not warned: the window and the moved-estimate check that
                # follows it say how far off the steps were.
                self.warnings.append(
                    f"podprof: the steps never held within {self.tolerance:.0%} of their median "
                    f"for {self.steady} steps; asked after {len(self._all_boundaries)} "
                    f"boundaries with the last {self.steady} gaps")
            if steady is not None:
                self._asked = True
                self._thread = threading.Thread(target=self._run, args=(steady,),
                                                name="podprof-capture", daemon=True)
                self._thread.start()

    def _steady_run(self) -> Optional[List[int]]:
        """The last `steady` + 1 boundaries when their gaps all lie within the tolerance of
        their median, else None."""
        b = self._all_boundaries[-self.steady - 1:]
        if len(b) <= self.steady:
            return None
        gaps = [later - earlier for earlier, later in zip(b, b[1:])]
        middle = sorted(gaps)[len(gaps) // 2]
        bound = self.tolerance * middle
        return b if middle > 0 and all(abs(g - middle) <= bound for g in gaps) else None

    def _run(self, steady: List[int]) -> None:
        """On its own thread: the request, the capture followed to its end, one retry."""
        try:
            for attempt in (1, 2):
                if attempt == 2:
                    time.sleep(RETRY_PAUSE_S)
                    steady = self._steady_run() or steady
                if not self._request(steady):
                    return
                if self._follow(retry=attempt == 1):
                    return
        finally:
            self._requested.set()

    def _request(self, steady: List[int]) -> bool:
        """Asks for the window on a predicted boundary; False (warned, `error` set) when the
        aggregator refuses or cannot be reached."""
        step_ns, last_ns = _fit(steady)
        self.estimated_step_ns = step_ns
        earliest = max(time.time_ns(), steady[-1]) + int(self._lead_s * 1e9)
        start_ns = last_ns + max(1, -(-(earliest - last_ns) // step_ns)) * step_ns
        self.requested_start_ns = start_ns
        self._asked_at_ns = steady[-1]
        self.attempts += 1
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
            self._warn(f"podprof: no capture ({e}); the job carries on")
            return False
        finally:
            self._requested.set()
        return True

    def _follow(self, retry: bool) -> bool:
        """Follows the capture to its end; False when it failed and is worth asking again."""
        assert self.handle is not None
        try:
            status = self.handle.wait()
        except (errors.PodprofError, OSError) as e:
            self.error = e
            self._warn(f"podprof: capture {self.handle.id} could not be followed ({e})")
            return True
        if status not in ("failed", "cancelled"):
            self.error = None
            self._check_estimate()
            return True
        reason = self.handle.error or "no reason given"
        self.error = errors.CaptureFailedError(f"capture {self.handle.id} {status}: {reason}",
                                               capture=self.handle.id)
        if retry and status == "failed" and _unreachable(reason) and self._armed:
            self._warn(f"podprof: {self.error}; asking once more in {RETRY_PAUSE_S:g} s with a "
                       "fresh request (the agent's connection to this job's profiler may still "
                       "be backing off after an earlier failure)")
            return False
        self._warn(f"podprof: {self.error}; the job carries on")
        return True

    def _check_estimate(self) -> None:
        """Warns when the steps seen while waiting for the window, or inside it, moved away
        from the estimate the window was sized with."""
        assert self.handle is not None and self.estimated_step_ns is not None
        start = int(self.handle.start.value)
        end = start + int(self.handle.duration_ns)
        b = [t for t in self._all_boundaries if self._asked_at_ns <= t <= end]
        gaps = sorted(later - earlier for earlier, later in zip(b, b[1:]))
        if not gaps:
            return
        seen = gaps[len(gaps) // 2]
        if abs(seen - self.estimated_step_ns) > self.tolerance * self.estimated_step_ns:
            self._warn(f"podprof: the step time moved from {self.estimated_step_ns / 1e6:.3g} ms "
                       f"to {seen / 1e6:.3g} ms while the capture waited for its window: "
                       f"capture {self.handle.id} may not start on a step boundary nor hold "
                       f"{self.steps} steps (window_steps and boundary_offset_ns say how it "
                       "landed)")

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)

    def _why_not_asked(self) -> str:
        if not self._leader:
            return "this is not process 0, which asks for it"
        seen = len(self._all_boundaries)
        return (f"the loop ended after {seen} step boundaries, before {self.steady} steady steps "
                f"(consecutive gaps within {self.tolerance:.0%} of their median) were seen")

    # --- afterwards ----------------------------------------------------------------------------

    @property
    def asked(self) -> bool:
        """Whether this process asked for the capture (process 0, once its steps were steady)."""
        return self._asked

    @property
    def done(self) -> bool:
        """Whether process 0's capture, and its one retry, are over (False until it asks)."""
        return self._thread is not None and not self._thread.is_alive()

    def wait(self, timeout: Optional[Duration] = None) -> Optional[str]:
        """Waits for the request and then for the capture (and its one retry); its status, or
        None when there is none (another process asked, the loop ended before its steps were
        steady, or the aggregator refused or could not be reached: `error` says which)."""
        if self._thread is not None:
            self._thread.join(None if timeout is None else duration_s(timeout, "timeout"))
            if self._thread.is_alive():
                raise TimeoutError(f"the capture is not over after {timeout}")
        if self.handle is None:
            return None
        return self.handle.status

    @property
    def url(self) -> Optional[str]:
        """The capture's web page (on process 0; None elsewhere or without a capture)."""
        if self._thread is not None:
            self._requested.wait()
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
        """The step time: the estimate the window was sized with, once asked; before, the
        median of the last few steps."""
        if self.estimated_step_ns is not None:
            return self.estimated_step_ns
        b = self._all_boundaries[-_KEPT_BOUNDARIES:]
        gaps = sorted(later - earlier for earlier, later in zip(b, b[1:]))
        return max(1, gaps[len(gaps) // 2]) if gaps else None

    @property
    def boundary_offset_ns(self) -> Optional[int]:
        """How far the window's start is from the nearest step boundary this process saw (the
        aggregator's clock is the hosts' to within their correction); None without one."""
        if self.handle is None or not self._all_boundaries:
            return None
        start = int(self.handle.start.value)
        return min((b - start for b in self._all_boundaries), key=abs)

    def kernels(self, **kw: Any) -> pd.DataFrame:
        """The capture's kernel statistics (Client.kernels), once it is stored;
        podprof.CaptureFailedError (a RuntimeError) with the reason when there is none."""
        status = self.wait()
        if status is None or status in ("failed", "cancelled"):
            if isinstance(self.error, errors.CaptureFailedError):
                raise self.error
            raise errors.CaptureFailedError("no capture: " + (
                f"the aggregator refused or was away ({self.error})" if self.error else
                self._why_not_asked()))
        assert self.handle is not None
        return self.handle.kernels(**kw)


def _fit(boundaries: Sequence[int]) -> Tuple[int, int]:
    """The step time and the fitted instant of the last boundary: a least-squares line through
    steady boundaries (their jitter averaged, where the last alone would carry its own)."""
    n = len(boundaries)
    origin = boundaries[0]
    xs = range(n)
    mean_x = (n - 1) / 2
    mean_y = sum(b - origin for b in boundaries) / n
    slope = (sum((x - mean_x) * (b - origin - mean_y) for x, b in zip(xs, boundaries))
             / sum((x - mean_x) ** 2 for x in xs))
    step_ns = max(1, round(slope))
    return step_ns, origin + round(mean_y + slope * (n - 1 - mean_x))


def _unreachable(reason: str) -> bool:
    text = reason.lower()
    return "unreachable" in text or "unavailable" in text


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
