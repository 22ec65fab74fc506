"""Remember a split voice's probe verdict next to its split, so a cold start does not run the probe again.

Why: `PiperVoice._probe` synthesizes a short sentence through the split parts
to check they give frames x hop samples. It is the same answer for the same
parts every time, but it cost 50-150 ms of every `voxcli speak` cold start
before the first real block could start (issue 15, "cold start"); the first
block warms the sessions up as well as the probe did. The verdict is kept in
`probe.json` in the split's directory, keyed by the parts' names, sizes and
mtimes (the split is rewritten, hence re-probed, whenever it changes; its
content is checked by `voxcli.runtimes.derived` on load). In-memory parts
(no writable cache) are probed every time.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Callable, Final

_LOG = logging.getLogger(__name__)
_FILE: Final = "probe.json"
_VERSION: Final = 1
"""Bump when what the probe checks changes: every recorded verdict is then probed again."""


def _key(parts: list[Path]) -> str:
    ids = [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in parts]
    return hashlib.sha256(json.dumps([_VERSION, ids]).encode()).hexdigest()


def probed(split: Any, probe: Callable[[], bool]) -> bool:
    """The recorded verdict for these split parts, else `probe()` (recorded when the parts are files)."""
    parts = [p for p in (getattr(split, n, None) for n in ("front", "flow", "decoder")) if p is not None]
    if not parts or not all(isinstance(p, Path) for p in parts):  # in memory: nothing to key a record by
        return probe()
    record = parts[0].parent / _FILE
    try:
        key: str | None = _key(parts)
    except OSError:
        key = None
    try:
        saved = json.loads(record.read_text(encoding="utf-8"))
        if key is not None and isinstance(saved, dict) and saved.get("key") == key and isinstance(saved.get("ok"), bool):
            return saved["ok"]
    except (OSError, ValueError):
        pass  # none recorded yet, or unreadable: probe
    ok = probe()
    if key is not None:
        try:
            from voxcli.fsutil import atomic_write

            atomic_write(record, json.dumps({"key": key, "ok": ok}).encode(), durable=False)
        except OSError as exc:  # read-only cache: probe again next time
            _LOG.info("cannot record the probe verdict in %s: %s", record, exc)
    return ok
