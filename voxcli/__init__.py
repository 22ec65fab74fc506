"""voxcli: on-device streaming speech.

The public library API; imports are lazy so `import voxcli` costs nothing and
never pulls in onnxruntime, typer or rich until a function is used.

    import voxcli
    s = voxcli.open_tts_streamer()
    s.send("Hello "); s.send("world."); s.finish()
    for chunk in s.output: ...
    for r in voxcli.transcribe_many(["talks/"], out_dir="subs", format="srt"): ...
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "open_tts_streamer",
    "load_voice",
    "open_asr_streamer",
    "pull",
    "transcribe_many",
    "VoxError",
]

_LAZY = {
    "open_tts_streamer": ("voxcli.tts.streamer", "open_tts_streamer"),
    "load_voice": ("voxcli.tts.streamer", "load_voice"),
    "open_asr_streamer": ("voxcli.asr.open_streamer", "open_asr_streamer"),
    "pull": ("voxcli.hub.pull", "pull"),
    "transcribe_many": ("voxcli.corpus.asr_job", "transcribe_many"),
    "VoxError": ("voxcli.errors", "VoxError"),
}

if TYPE_CHECKING:  # pragma: no cover
    from voxcli.errors import VoxError


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'voxcli' has no attribute {name!r}")
