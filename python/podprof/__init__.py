"""podprof from Python: a pod's captures and kernel statistics as pandas DataFrames.

    import podprof
    pod = podprof.Client("http://127.0.0.1:7180")      # the aggregator's [http] listen
    pod.kernels(pod.captures().capture[0]).head()

`podprof.jax` captures a pod from inside a JAX job; `podprof.fleet` reads the fleet store.
See python/README.md and docs/PYTHON.md.
"""
from ._version import __version__
from .client import CaptureHandle, Client
from .errors import (BadRequestError, BusyError, CaptureFailedError, NotFoundError, PodprofError,
                     RefusedError, ServerError, UnreachableError)

__all__ = [
    "__version__", "Client", "CaptureHandle", "PodprofError", "NotFoundError", "BadRequestError",
    "RefusedError", "UnreachableError", "BusyError", "ServerError", "CaptureFailedError",
]
