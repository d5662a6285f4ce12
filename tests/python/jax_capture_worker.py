#!/usr/bin/env python3
"""One process of a 4-process JAX job that captures itself with podprof.jax
(tests/python/test_jax_capture.py): it joins the job (jax.distributed on a loopback
coordinator, CPU collectives over gloo), serves JAX's profiler with podprof.jax.serve() on the
port $PODPROF_PROFILER_PORT names, and trains a small model whose gradients are summed across
the processes. Two phases, each a loop inside `podprof.jax.capture`:
  1. once --go exists: STEPS steps, the aggregator there; process 0 writes what it captured;
  2. once --go2 exists (the test has killed the aggregator by then): STEPS steps again,
     timed, each process writing how long its steps took and the warnings it got.
"""
import argparse
import json
import os
import time
import warnings
from pathlib import Path

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import podprof.jax  # noqa: E402

STEPS = 120


def build_step():
    mesh = Mesh(np.array(jax.devices()), ("hosts",))

    def local_step(w, x):
        loss, g = jax.value_and_grad(lambda w, x: jnp.mean(jnp.tanh(x @ w) ** 2))(w, x)
        return w - 1e-3 * jax.lax.psum(g, "hosts"), jax.lax.psum(loss, "hosts")

    step = jax.jit(jax.shard_map(local_step, mesh=mesh, in_specs=(P(), P("hosts")),
                                 out_specs=(P(), P())))
    x = jax.make_array_from_process_local_data(
        NamedSharding(mesh, P("hosts")),
        np.random.default_rng(jax.process_index()).normal(size=(64, 256)).astype(np.float32))
    return step, x


def wait_for(path):
    while not Path(path).exists():
        time.sleep(0.05)


def train(step, w, x, aggregator, first, annotate):
    times = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with podprof.jax.capture(aggregator, steps=3, labels={"job": "self"}) as c:
            for n in range(first, first + STEPS):
                t = time.perf_counter()
                if annotate:
                    with jax.profiler.StepTraceAnnotation("train", step_num=n):
                        w, loss = step(w, x)
                        loss.block_until_ready()
                else:
                    w, loss = step(w, x)
                    loss.block_until_ready()
                    podprof.jax.step()
                times.append(time.perf_counter() - t)
                time.sleep(0.01)
        c.wait(timeout=120)
    return w, c, times, [str(m.message) for m in caught if "podprof" in str(m.message)]


def main():
    p = argparse.ArgumentParser()
    for name in ("--coordinator", "--aggregator", "--ready-file", "--go", "--go2", "--out"):
        p.add_argument(name, required=True)
    p.add_argument("--process-id", type=int, required=True)
    p.add_argument("--num-processes", type=int, required=True)
    a = p.parse_args()
    jax.distributed.initialize(coordinator_address=a.coordinator, num_processes=a.num_processes,
                               process_id=a.process_id, initialization_timeout=60)
    port = podprof.jax.serve()
    step, x = build_step()
    w = jnp.zeros((256, 256), jnp.float32)
    for _ in range(3):
        w, loss = step(w, x)
    loss.block_until_ready()
    Path(a.ready_file).write_text(json.dumps({"port": port, "pid": os.getpid()}))

    wait_for(a.go)
    w, c, times, warned = train(step, w, x, a.aggregator, 0, annotate=True)
    result = {"asked": c.asked, "warned": warned, "steps": len(times)}
    if c.asked:
        kernels = c.kernels(by="kernel")
        result.update(capture=c.handle.id, url=c.url, status=c.handle.status,
                      window_steps=c.window_steps, offset_ns=c.boundary_offset_ns,
                      requested_start_ns=c.requested_start_ns,
                      start_ns=int(c.handle.start.value),
                      step_ns=c.step_time_ns, modules=sorted(set(kernels.module)),
                      kernels=len(kernels))
    Path(f"{a.out}.phase1.json").write_text(json.dumps(result))

    wait_for(a.go2)
    w, c, times, warned = train(step, w, x, a.aggregator, STEPS, annotate=False)
    Path(f"{a.out}.phase2.json").write_text(json.dumps(
        {"asked": c.asked, "warned": warned, "steps": len(times), "error": str(c.error or ""),
         "max_step_s": max(times), "median_step_s": float(np.median(times))}))
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
