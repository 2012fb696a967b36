"""Credentials out of a URL before it is stored or shown (issue 36 item 10, issue 45 item 4).

A URL can carry a credential two ways: userinfo (`https://user:password@host/...`, which fsspec's
http driver sends as basic auth) and a presigned query (`?X-Amz-Credential=...&X-Amz-Signature=...`,
GCS's `X-Goog-Signature`, an Azure SAS's `sig`, a `token`). Every copy kept for a person to read
(mission.json's `*_source`, the plan's metadata, a log line, a refusal) goes through `redact_url`
first, so neither reaches the run storage or the compute logs. `url_credentials` names what a URL
carries, so the launch form can refuse it inline and say how to pass it by reference instead.

No maintained library redacts URLs inside free text (a driver's error message quotes its URL
anywhere in a sentence); urllib.parse reads one URL's parts for `url_credentials`, and the text
redaction is two patterns over the same parts.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

REDACTED = "***"

# scheme://userinfo@ anywhere in a text: greedy to the authority's last "@" (a raw "@" in a
# password is common), never past its end ("/", "?", "#" or whitespace).
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*://)[^/?#\s]*@")

# A query parameter whose value is a credential, by name (case-insensitive): AWS SigV4 and SigV2
# presigning, GCS v4 and v2 signed URLs, Azure SAS, and the common token and key names.
_SECRET_PARAM = (
    r"x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|x-goog-credential"
    r"|signature|sig|awsaccesskeyid|googleaccessid|[\w.-]*token|[\w.-]*secret|password|passwd"
    r"|api[-_]?key|access[-_]?key(?:[-_]?id)?|credential|auth|authorization"
)
_SECRET_PARAM_NAME = re.compile(rf"(?:{_SECRET_PARAM})", re.IGNORECASE)
# name=value after "?", "&" or ";" in a text: the value up to the next separator, fragment or space.
_QUERY_SECRET = re.compile(rf"([?&;](?:{_SECRET_PARAM})=)[^&;#\s'\"]*", re.IGNORECASE)


def redact_url(text: str) -> str:
    """`text` with every URL's userinfo and credential query values replaced by ***:
    `s3://k:s@b/p` -> `s3://***@b/p`, `https://h/p?X-Amz-Signature=ab12&x=1` -> `https://h/p?X-Amz-Signature=***&x=1`.
    """
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    return _QUERY_SECRET.sub(lambda m: f"{m.group(1)}{REDACTED}", text)


def url_credentials(url: str) -> list[str]:
    """What credentials `url` carries inline, by name: `userinfo` and each secret query parameter's name."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:  # an unparseable authority (a stray "[", say): read the text as redact_url does
        return ["userinfo"] if _USERINFO.search(url) else []
    found = ["userinfo"] if "@" in parts.netloc else []
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
        if _SECRET_PARAM_NAME.fullmatch(name) and name not in found:
            found.append(name)
    return found
