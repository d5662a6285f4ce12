"""The errors the client raises: Python's own kinds, each with the aggregator's message.

A refused role is a PermissionError, a bad argument a ValueError, an aggregator that cannot be
reached a ConnectionError (saying whether TLS was the reason). The classes below add what a
caller may want to tell apart; every one is also the built-in kind, so `except ValueError`
catches a capture that does not exist.
"""
from __future__ import annotations

from typing import Optional


class PodprofError(Exception):
    """Base of podprof's errors; `status` is the HTTP status behind it (None when none came)."""

    status: Optional[int] = None


class NotFoundError(PodprofError, LookupError, ValueError):
    """No such capture, kernel or page (404): a bad argument, and a failed lookup."""


class BadRequestError(PodprofError, ValueError):
    """The aggregator refused an argument (400, 409, 413, 415), with its reason."""


class RefusedError(PodprofError, PermissionError):
    """The caller's role does not allow this (401, 403, 421)."""


class UnreachableError(PodprofError, ConnectionError):
    """The aggregator could not be reached, or the TLS handshake with it failed."""

    def __init__(self, message: str, *, tls: bool = False) -> None:
        super().__init__(message)
        self.tls = tls


class BusyError(PodprofError, ConnectionError):
    """The aggregator is at its limit of requests or streams (429, 503) after retries."""


class ServerError(PodprofError, RuntimeError):
    """The aggregator failed on its side (500)."""


class CaptureFailedError(PodprofError, RuntimeError):
    """A capture that started but ended failed (or cancelled), or was never stored: its
    results are not an empty table. The message is the aggregator's reason (the capture's
    error, else each host's); `capture` is its id (None when none was started)."""

    def __init__(self, message: str, *, capture: Optional[str] = None) -> None:
        super().__init__(message)
        self.capture = capture


def for_status(status: int, message: str, what: str) -> PodprofError:
    """The error for an HTTP answer `status` with the server's `message`, to `what`."""
    text = f"{what}: {message}" if message else f"{what}: HTTP {status}"
    err: PodprofError
    if status == 404:
        err = NotFoundError(text)
    elif status in (401, 403, 421):
        err = RefusedError(_with_setting(status, text))
    elif status in (429, 503):
        err = BusyError(text)
    elif 400 <= status < 500:
        err = BadRequestError(text)
    else:
        err = ServerError(text)
    err.status = status
    return err


def _with_setting(status: int, text: str) -> str:
    # The aggregator names the caller; the user also needs the setting that would let them in.
    if status == 403 and "operator" in text:
        return (text + " (writes need the operator role: the aggregator's "
                "[tls] allowed_operators must name this client's certificate)")
    if status == 403:
        return text + " (the aggregator's [tls] and [http] settings decide who may do this)"
    if status == 421:
        return (text + " (the aggregator answers only names it knows: its [http] allowed_hosts "
                "or external_url)")
    return text + " (present a certificate of the deployment's CA: cert=, key=, ca=)"
