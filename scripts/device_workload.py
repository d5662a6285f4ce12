#!/usr/bin/env python3
"""The device check's workload: a small jitted model training on the GPU (or on CPU, the check's
twin) with JAX's profiler server on --port, for scripts/device-check.sh. With --trace-dir it
first traces a few steps itself (jax.profiler.trace), for comparing JAX's own trace with
podprof's capture of the same program. Writes --ready-file once the server is up and the trace (if any) is written, then
trains until --seconds have passed."""
import argparse
import json
import os
import time

import jax
import jax.numpy as jnp


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=9999)
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--trace-dir", default="")
    p.add_argument("--ready-file", required=True)
    a = p.parse_args()

    jax.profiler.start_server(a.port)
    # On a GPU the model the check was sized for; on CPU (the check's twin on any machine) one
    # small enough that a step takes milliseconds on two cores.
    gpu = jax.default_backend() == "gpu"
    d, hidden, batch = (1024, 4096, 512) if gpu else (256, 512, 64)
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {"w1": jax.random.normal(k1, (d, hidden), jnp.float32) * 0.02,
              "w2": jax.random.normal(k2, (hidden, d), jnp.float32) * 0.02}
    x = jax.random.normal(k3, (batch, d), jnp.float32)

    def loss(params, x):
        h = jax.nn.gelu(x @ params["w1"])
        return jnp.mean((h @ params["w2"] - x) ** 2)

    @jax.jit
    def step(params, x):
        value, grads = jax.value_and_grad(loss)(params, x)
        return jax.tree_util.tree_map(lambda w, g: w - 1e-3 * g, params, grads), value

    for _ in range(5):  # compile and warm up
        params, value = step(params, x)
    value.block_until_ready()
    steps = 0
    if a.trace_dir:
        with jax.profiler.trace(a.trace_dir):
            for _ in range(100):
                params, value = step(params, x)
                steps += 1
            value.block_until_ready()
    with open(a.ready_file + ".tmp", "w") as f:
        json.dump({"port": a.port, "devices": [str(d) for d in jax.devices()],
                   "jax": jax.__version__, "traced_steps": steps}, f)
    os.rename(a.ready_file + ".tmp", a.ready_file)
    end = time.time() + a.seconds
    while time.time() < end:
        for _ in range(20):
            params, value = step(params, x)
        value.block_until_ready()
        steps += 20
    print(f"trained {steps} steps, loss {float(value):.4f}")


if __name__ == "__main__":
    main()
