"""HTTP(S) to the aggregator's API, with the standard library only.

One connection per request (the aggregator closes idle ones, and a notebook may sit for hours
between calls); answers are read whole, or streamed for downloads and server-sent events.
Every failure becomes one of podprof.errors' kinds: never a bare status or socket error.
"""
from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from . import errors

# Answers to 429 are retried after the Retry-After the aggregator gives (capped), this often.
_RETRIES = 3
_MAX_RETRY_AFTER_S = 5.0


@dataclass(frozen=True)
class Tls:
    """The client's certificate and key and the CA its aggregator's certificate chains to."""

    cert: str
    key: str
    ca: str


Params = Mapping[str, Any]


def query_string(params: Optional[Params]) -> str:
    """`params` as a query, leaving out None; lists repeat (label=a=1&label=b=2) or join."""
    pairs: List[Tuple[str, str]] = []
    for k, v in (params or {}).items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = "1" if v else "0"
        if isinstance(v, (list, tuple)):
            pairs.extend((k, str(x)) for x in v)
        else:
            pairs.append((k, str(v)))
    return urllib.parse.urlencode(pairs)


class Transport:
    """Requests to one aggregator at `url` (http:// or https://)."""

    def __init__(self, url: str, tls: Optional[Tls], timeout: float) -> None:
        parts = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
        host = parts.hostname
        if parts.scheme not in ("http", "https") or not host:
            raise ValueError(f"url {url!r}: give http://HOST:PORT or https://HOST:PORT "
                             "(the aggregator's [http] listen)")
        if tls is not None and parts.scheme == "http":
            parts = parts._replace(scheme="https")
        if parts.scheme == "https" and tls is None:
            raise ValueError(f"url {url!r} is https: give cert=, key= and ca= (or profile=)")
        self.scheme = parts.scheme
        self.host: str = host
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.timeout = timeout
        self._context: Optional[ssl.SSLContext] = None
        if tls is not None:
            self._context = _context(tls)

    def _connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        t = self.timeout if timeout is None else timeout
        if self._context is not None:
            return http.client.HTTPSConnection(self.host, self.port, timeout=t,
                                               context=self._context)
        return http.client.HTTPConnection(self.host, self.port, timeout=t)

    def open(self, method: str, path: str, params: Optional[Params] = None,
             body: Optional[Dict[str, Any]] = None, *, timeout: Optional[float] = None,
             accept: str = "application/json") -> Tuple[http.client.HTTPConnection,
                                                         http.client.HTTPResponse]:
        """Sends the request; returns the connection and a 2xx response to read (close both)."""
        target = path + ("?" + query_string(params) if params else "")
        headers = {"Accept": accept, "Accept-Encoding": "identity"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in range(_RETRIES + 1):
            conn = self._connection(timeout)
            try:
                conn.request(method, target, body=data, headers=headers)
                resp = conn.getresponse()
            except (ssl.SSLError, ssl.CertificateError) as e:
                conn.close()
                raise errors.UnreachableError(
                    f"TLS with the aggregator at {self.base} failed: {e} (the aggregator's "
                    "certificate must chain to ca=, and its names include the url's host)",
                    tls=True) from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise errors.UnreachableError(
                    f"cannot reach the aggregator at {self.base}{' over TLS' if self._context else ''}: "
                    f"{_reason(e)}", tls=False) from e
            if 200 <= resp.status < 300:
                return conn, resp
            status, message = resp.status, _message(resp)
            retry_after = resp.getheader("Retry-After")
            conn.close()
            if status == 429 and attempt < _RETRIES:
                time.sleep(min(_MAX_RETRY_AFTER_S, float(retry_after or 1)))
                continue
            raise errors.for_status(status, message, f"{method} {path}")
        raise AssertionError("unreachable")

    def read(self, method: str, path: str, params: Optional[Params] = None,
             body: Optional[Dict[str, Any]] = None, *, accept: str = "application/json") -> bytes:
        conn, resp = self.open(method, path, params, body, accept=accept)
        try:
            return resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise errors.UnreachableError(
                f"the aggregator at {self.base} broke off {method} {path}: {_reason(e)}") from e
        finally:
            conn.close()

    def json(self, method: str, path: str, params: Optional[Params] = None,
             body: Optional[Dict[str, Any]] = None) -> Any:
        return json.loads(self.read(method, path, params, body))

    def events(self, path: str, timeout: Optional[float]) -> Iterator[Tuple[str, Any]]:
        """Server-sent events from `path` as (event, data parsed as JSON), until the stream ends."""
        conn, resp = self.open("GET", path, timeout=timeout, accept="text/event-stream")
        try:
            event, data = "message", []  # type: Tuple[str, List[str]]
            while True:
                try:
                    raw = resp.readline()
                except (OSError, http.client.HTTPException) as e:
                    raise errors.UnreachableError(
                        f"the aggregator at {self.base} broke off {path}: {_reason(e)}") from e
                if not raw:
                    return
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line == "":
                    if data:
                        yield event, json.loads("\n".join(data))
                    event, data = "message", []
                elif line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip())
        finally:
            conn.close()


def _context(tls: Tls) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=tls.ca)
    try:
        ctx.load_cert_chain(tls.cert, tls.key)
    except (OSError, ssl.SSLError) as e:
        raise ValueError(f"cert={tls.cert!r}, key={tls.key!r}: {e}") from e
    return ctx


def _message(resp: http.client.HTTPResponse) -> str:
    body = resp.read(64 * 1024).decode("utf-8", "replace")
    try:
        parsed = json.loads(body)
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
            return str(parsed["error"])
    except ValueError:
        pass
    return body.strip()[:500]


def _reason(e: BaseException) -> str:
    if isinstance(e, socket.timeout):
        return "timed out"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused (is podprof-aggregator running, with [http] listen there?)"
    return str(e) or type(e).__name__
