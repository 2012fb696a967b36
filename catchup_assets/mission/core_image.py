"""The stellar-core a mission's attempts run, as mission.json records it: an image reference, or a binary's hash."""

import hashlib


def image_reference(ref: str) -> dict[str, str | None]:
    """An image reference's tag and digest, as far as the reference itself says them."""
    name, _, digest = ref.partition("@")
    last = name.rsplit("/", 1)[-1]  # a registry's port is not a tag: registry:5000/core
    tag = last.partition(":")[2] or None
    return {"image": ref, "tag": tag, "digest": digest or None}


def file_sha256(path: str) -> str | None:
    """`sha256:<hex>` of a file's bytes, read in chunks; None (no failure) if it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return f"sha256:{digest.hexdigest()}"
