#!/usr/bin/env python3
"""One process of a real JAX job on this machine (tests/jax/test_jax_pod.py): it joins the job
(jax.distributed.initialize on a loopback coordinator, CPU collectives over gloo), serves
JAX's profiler (jax.profiler.start_server), and trains a small model whose gradients are
summed across every process (psum inside shard_map), with named scopes and
StepTraceAnnotation. Writes --ready-file once the server is up and the step has compiled."""
import argparse
import json
import os
import time

import jax

# Before any backend starts: CPU collectives across processes go over gloo.
jax.config.update("jax_cpu_collectives_implementation", "gloo")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--process-id", type=int, required=True)
    p.add_argument("--num-processes", type=int, required=True)
    p.add_argument("--coordinator", required=True, help="host:port of process 0's coordinator")
    p.add_argument("--profiler-port", type=int, required=True)
    p.add_argument("--ready-file", required=True)
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--trace-dir", default="", help="first trace a few steps with jax.profiler.trace")
    a = p.parse_args()

    jax.distributed.initialize(coordinator_address=a.coordinator, num_processes=a.num_processes,
                               process_id=a.process_id, initialization_timeout=60)
    jax.profiler.start_server(a.profiler_port)
    mesh = Mesh(np.array(jax.devices()), ("hosts",))
    batch = NamedSharding(mesh, P("hosts"))

    def local_loss(w, x):
        with jax.named_scope("dense"):
            h = jnp.tanh(x @ w)
        with jax.named_scope("loss"):
            return jnp.mean(h ** 2)

    def local_step(w, x):
        loss, g = jax.value_and_grad(local_loss)(w, x)
        with jax.named_scope("allreduce_grads"):
            g = jax.lax.psum(g, "hosts")  # the cross-process collective
            loss = jax.lax.psum(loss, "hosts")
        return w - 1e-3 * g, loss

    step = jax.jit(jax.shard_map(local_step, mesh=mesh, in_specs=(P(), P("hosts")),
                                 out_specs=(P(), P())))
    rng = np.random.default_rng(a.process_id)
    w = jnp.asarray(np.random.default_rng(0).normal(size=(256, 256)).astype(np.float32) * 0.05)
    local = rng.normal(size=(64, 256)).astype(np.float32)
    x = jax.make_array_from_process_local_data(batch, local)
    for _ in range(3):  # compile and warm up
        w, loss = step(w, x)
    loss.block_until_ready()

    n = 0
    if a.trace_dir:
        with jax.profiler.trace(a.trace_dir):
            for _ in range(20):
                with jax.profiler.StepTraceAnnotation("train", step_num=n):
                    w, loss = step(w, x)
                    loss.block_until_ready()
                n += 1
    with open(a.ready_file + ".tmp", "w") as f:
        json.dump({"process_id": a.process_id, "pid": os.getpid(), "port": a.profiler_port,
                   "devices": [str(d) for d in jax.devices()], "jax": jax.__version__}, f)
    os.rename(a.ready_file + ".tmp", a.ready_file)
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        with jax.profiler.StepTraceAnnotation("train", step_num=n):
            w, loss = step(w, x)
            loss.block_until_ready()
        n += 1
        time.sleep(0.002)  # leave the machine's two cores some room between steps
    print(f"process {a.process_id}: {n} steps, loss {float(loss):.5f}")
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
