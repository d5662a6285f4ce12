"""pytest fixtures of the `realpeers` tests (tests/jax, tests/peers; helpers in peers/peerlib.py)."""
import pytest

from peerlib import OUT, Processes


@pytest.fixture
def out(request):
    d = OUT / request.node.name
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture
def procs(out):
    p = Processes(out)
    yield p
    p.stop()
