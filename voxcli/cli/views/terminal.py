"""Whether a stream gets rich output: the one test every view uses before it imports rich."""
from __future__ import annotations

import os
import sys
from typing import IO


def fancy_terminal(stream: IO[str] | None = None) -> bool:
    """True when rich output is wanted: a TTY, NO_COLOR unset, TERM not dumb (else the plain fallback)."""
    stream = stream or sys.stderr
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
