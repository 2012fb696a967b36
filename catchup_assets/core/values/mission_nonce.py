"""The mission's nonce: made when it is planned, kept in its mission.json, the key every backend signs
the mission's objects with (issue 45 item 1).

Both backends use it the same way: what they make carries an HMAC of its name (and, on Kubernetes, its
spec) under this key, and what does not carry one is not the mission's, whoever made it and whatever it
is named. The nonce never leaves the storage root, so the signatures shown do not let anyone make another.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass

from catchup_assets.core.errors import ConfigError

NONCE_RE = re.compile(r"[0-9a-f]{32}")


def new_nonce() -> str:
    return secrets.token_hex(16)


@dataclass(frozen=True)
class MissionNonce:
    value: str

    def __post_init__(self) -> None:
        if not isinstance(self.value, str) or not NONCE_RE.fullmatch(self.value):
            raise ConfigError(f"mission nonce must be 32 lowercase hex digits, not {self.value!r}")

    def sign(self, *parts: str) -> str:
        """HMAC-SHA256 under the nonce of `parts`, as one canonical JSON list."""
        message = json.dumps(list(parts), separators=(",", ":")).encode()
        return hmac.new(bytes.fromhex(self.value), message, hashlib.sha256).hexdigest()

    def signed(self, tag: object, *parts: str) -> bool:
        """`tag` is this nonce's signature of `parts` (compared in constant time)."""
        return isinstance(tag, str) and hmac.compare_digest(tag, self.sign(*parts))
