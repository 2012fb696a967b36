"""A private profile's credentials, from the environment variable the launch form names (issue 45 item 4).

The form takes a profile URL without credentials and, beside it, the name of an environment
variable the run's process has (the chart gives the run pod one from a Kubernetes Secret). The
variable is read here, as the profile is read, and its value goes to the driver only: it is
never part of the URL that is stored, logged or shown. What the variable holds, by scheme:

- http(s): `user:password` (sent as basic auth: an `Authorization` header, as aiohttp encodes it),
  an `Authorization` header's value (`Bearer ...`, `Basic ...`), or a presigned URL's query from its
  `?` on (`?X-Amz-Algorithm=...&X-Amz-Signature=...`), added to the URL's query as it is fetched;
- any other fsspec URL (s3://, gs://, az://): a JSON object of that filesystem's storage options
  (s3fs: `{"key": ..., "secret": ..., "token": ...}`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from catchup_assets.core.errors import ConfigError

SECRET_ENV_FIELD = "previous_profile_secret_env"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_SCHEMES = ("bearer ", "basic ", "token ")


@dataclass(frozen=True)
class ProfileAccess:
    """How a profile is fetched: the URL the driver gets and its options. Never stored or shown."""

    url: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:  # a traceback's locals or a debug line must not print the secret
        return f"ProfileAccess({self.url.split('?', 1)[0]!r}, credentials withheld)"


def check_env_name(name: str) -> str:
    """`name` if it is an environment variable's name; refused naming the field (never echoing a secret)."""
    if not ENV_NAME.fullmatch(name):
        raise ConfigError(
            f"{SECRET_ENV_FIELD}: not an environment variable's name (letters, digits and _, not first a digit): "
            "give the name of the variable that holds the credentials, not the credentials"
        )
    return name


def profile_access(url: str, secret_env: str | None, environ: Mapping[str, str] | None = None) -> ProfileAccess:
    """`url` with the credentials held by the environment variable `secret_env` (None: none)."""
    if not secret_env:
        return ProfileAccess(url)
    name = check_env_name(secret_env)
    value = (os.environ if environ is None else environ).get(name, "").strip()
    if not value:
        raise ConfigError(
            f"{SECRET_ENV_FIELD}: the environment variable {name} is not set (or empty) in the process reading "
            "the profile: give the run pod that variable from a Kubernetes Secret (docs/how-to.md)"
        )
    if url.startswith(("http://", "https://")):
        if value.startswith("?"):
            joined = "&" if "?" in url else "?"
            return ProfileAccess(url + joined + value[1:])
        if value.lower().startswith(_HEADER_SCHEMES):
            return ProfileAccess(url, {"headers": {"Authorization": value}})
        user, sep, password = value.partition(":")
        if not sep:
            raise ConfigError(
                f"{SECRET_ENV_FIELD}: {name} holds no credentials an http(s) profile takes: "
                "`user:password`, `Bearer <token>` or a presigned query from its `?` on"
            )
        import aiohttp  # fsspec's http driver's client: its own encoding of basic auth

        return ProfileAccess(url, {"headers": {"Authorization": aiohttp.encode_basic_auth(user, password)}})
    try:
        options = json.loads(value)
    except (ValueError, RecursionError):
        options = None
    if not isinstance(options, dict):
        raise ConfigError(
            f"{SECRET_ENV_FIELD}: {name} must hold a JSON object of storage options for {url.split('://')[0]}:// "
            '(s3: {"key": ..., "secret": ...})'
        )
    return ProfileAccess(url, options)
