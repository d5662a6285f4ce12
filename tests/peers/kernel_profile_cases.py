"""Kernel-profiling XSpaces generated from a seed, and podprof held against XProf's own tools on
each: the differential generator of tests/peers/test_kernel_utilization.py.

Each seed chooses every layout choice a real capture can make: the generation (v6e, v7x) and
which dies were sampled (both, one, one without a cycle count); one to three kernels on
`XLA Ops`, `PALLAS Kernels` or `LLO Ops`, each run one to three times, back to back or apart;
per execution a `counters_<kernel>` line or none; where the line's events sit (at the
execution, zero wide at its start, inside it or at its end, before or after it) and whether
the time is on the line (`timestamp_ns`) or the events (`offset_ps`); each counter's id on the
event, on its metadata or absent (the metadata's id is the register); each value as a double,
uint64 or int64, now and then out of range (negative, NaN, past 2^64); or, instead of lines per
execution, periodic running totals on `counters_<n>` lines.

XProf 2.24.2's `kernel_utilization`, `utilization_viewer` and `perf_counters` read the file, and
`podprof inspect --executions --format json` reads it; `compare` says every difference that is
not on the documented list (docs/INTEROP.md, "XProf's per-kernel tool"), and asserts each
documented one: XProf's value and podprof's are both checked.

One case again, with the file and both tools' answers kept:
    .venv/bin/python3 tests/peers/kernel_profile_cases.py --seed 1234 --out /tmp/case
"""
import argparse
import collections
import json
import math
import random
import re
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2]
PS_PER_US = 1_000_000
CLOCK_HZ = {"v7x": 1.9e9, "v6e": 1.75e9}
DEVICE_TYPE = {"v7x": "TPU v7x", "v6e": "TPU v6 Lite"}
KERNEL_LINES = ("XLA Ops", "PALLAS Kernels", "LLO Ops")
KERNELS = ("fusion.1", "convolution.3", "flash_attention", "copy.7", "custom-call.2")
PROFILE_START_NS = 1_700_000_000_000_000_000
U64_MAX = 2.0 ** 64 - 1
# Figures within this of each other agree: XProf rounds to two decimals.
TOLERANCE = 0.0101
# How often each documented difference (docs/INTEROP.md) was met and asserted.
DOCUMENTED = collections.Counter()


def counter_ids(generation):
    """Register name -> id, from podprof's generated table (scripts/gen-perf-counter-ids.py)."""
    text = (SOURCE / f"trace/perf_counter_ids_{generation}.inc").read_text()
    return {name: int(i) for i, name in re.findall(r'\{(\d+)u, "([A-Z0-9_]+)"\}', text)}


IDS = {g: counter_ids(g) for g in ("v6e", "v7x")}
TC_BLOCK = "TC_TCS_TC_MISC_TCS_STATS_TCS_STATS_COUNTERS_UNPRIVILEGED_COUNT_"
PM_BLOCK = "PWRMGR_PWRMGR_TC_THROTTLE_CORE_DEBUG_STATS_UNPRIVILEGED_"
# The TensorCore counters the Utilization Viewer's rows read, by name after _COUNT_.
TC_COUNTERS = (
    [f"MXU_BUSY_{i}" for i in range(3)] + [f"XLU_BUSY_{i}" for i in range(3)]
    + ["SCALAR_ALU_INSTRUCTION_0", "SCALAR_ALU_INSTRUCTION_1", "VST_INSTRUCTION",
       "VLD_INSTRUCTION_0", "VLD_INSTRUCTION_1"]
    + [f"VECTOR_ALU_INSTRUCTION_{i}" for i in range(4)]
    + [f"VPU_VALU_{op}_OPS_{i}" for op in ("FADD", "FMUL", "MISC", "INT", "FMAC") for i in range(4)]
    + [f"MATMUL_{src}_MXU_{m}" for src in ("LMR_BF16", "VREG_BF16", "VREG_F32", "VREG_F8",
                                             "LMR_I8", "VREG_I8", "LMR_I4", "VREG_I4")
       for m in range(2)]
    + [f"MATPUSH_CYCLES_MXU_{m}" for m in range(2)]
    + [f"{x}_{i}" for x in ("PACKED_XLU", "ROTATE_PERMUTE_INSTRUCTION_XLU", "TRANSPOSE_XLU")
       for i in range(2)])
PM_COUNTERS = ("CLOCKS_SKIPPED", "EXT_THROTTLE_CLOCKS_SKIPPED", "LDIDT_DROOP_CLOCKS_SKIPPED")


def register(generation, block, name, die):
    """A register's id: v7x's per die (die 1 one stride up where the table lacks it)."""
    ids = IDS[generation]
    if generation == "v6e":
        return ids.get(f"VF_CHIP_{block}{name}")
    full = f"VF_CHIP_DIE{die}_{block}{name}"
    if full in ids:
        return ids[full]
    base = ids.get(f"VF_CHIP_DIE0_{block}{name}")
    return None if base is None else base + 0x20000000 * die


def hbm_registers(generation, die):
    """Some HBM read and write registers of `die`."""
    d = f"DIE{die}_" if generation == "v7x" else ""
    pattern = re.compile(rf"VF_CHIP_{d}HBM_\d+_(?:SS_)?HBMC_\d+_CMN_HI_FREQ_STATS_COUNTERS_"
                         r"UNPRIVILEGED_(RD_RESP|WR_REQ|PARTIAL_WRITE_REQ)_PS[01]$")
    regs = [(i, m.group(1)) for n, i in IDS[generation].items() if (m := pattern.match(n))]
    return sorted(regs)


class Plane:
    """One chip's `/device:TPU:0` plane being written."""

    def __init__(self, xspace, generation):
        self.space = xspace
        self.plane = xspace.planes.add()
        self.plane.name = "/device:TPU:0"
        self.stat("device_id", self.plane.stats.add()).int64_value = 0
        self.stat("device_type_string", self.plane.stats.add()).str_value = DEVICE_TYPE[generation]
        self.lines = {}

    def stat(self, name, target):
        for key, m in self.plane.stat_metadata.items():
            if m.name == name:
                target.metadata_id = key
                return target
        key = len(self.plane.stat_metadata) + 1
        self.plane.stat_metadata[key].id = key
        self.plane.stat_metadata[key].name = name
        target.metadata_id = key
        return target

    def meta(self, name, key=None):
        for m in self.plane.event_metadata.values():
            if m.name == name:
                return m
        key = key or 1_000_000 + len(self.plane.event_metadata)
        m = self.plane.event_metadata[key]
        m.id, m.name = key, name
        return m

    def kernel_line(self, name):
        if name not in self.lines:
            line = self.plane.lines.add()
            line.id, line.name = 100_000 + len(self.lines), name
            self.lines[name] = line
        return self.lines[name]


def put_value(stat, value, kind):
    if kind == "double":
        stat.double_value = float(value)
    elif kind == "uint64":
        stat.uint64_value = int(value)
    else:
        stat.int64_value = int(value)


def clamp(value):
    """What both tools read of a counter_value: negative and NaN as 0, past 2^64 as 2^64 - 1."""
    if not value > 0:
        return 0.0
    return min(float(value), U64_MAX)


class Case:
    """One generated capture: the XSpace, and what it holds (for the checks)."""

    def __init__(self, seed, xspace_class):
        self.seed = seed
        self.rng = random.Random(seed)
        self.xspace = xspace_class()
        rng = self.rng
        self.generation = rng.choice(("v6e", "v7x"))
        self.clock = CLOCK_HZ[self.generation]
        self.periodic = rng.random() < 0.1
        self.dies = [0] if self.generation == "v6e" else [0, 1]
        # Which dies count: "both", one not sampled at all, one without its cycle count.
        self.die_mode = "both" if self.generation == "v6e" else rng.choice(
            ("both", "both", "die1_unsampled", "die0_unsampled", "die1_no_cycles"))
        self.time_on_line = rng.random() < 0.5
        self.plane = Plane(self.xspace, self.generation)
        self.executions = []  # (kernel, line, start_ps, duration_ps)
        self.lines = []  # per counters line: {kernel, execution index, counts, layout...}
        self.notes = []
        self.build()

    # --- the timeline -------------------------------------------------------------------

    def build(self):
        rng = self.rng
        names = rng.sample(KERNELS, rng.randint(1, 3))
        kernel_line = {k: rng.choice(KERNEL_LINES) for k in names}
        runs = [k for k in names for _ in range(rng.randint(1, 3))]
        rng.shuffle(runs)
        self.back_to_back = rng.random() < 0.3
        duration = {k: rng.randint(5, 200) * PS_PER_US for k in names}
        vary = rng.random() < 0.5
        t = rng.randint(1, 50) * PS_PER_US
        for k in runs:
            d = rng.randint(5, 200) * PS_PER_US if vary else duration[k]
            self.executions.append((k, kernel_line[k], t, d))
            ev = self.plane.kernel_line(kernel_line[k]).events.add()
            ev.metadata_id, ev.offset_ps, ev.duration_ps = self.plane.meta(k).id, t, d
            t += d + (0 if self.back_to_back else rng.randint(20, 100) * PS_PER_US)
        self.end_ps = t + 50 * PS_PER_US
        if self.periodic:
            self.write_periodic()
        else:
            self.write_lines()
        self.write_environment()

    def layout(self):
        """Where a line's events sit: (shift from the execution's start in units of its
        duration, width: "execution" or 0)."""
        return self.rng.choice((("at", 0.0, "execution"), ("start", 0.0, 0), ("end", 1.0, 0),
                                ("inside", 0.5, 0), ("before", -0.5, "execution"),
                                ("after", 1.3, "execution")))

    def write_lines(self):
        rng = self.rng
        # Zero lines for some executions, only when the executions stand apart and each line
        # is on its own execution: a line between two, or beside one, could belong to either.
        layout = self.layout()
        skip_some = not self.back_to_back and len(self.executions) > 1 and \
            layout[0] not in ("before", "after") and rng.random() < 0.3
        for index, (kernel, _, start, dur) in enumerate(self.executions):
            if skip_some and rng.random() < 0.4:
                continue
            counts, kinds = self.execution_counts(dur)
            self.write_counters_line(kernel, index, start, dur, layout, counts, kinds)

    # --- the counts -----------------------------------------------------------------------

    def execution_counts(self, duration_ps):
        """{register id: value} of one execution, and how each value is written."""
        rng = self.rng
        nominal = duration_ps * 1e-12 * self.clock
        counts = {}
        for die in self.dies:
            if (self.die_mode == "die1_unsampled" and die == 1) or \
                    (self.die_mode == "die0_unsampled" and die == 0):
                continue
            cycles = round(nominal * rng.uniform(0.6, 1.0))
            self.tc_counts(die, cycles, counts)
            if self.generation == "v7x":
                if not (self.die_mode == "die1_no_cycles" and die == 1):
                    counts[register("v7x", PM_BLOCK, "CYCLE_COUNT", die)] = cycles
                for name in PM_COUNTERS:
                    if rng.random() < 0.5:
                        counts[register("v7x", PM_BLOCK, name, die)] = round(
                            cycles * rng.uniform(0, 0.3))
            if rng.random() < 0.5:
                self.hbm_counts(die, cycles, counts)
        kinds = {}
        for cid in counts:
            kinds[cid] = rng.choice(("double", "uint64", "int64"))
        if counts and rng.random() < 0.15:
            self.out_of_range(counts, kinds)
        return counts, kinds

    def tc_counts(self, die, cycles, counts):
        rng = self.rng
        if self.generation == "v6e" or rng.random() < 0.5:
            cid = register(self.generation, TC_BLOCK, "CYCLES", die)
            counts[cid] = cycles
        shares = {}
        for unit in ("MXU_BUSY_", "XLU_BUSY_"):  # cycles with none, one, both busy: all cycles
            busy = sorted(rng.uniform(0, 1) for _ in range(2))
            shares.update({f"{unit}0": busy[0], f"{unit}1": busy[1] - busy[0],
                           f"{unit}2": 1 - busy[1]})
        for name in rng.sample(TC_COUNTERS, rng.randint(3, 20)):
            # Counts a unit can make: an MXU instruction takes up to 8 cycles, an XLU one 8,
            # and the VPU's 20 counters share 4 slots.
            if name.startswith(("MATMUL_", "PACKED_", "ROTATE_", "TRANSPOSE_")):
                share = rng.uniform(0, 0.12) / 8
            elif name.startswith("VPU_VALU_"):
                share = rng.uniform(0, 0.15)
            else:
                share = shares.get(name, rng.uniform(0, 0.25))
            cid = register(self.generation, TC_BLOCK, name, die)
            if cid is not None:
                counts[cid] = round(share * cycles)

    def hbm_counts(self, die, cycles, counts):
        regs = hbm_registers(self.generation, die)
        for cid, _ in self.rng.sample(regs, min(len(regs), self.rng.randint(1, 4))):
            counts[cid] = round(cycles * self.rng.uniform(0, 0.5))

    def out_of_range(self, counts, kinds):
        cid = self.rng.choice(sorted(counts))
        what = self.rng.choice(("negative", "nan", "huge"))
        if what == "negative":
            counts[cid], kinds[cid] = -self.rng.randint(1, 10**6), self.rng.choice(("double", "int64"))
        elif what == "nan":
            counts[cid], kinds[cid] = float("nan"), "double"
        else:
            counts[cid], kinds[cid] = 2.0 ** 64 * self.rng.uniform(1, 4), "double"
        self.notes.append(f"{what} value for {cid}")

    def write_counters_line(self, kernel, index, start, dur, layout, counts, kinds):
        rng, p = self.rng, self.plane
        name, shift, width = layout
        at = start + round(shift * dur)
        width = dur if width == "execution" else 0
        line = p.plane.lines.add()
        line.id = len(self.lines) + 1  # the Utilization Viewer's sample number
        line.name = f"counters_{kernel}"
        offset = at
        if self.time_on_line:
            line.timestamp_ns = at // 1000
            offset = at % 1000
        how = {}
        for cid, value in counts.items():
            where = rng.choice(("event", "event", "meta", "none"))
            how[cid] = where
            if where == "none":
                m = p.meta(f"reg {cid}", key=cid)  # the metadata's id is the register
            else:
                m = p.meta(f"{kernel} {cid} #{line.id}")
            ev = line.events.add()
            ev.metadata_id, ev.offset_ps, ev.duration_ps = m.id, offset, width
            if where == "meta":
                p.stat("performance_counter_id", m.stats.add()).uint64_value = cid
            elif where == "event":
                p.stat("performance_counter_id", ev.stats.add()).uint64_value = cid
            put_value(p.stat("counter_value", ev.stats.add()), value, kinds[cid])
        self.lines.append({"kernel": kernel, "execution": index, "layout": name,
                           "counts": {c: clamp(v) for c, v in counts.items()}, "kinds": kinds,
                           "width": width, "sample": line.id, "written": dict(counts),
                           "negative_int64": any(v < 0 and kinds[c] == "int64"
                                                 for c, v in counts.items()),
                           "damaged": any(v > 2.0 ** 53 for v in counts.values())})

    def write_periodic(self):
        """Running totals sampled at each execution's start and end, on `counters_<n>` lines:
        one kernel's executions (first on the timeline) and what they counted."""
        base = {}
        totals = {}
        sample = 0
        for index, (kernel, _, start, dur) in enumerate(self.executions):
            counts, _ = self.execution_counts(dur)
            counts = {c: clamp(v) for c, v in counts.items() if not (v > 2.0 ** 63 or v != v)}
            for at, add in ((start, False), (start + dur, True)):
                line = self.plane.plane.lines.add()
                line.id, line.name = sample, f"counters_{sample}"
                sample += 1
                for cid in sorted(set(totals) | set(counts)):
                    base.setdefault(cid, self.rng.randint(10**9, 10**12))
                    if add:
                        totals[cid] = totals.get(cid, 0) + counts.get(cid, 0)
                    ev = line.events.add()
                    ev.metadata_id = self.plane.meta(f"p{cid}").id
                    ev.offset_ps = at
                    self.plane.stat("performance_counter_id", ev.stats.add()).uint64_value = cid
                    self.plane.stat("counter_value", ev.stats.add()).uint64_value = \
                        base[cid] + int(totals.get(cid, 0))
            self.lines.append({"kernel": kernel, "execution": index, "layout": "periodic",
                               "counts": counts, "kinds": {}, "width": dur, "sample": None,
                               "written": counts, "negative_int64": False, "damaged": False})

    def write_environment(self):
        env = self.xspace.planes.add()
        env.name = "Task Environment"
        for key, (name, value) in enumerate((("profile_start_time", PROFILE_START_NS),
                                             ("profile_stop_time",
                                              PROFILE_START_NS + self.end_ps // 1000)), start=1):
            env.stat_metadata[key].id, env.stat_metadata[key].name = key, name
            s = env.stats.add()
            s.metadata_id, s.uint64_value = key, value

    def write(self, path):
        Path(path).write_bytes(self.xspace.SerializeToString())
        return Path(path)

    def describe(self):
        return (f"seed {self.seed}: {self.generation}, dies {self.die_mode}, "
                f"{len(self.executions)} executions, {len(self.lines)} lines "
                f"({', '.join(sorted({l['layout'] for l in self.lines})) or 'none'}), "
                f"{'time on the line' if self.time_on_line else 'time on the events'}"
                f"{', back to back' if self.back_to_back else ''}"
                f"{', ' + '; '.join(self.notes) if self.notes else ''}")


# --- the tools ----------------------------------------------------------------------------

def xprof_tool(path, tool):
    from xprof.convert import raw_to_tool_data
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], tool, {"use_saved_result": False})
    return json.loads(data)


def podprof_executions(podprof_bin, path):
    r = subprocess.run([str(podprof_bin), "inspect", str(path), "--executions", "--format",
                        "json"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"podprof inspect {path} exited {r.returncode}: {r.stderr[-2000:]}")
    return json.loads(r.stdout)


def table_rows(table):
    cols = [c["id"] for c in table.get("cols", [])]
    return [dict(zip(cols, [c.get("v") for c in r["c"]])) for r in table.get("rows", [])]


# --- the comparison -----------------------------------------------------------------------

def close(a, b):
    return abs(a - b) <= max(TOLERANCE, 1e-9 * max(abs(a), abs(b)))


def agrees(got, want):
    """podprof's figure against kernel_utilization's: equal, or (documented) XProf caps a
    figure past 100% at 100, where podprof shows what the counts give."""
    if close(got, want):
        return True
    if want == 100.0 and got > 100.0:
        DOCUMENTED["kernel_utilization caps a figure at 100%"] += 1
        return True
    return False


def compare_figures(what, xprof, ours, out):
    """XProf's entry against podprof's figures (XProf's own where they differ by design)."""
    if "mxu_utilization" in xprof and xprof["mxu_utilization"] != 0 or "mxu_utilization" in ours:
        got = ours.get("mxu_utilization", 0.0)
        if not agrees(got, xprof.get("mxu_utilization", 0.0)):
            out.append(f"{what} mxu_utilization: podprof {got} XProf {xprof['mxu_utilization']}")
    for label, want in xprof.get("mxu_cycles_breakdown", {}).items():
        got = ours.get("mxu_cycles_breakdown", {}).get(label, 0.0)
        if not agrees(got, want):
            out.append(f"{what} mxu_cycles_breakdown {label}: podprof {got} XProf {want}")
    theirs = xprof.get("other_metrics", {})
    for name, want in theirs.items():
        got = ours.get("other_metrics", {}).get(name)
        if got is None:
            # podprof leaves out a row no counter of which was sampled; XProf shows it as 0.
            if want != 0:
                out.append(f"{what} {name}: podprof has no row, XProf {want}")
        elif not agrees(got, want):
            out.append(f"{what} {name}: podprof {got} XProf {want}")
    for name in set(ours.get("other_metrics", {})) - set(theirs):
        out.append(f"{what} {name}: podprof {ours['other_metrics'][name]}, XProf has no row")


def expected_mxu(case, line):
    """The measured MXU utilisation of a line's counts: the sampled dies' busy cycles over
    their own cycle counts (what podprof shows, whatever XProf does with the others)."""
    busy = cycles = 0.0
    sampled = False
    for die in case.dies:
        c = line["counts"]
        if case.generation == "v7x":
            cyc = c.get(register("v7x", PM_BLOCK, "CYCLE_COUNT", die))
        else:
            cyc = c.get(register("v6e", TC_BLOCK, "CYCLES", die))
        if not cyc:
            continue
        # A die whose MXUs were not sampled still counts its cycles, as XProf pools.
        b = [c.get(register(case.generation, TC_BLOCK, f"MXU_BUSY_{n}", die)) for n in range(3)]
        sampled = sampled or any(v is not None for v in b)
        busy += 0.5 * (b[1] or 0.0) + (b[2] or 0.0)
        cycles += cyc
    return 100 * busy / cycles if cycles and sampled else None


def xprof_duration_us(case, line):
    """XProf's duration of a `counters_<kernel>` line whose events have none (documented):
    the kernel's longest execution on `XLA Ops`; else the first execution there, of any
    kernel; else the largest of the dies' cycle counts (v7x: the power manager's) at the clock;
    else 0."""
    xla = [(k, d) for k, kl, _, d in case.executions if kl == "XLA Ops"]
    own = [d for k, d in xla if k == line["kernel"]]
    if own:
        return max(own) / PS_PER_US
    if xla:
        return xla[0][1] / PS_PER_US
    return 1e6 * max(die_cycles(case, line, as_xprof_reads=True).values(), default=0.0) / case.clock


def die_cycles(case, line, as_xprof_reads=False):
    """Each die's cycle count on a line (v7x: the power manager's): 0 when absent; as podprof
    reads it, or as XProf does (a negative int64's bits unsigned, documented)."""
    block, name = (PM_BLOCK, "CYCLE_COUNT") if case.generation == "v7x" else (TC_BLOCK, "CYCLES")
    out = {}
    for d in case.dies:
        cid = register(case.generation, block, name, d)
        out[d] = line["counts"].get(cid, 0.0)
        written = line["written"].get(cid)
        if as_xprof_reads and written is not None and written < 0 and \
                line["kinds"].get(cid) == "int64":
            out[d] = 2.0 ** 64 + written
    return out


def compare_kernel_utilization(case, ku, ours, out):
    theirs = [(d.get("device_id"), k) for d in ku.get("devices", []) for k in d.get("kernels", [])]
    mine = [k for d in ours.get("devices", []) for k in d.get("kernels", [])]
    by_kernel = {}
    for _, k in theirs:
        by_kernel.setdefault(k["kernel_name"], []).append(k)
    ours_by_kernel = {}
    for k in mine:
        ours_by_kernel.setdefault(k["kernel_name"], []).append(k)
    lines_by_kernel = {}
    for line in case.lines:
        lines_by_kernel.setdefault(line["kernel"], []).append(line)
    for kernel, lines in lines_by_kernel.items():
        x, p = by_kernel.get(kernel, []), ours_by_kernel.get(kernel, [])
        if len(x) != len(lines) or len(p) != len(lines):
            out.append(f"{kernel}: {len(lines)} lines, XProf lists {len(x)}, podprof {len(p)}")
            continue
        for i, (xe, pe, line) in enumerate(zip(x, p, lines)):
            what = f"{kernel} #{i + 1} (line {line['sample']}, {line['layout']})"
            if line["damaged"]:
                # Documented: a count past 2^53 in one execution is damage; podprof leaves it
                # out and says so, XProf reads it as 2^64 - 1 (its sums then wrap).
                DOCUMENTED["a count past 2^53 is left out, and said"] += 1
                if not any("past 2^53" in w for w in ours.get("warnings", [])):
                    out.append(f"{what}: a damaged count, and podprof did not say so")
                continue
            if line["width"] == 0:
                # Documented: XProf's duration of a line without one (xprof_duration_us).
                want = xprof_duration_us(case, line)
                DOCUMENTED["a line without a duration takes XProf's from its rule"] += 1
                if not close(xe["duration_us"], want):
                    out.append(f"{what}: XProf's duration {xe['duration_us']} us, its documented "
                               f"rule gives {want} us")
            if line["negative_int64"]:
                pass  # documented: XProf reads a negative int64 as 2^64 - n (compare_perf_counters)
            elif "xprof" in pe:
                DOCUMENTED["a die without a cycle count is idle at nominal cycles in XProf"] += 1
                # Documented: XProf counts a die without a cycle count idle at nominal cycles,
                # its time at the clock, which is the execution's only when the line says so.
                if close(xe["duration_us"], pe["duration_us"]):
                    compare_figures(what + " [XProf's nominal die]", xe, pe["xprof"], out)
                if all(c > 0 for c in die_cycles(case, line).values()):
                    out.append(f"{what}: podprof says XProf differs ({pe['xprof']['why']}), "
                               "but every die counted its cycles")
            else:
                compare_figures(what, xe, pe, out)
            want = expected_mxu(case, line)
            got = pe.get("mxu_utilization")
            if want is not None and (got is None or not close(got, want)):
                out.append(f"{what}: podprof's measured MXU {got}, the counts give {want}")
            if line["width"] and not close(xe["duration_us"], pe["duration_us"]):
                out.append(f"{what} duration: podprof {pe['duration_us']} us XProf "
                           f"{xe['duration_us']} us")


def compare_utilization_viewer(case, uv, ours, out):
    """Per sample (line) and node (die): XProf's rows against podprof's die figures."""
    rows = {}
    for r in table_rows(uv):
        name, node = r["name"], int(r["node"])
        m = re.fullmatch(r"HBM Rd\+Wr - core (\d+)", name)
        if m:
            name, node = "HBM Bandwidth Utilization", int(m.group(1))
        if name.startswith(("TEC ", "SC Vector", "SCS", "ICI")) or not r["peak"]:
            continue
        rows.setdefault((int(r["sample"]), node), {})[name] = 100 * r["achieved"] / r["peak"]
    mine = {}
    for d in ours.get("devices", []):
        for k in d["kernels"]:
            mine.setdefault(k["kernel_name"], []).append(k)
    seen = {}
    for line in case.lines:
        i = seen[line["kernel"]] = seen.get(line["kernel"], -1) + 1
        execs = mine.get(line["kernel"], [])
        if i >= len(execs) or line["negative_int64"] or line["damaged"]:
            continue  # said by the kernel_utilization comparison, or documented
        e = execs[i]
        dies = {d["die"]: d for d in e.get("dies", [])} or {0: e}
        for die, d in dies.items():
            want = dict(rows.get((line["sample"], die), {}))
            if "Avg MXU Busy" in want:
                want_mxu = want.pop("Avg MXU Busy")
                got = d.get("mxu_utilization")
                if (got is None and want_mxu != 0) or (got is not None and not close(got, want_mxu)):
                    out.append(f"UV line {line['sample']} die {die} Avg MXU Busy: podprof {got} "
                               f"XProf {want_mxu}")
            for name in [n for n in want if n.startswith("MXU ") and n not in ("MXU matpush",)]:
                want.pop(name)  # the precision rows: the breakdown, checked against KU
            compare_figures(f"UV line {line['sample']} die {die}", {"other_metrics": want},
                            {"other_metrics": d.get("other_metrics", {}), "mxu_utilization": 0},
                            out)


def compare_perf_counters(case, pc, out):
    """XProf's Perf Counters read each line's values as written (clamped): the check that the
    generated layouts say what the generator meant. Documented: it reads a value written as a
    double as 0."""
    got = {}
    for r in table_rows(pc):
        got[(int(r["Sample"]), r["Counter"])] = r["Value"]
    for line in case.lines:
        if line["sample"] is None:
            continue
        for cid, value in line["counts"].items():
            keys = [k for k in got if k[0] == line["sample"] and k[1].endswith(str(cid))]
            if not keys:
                continue
            v = got[keys[0]]
            written, kind = line["written"][cid], line["kinds"][cid]
            if kind == "double":
                want = 0.0
                DOCUMENTED["perf_counters shows a double counter_value as 0"] += 1
            elif kind == "int64" and written < 0:
                want = 2.0 ** 64 + written  # documented: its bits read as unsigned
                DOCUMENTED["XProf reads a negative int64 counter_value unsigned"] += 1
            else:
                want = value
            if not close(v, want):
                out.append(f"perf_counters line {line['sample']} counter {cid}: XProf {v}, "
                           f"written {value} as {line['kinds'][cid]}")


def compare_periodic(case, ku, ours, out):
    """Documented: XProf gives `counters_<n>` lines to the first kernel on the timeline;
    podprof reads them as running totals and gives each execution its increase."""
    xla = [k for k, line, _, _ in case.executions if line == "XLA Ops"]
    first = xla[0] if xla else "default_kernel"
    names = sorted(k["kernel_name"] for d in ku.get("devices", []) for k in d.get("kernels", []))
    # `counters_0` goes to the first kernel on XLA Ops (without one, "default_kernel"); any
    # other `counters_<n>` to a kernel named n.
    want = sorted([first] + [str(n) for n in range(1, 2 * len(case.lines))])
    DOCUMENTED["XProf names counters_<n> lines' kernel by n, counters_0 the first"] += 1
    if names != want:
        out.append(f"XProf's kernels of the counters_<n> lines: {names}, documented: {want}")
    mine = [k for d in ours.get("devices", []) for k in d["kernels"]]
    if len(mine) != len(case.lines):
        out.append(f"podprof lists {len(mine)} executions for {len(case.lines)} counted")
        return
    ordered = sorted(zip(case.executions, case.lines), key=lambda el: el[0][2])
    for e, ((_, _, start, _), line) in zip(mine, ordered):
        want = expected_mxu(case, line)
        got = e.get("mxu_utilization")
        if want is not None and (got is None or not close(got, want)):
            out.append(f"periodic {line['kernel']} at {start} ps: podprof MXU {got}, the "
                       f"increase gives {want}")


def check(case, path, podprof_bin):
    """Every undocumented difference between podprof and XProf's tools on `case`."""
    out = []
    ours = podprof_executions(podprof_bin, path)
    ku = xprof_tool(path, "kernel_utilization")
    if case.periodic:
        compare_periodic(case, ku, ours, out)
        return out, {"podprof": ours, "kernel_utilization": ku}
    uv = xprof_tool(path, "utilization_viewer")
    pc = xprof_tool(path, "perf_counters")
    compare_kernel_utilization(case, ku, ours, out)
    compare_utilization_viewer(case, uv, ours, out)
    compare_perf_counters(case, pc, out)
    return out, {"podprof": ours, "kernel_utilization": ku, "utilization_viewer": uv,
                 "perf_counters": pc}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", type=Path, default=Path("/tmp/podprof-kernel-case"))
    ap.add_argument("--bin", type=Path, default=SOURCE / "build/bin")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    import peerlib
    args.out.mkdir(parents=True, exist_ok=True)
    case = Case(args.seed, peerlib.xspace_class(args.out))
    path = case.write(args.out / f"case-{args.seed}.xplane.pb")
    problems, answers = check(case, path, args.bin / "podprof")
    for tool, answer in answers.items():
        (args.out / f"case-{args.seed}.{tool}.json").write_text(json.dumps(answer, indent=1))
    print(case.describe())
    print(f"wrote {path} and each tool's answer beside it")
    for p in problems:
        print("  " + p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
