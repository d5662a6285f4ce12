"""The CLI's configuration file, read as `podprof` reads it, so a user configures podprof once.

The file (cli/cli_profile.h) is TOML: top-level defaults, and `[profiles.NAME]` tables over
them. The client uses `http` (the aggregator's HTTP API, e.g. "https://agg.pod-a:7180"),
`tls_cert`, `tls_key`, `tls_ca` and `timeout`; the rest are the CLI's own.
"""
from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional

_KEYS = {"aggregator", "format", "timeout", "tls_cert", "tls_key", "tls_ca", "max_size", "http"}


@dataclass
class Profile:
    """What a profile says the client should use; None where it says nothing."""

    http: Optional[str] = None
    tls_cert: Optional[str] = None
    tls_key: Optional[str] = None
    tls_ca: Optional[str] = None
    timeout_s: Optional[float] = None


def config_path() -> Optional[Path]:
    """$PODPROF_CLI_CONFIG, else $XDG_CONFIG_HOME/podprof/cli.toml, else ~/.config/podprof/cli.toml."""
    if os.environ.get("PODPROF_CLI_CONFIG"):
        return Path(os.environ["PODPROF_CLI_CONFIG"])
    if os.environ.get("XDG_CONFIG_HOME"):
        return Path(os.environ["XDG_CONFIG_HOME"]) / "podprof/cli.toml"
    if os.environ.get("HOME"):
        return Path(os.environ["HOME"]) / ".config/podprof/cli.toml"
    return None


def load(name: Optional[str] = None, path: Optional[Path] = None) -> Profile:
    """The file's defaults with [profiles.`name`] over them. A missing file is no error unless a
    profile is named; a bad file raises ValueError naming the file and the key."""
    path = path or config_path()
    if path is None or not path.is_file():
        if name:
            raise ValueError(f'profile "{name}" asked for, but {path or "no configuration file"} '
                             "does not exist")
        return Profile()
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"{path}: {e}") from e
    profile = Profile()
    _apply(profile, {k: v for k, v in doc.items() if k != "profiles"}, str(path))
    if name:
        table = doc.get("profiles", {}).get(name)
        if not isinstance(table, dict):
            raise ValueError(f"{path}: no [profiles.{name}] (from profile= or $PODPROF_PROFILE)")
        _apply(profile, table, f"{path} [profiles.{name}]")
    return profile


def _apply(profile: Profile, table: Dict[str, Any], where: str) -> None:
    for key, value in table.items():
        if key not in _KEYS:
            raise ValueError(f"{where}: unknown key '{key}' ({', '.join(sorted(_KEYS))})")
        if not isinstance(value, str):
            raise ValueError(f"{where}: {key} must be a string")
        if key == "http":
            if not value.startswith(("http://", "https://")):
                raise ValueError(f'{where}: http = "{value}": want the HTTP API\'s URL, '
                                 "e.g. https://agg:7180")
            profile.http = value
        elif key in ("tls_cert", "tls_key", "tls_ca"):
            setattr(profile, key, value)
        elif key == "timeout":
            profile.timeout_s = parse_duration_s(value, f"{where}: timeout")


_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration_s(text: str, what: str = "duration") -> float:
    """'250ms', '2s', '1.5m', '1h' as seconds; a bad one raises ValueError naming `what`."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*(ms|s|m|h)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f'{what} = "{text}": want a positive duration, e.g. 30s or 250ms')
    return float(m.group(1)) * _UNITS[m.group(2)]
