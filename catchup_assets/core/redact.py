"""Credentials out of a URL before it is stored or shown (issue 36 item 10).

An operator may give a profile or a hashes file as `https://user:password@host/...` (fsspec's
http driver sends it as basic auth). The URL as given is what reads the file; every copy kept for
a person to read (mission.json's `*_source`, the plan's metadata, a log line, a refusal) goes
through `redact_url` first, so the password never reaches the run storage or the compute logs.
"""

from __future__ import annotations

import re

# scheme://userinfo@ anywhere in a text: greedy to the authority's last "@" (a raw "@" in a
# password is common), never past its end ("/", "?", "#" or whitespace).
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*://)[^/?#\s]*@")
REDACTED = "***"


def redact_url(text: str) -> str:
    """`text` with the userinfo of every URL in it replaced by ***: `s3://k:s@b/p` -> `s3://***@b/p`."""
    return _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
