"""Who may change a mission through the console: reads are open, writes carry the operator's token.

The token is read once, at start, from `--token-file` (the chart mounts a Secret there); without one
the console is read-only. A write is judged before its body is read, in this order:

1. cross-site: a browser names where a request came from (`Sec-Fetch-Site`, `Origin`); one sent
   from another site's page is refused, whatever it carries, so a page elsewhere cannot drive an
   operator's browser into a control change;
2. read-only: no token file, no write;
3. the bearer token, compared in constant time (hmac.compare_digest): missing or wrong is 401.
"""

from __future__ import annotations

import hmac
import os
import re
from dataclasses import dataclass

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.web_url import ORIGIN_PATTERN

MIN_TOKEN_CHARS = 16  # a token shorter than this is guessable: refused at start
MAX_TOKEN_BYTES = 4096
SAME_SITE = ("same-origin", "none")  # `none`: typed by the user or sent by a non-browser client (curl)


def load_token(path: str) -> str:
    """The token in `path` (one line; surrounding whitespace dropped); ConfigError naming the file."""
    try:
        if not os.path.isfile(path):
            raise ConfigError(f"--token-file: {path!r} is not a regular file")
        with open(path, "rb") as f:
            data = f.read(MAX_TOKEN_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"--token-file: {path!r} cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_TOKEN_BYTES:
        raise ConfigError(f"--token-file: {path!r} is over {MAX_TOKEN_BYTES} bytes: a token, not a document")
    try:
        token = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ConfigError(f"--token-file: {path!r} holds a token that is not ASCII") from None
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"--token-file: {path!r} holds {len(token)} characters, at least {MIN_TOKEN_CHARS}")
    if not all(33 <= ord(ch) < 127 for ch in token):  # one header value: no space, no control character
        raise ConfigError(f"--token-file: {path!r} holds a space or control character in its token")
    return token


_ORIGIN = re.compile(ORIGIN_PATTERN)


def check_public_url(url: str) -> str:
    """`--public-url`: the scheme://host[:port] an operator's browser reaches the console at (an ingress that
    terminates TLS), the Origin a write must carry; a trailing slash dropped. ConfigError naming the flag."""
    origin = url.rstrip("/")
    match = _ORIGIN.fullmatch(origin)
    if not match or (match.group(3) and int(match.group(3)[1:]) > 65535):
        raise ConfigError(f"--public-url: {url!r} is not an origin, scheme://host[:port] (no path, no credentials)")
    return origin


@dataclass(frozen=True)
class Refusal:
    status: int
    error: str


def refuse_write(headers, own_origin: str, token: str | None) -> Refusal | None:
    """Why this write may not happen (None: it may). `headers`: the request's (case-insensitive);
    `own_origin`: scheme://host[:port] the request was addressed to."""
    site = headers.get("sec-fetch-site")
    if site is not None and site not in SAME_SITE:
        return Refusal(403, f"cross-site write refused (Sec-Fetch-Site: {site})")
    origin = headers.get("origin")
    if origin is not None and origin != own_origin:
        return Refusal(403, f"cross-site write refused: Origin {origin} is not this console's {own_origin}")
    if token is None:
        return Refusal(403, "read-only console: started without --token-file, it changes nothing")
    scheme, _, given = (headers.get("authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        return Refusal(401, "a write needs Authorization: Bearer <the console's token>")
    return None
