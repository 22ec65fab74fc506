"""A subprocess environment in which `import sounddevice` fails as on a machine without libportaudio2.

PortAudio cannot be uninstalled for one test, so a `sitecustomize` on the
child's PYTHONPATH makes `import sounddevice` raise the OSError sounddevice
itself raises when the library is missing ("PortAudio library not found").
"""
from __future__ import annotations

import os
from pathlib import Path

SITECUSTOMIZE = '''
import sys

class _NoPortAudio:
    """Every import of sounddevice fails the way it does without libportaudio2."""

    def find_spec(self, name, path=None, target=None):
        if name == "sounddevice" or name.startswith("sounddevice."):
            raise OSError("PortAudio library not found")
        return None

sys.meta_path.insert(0, _NoPortAudio())
'''


def env_without_portaudio(site: Path) -> dict[str, str]:
    """os.environ plus NO_COLOR, with a new directory `site` holding the shim first on PYTHONPATH."""
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "NO_COLOR": "1"}
