"""Resume a partial download only into the same version of the file.

A `Range` request after a dropped connection (or in a later run) asks the
server for "the rest"; if the file changed on the server in between, the
rest is the rest of another version, and without a known sha256 the spliced
file would be installed. So the download remembers the version it started
(strong ETag, else Last-Modified) in `<key>.part.meta` next to the partial
file, and pins every resume with `If-Range`: a server whose file changed
answers 200 with the whole new body, which replaces the partial file. A 206
is accepted only when its `Content-Range` starts where we asked and its
validator (if it sends one) is the remembered one; anything else restarts
from zero. With neither a validator nor a sha256 there is nothing to pin a
resume to, so the download starts over (as curl -C would not, and pip does).
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

from voxcli.fsutil import atomic_write

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(?:(\d+)-(\d+)|\*)/(\d+|\*)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Validator:
    """What identifies one version of a file on the server."""

    etag: str | None = None
    """A strong ETag (weak `W/` ones cannot pin a byte range, RFC 9110 13.1.5)."""
    last_modified: str | None = None

    @classmethod
    def of(cls, headers: Mapping[str, str]) -> "Validator":
        etag = headers.get("etag")
        if etag is not None and etag.startswith("W/"):
            etag = None
        return cls(etag or None, headers.get("last-modified") or None)

    @property
    def if_range(self) -> str | None:
        """The `If-Range` value: the ETag, else the date (None: nothing to pin to)."""
        return self.etag or self.last_modified

    def same_as(self, reply: "Validator") -> bool:
        """Does a 206 reply describe the remembered version? Only a validator it sends can say no."""
        if self.etag and reply.etag:
            return self.etag == reply.etag
        if not self.etag and self.last_modified and reply.last_modified:
            return self.last_modified == reply.last_modified
        return True


def meta_path(part: Path) -> Path:
    return part.with_name(part.name + ".meta")


def load(part: Path) -> Validator:
    """The remembered version of `part` (empty when none was recorded, e.g. an older voxcli's partial)."""
    try:
        data: Any = json.loads(meta_path(part).read_text(encoding="utf-8"))
        return Validator(data.get("etag"), data.get("last_modified"))
    except (OSError, ValueError, AttributeError):
        return Validator()


def remember(part: Path, validator: Validator) -> None:
    """Record the version a fresh download started with (before its first byte is written)."""
    if validator.if_range is None:
        meta_path(part).unlink(missing_ok=True)
    else:
        atomic_write(meta_path(part), json.dumps(asdict(validator)), durable=False)


def discard(part: Path) -> None:
    """Forget a partial download: its bytes and its remembered version."""
    part.unlink(missing_ok=True)
    meta_path(part).unlink(missing_ok=True)


def resume_headers(part: Path, *, pinned_by_hash: bool) -> tuple[int, dict[str, str]]:
    """(bytes to keep, request headers) for the next GET of `part`'s URL.

    A partial file is resumed when its version is remembered (`If-Range`) or
    when a known sha256 will reject a splice anyway; otherwise it is dropped.
    """
    have = part.stat().st_size if part.exists() else 0
    if not have:
        return 0, {}
    pin = load(part).if_range
    if pin is not None:
        return have, {"Range": f"bytes={have}-", "If-Range": pin}
    if pinned_by_hash:
        return have, {"Range": f"bytes={have}-"}
    discard(part)
    return 0, {}


def range_start(content_range: str | None) -> int | None:
    """First byte of a `Content-Range: bytes A-B/N` header (None when absent or unparsable)."""
    m = _CONTENT_RANGE.match(content_range or "")
    return int(m.group(1)) if m and m.group(1) is not None else None


def range_total(content_range: str | None) -> int | None:
    """N of `Content-Range: bytes */N` (a 416's "the file has N bytes"), None when unknown."""
    m = _CONTENT_RANGE.match(content_range or "")
    return int(m.group(3)) if m and m.group(3) != "*" else None
