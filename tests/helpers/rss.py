"""Peak-RSS growth measured in a fresh interpreter, for the memory-stays-flat tests.

A fresh process, because the test process's own models, arenas and earlier
tests would hide growth or fake it. The child script gets `hwm_mb()`:
`hwm_mb(reset=True)` sets the peak to the current RSS (else the model load's
transient peak hides growth) and returns it; `hwm_mb()` is the peak since, in MB.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

HWM_MB = textwrap.dedent("""
    def hwm_mb(reset=False):
        if reset:  # peak RSS := current RSS (else the model load's transient peak hides growth)
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
""")


def run_measured(script: str, *args: object, timeout: float) -> dict[str, Any]:
    """Run `script` (which may call `hwm_mb`) with `args` as sys.argv[1:]; the JSON its last line prints."""
    out = subprocess.run([sys.executable, "-c", HWM_MB + textwrap.dedent(script), *map(str, args)],
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])
