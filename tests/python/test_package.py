"""The package as a library: its type hints hold (mypy --strict, with pandas' stubs), it
installs with pip from the checkout without the network, and the installed copy imports with
podprof's version."""
import subprocess
import sys

import pytest

import podprof
import podprof.jax
from peerlib import SOURCE

PACKAGE = SOURCE / "python"


def test_mypy_strict_passes_over_the_package():
    r = subprocess.run([sys.executable, "-m", "mypy"], cwd=PACKAGE, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success" in r.stdout


def test_pip_installs_it_and_the_installed_copy_imports(tmp_path):
    target = tmp_path / "site"
    build = tmp_path / "src"
    subprocess.run(["cp", "-r", str(PACKAGE), str(build)], check=True)  # builds write beside it
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--no-build-isolation", "--no-index", "--target", str(target), str(build)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (target / "podprof" / "py.typed").is_file()
    r = subprocess.run([sys.executable, "-I", "-c",
                        f"import sys; sys.path.insert(0, {str(target)!r}); import podprof; "
                        "print(podprof.__version__, podprof.__file__)"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    version, where = r.stdout.split()
    assert version == podprof.__version__ and where.startswith(str(target))


def test_the_profiler_port_is_the_one_the_agent_reads(tmp_path, monkeypatch):
    monkeypatch.delenv("PODPROF_PROFILER_PORT", raising=False)
    monkeypatch.setenv("PODPROF_AGENT_CONFIG", str(tmp_path / "none.toml"))
    assert podprof.jax.profiler_port() == 9999  # the agent's own default
    config = tmp_path / "agent.toml"
    config.write_text('[workload]\nprofiler = ["localhost:8466", "localhost:8467"]\n')
    monkeypatch.setenv("PODPROF_AGENT_CONFIG", str(config))
    assert podprof.jax.profiler_port() == 8466
    monkeypatch.setenv("PODPROF_PROFILER_PORT", "9012")
    assert podprof.jax.profiler_port() == 9012
    monkeypatch.setenv("PODPROF_PROFILER_PORT", "http")
    with pytest.raises(ValueError, match="PODPROF_PROFILER_PORT"):
        podprof.jax.profiler_port()


def test_durations_read_as_the_cli_reads_them():
    from podprof.client import duration_s
    import datetime
    assert duration_s("250ms") == 0.25 and duration_s("2s") == 2 and duration_s("1.5m") == 90
    assert duration_s(datetime.timedelta(seconds=3)) == 3 and duration_s(4) == 4
    for bad in ("2 parsecs", "-1s", 0, True):
        with pytest.raises(ValueError):
            duration_s(bad)
