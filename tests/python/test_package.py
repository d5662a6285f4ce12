"""The package as a library: its type hints hold (mypy --strict, with pandas' stubs), it
installs with pip from the checkout without the network, and the installed copy imports with
podprof's version."""
import subprocess
import sys

import podprof
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
