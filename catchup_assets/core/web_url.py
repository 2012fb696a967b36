"""A web UI's base URL as the deployment names one (the Dagster webserver, the mission console): checked once.

Such a URL is joined with paths into links and GraphQL requests, so it holds nothing else: a scheme of
http or https, a host (a DNS name or a bracketed IP literal), an optional port and path, and no
credentials, query or fragment.
"""

from __future__ import annotations

import re

from catchup_assets.core.errors import ConfigError

# For the chart's values schema too (chart_schema.py): the same shape as `check_base_url` checks.
BASE_URL_PATTERN = (
    r"^https?://([A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?(/[A-Za-z0-9._~-]+)*/?$"
)
_BASE_URL = re.compile(BASE_URL_PATTERN)
# scheme://host[:port] alone: what a browser sends as Origin (the console's --public-url).
ORIGIN_PATTERN = r"^https?://([A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$"


def check_base_url(url: str, field: str) -> str:
    """`url` less its trailing slash; ConfigError naming `field` unless it is http(s)://host[:port][/path]."""
    match = _BASE_URL.fullmatch(url)
    if not match or (match.group(3) and int(match.group(3)[1:]) > 65535):
        raise ConfigError(f"{field}: {url!r} is not http(s)://host[:port][/path] (no credentials, query or fragment)")
    return url.rstrip("/")
