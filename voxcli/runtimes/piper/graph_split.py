"""Split a Piper (VITS) graph into front part and HiFi-GAN decoder, once per model.

Streaming inside a sentence needs the latent `z` ([1, 192, frames], one frame
per 256 samples) that the flow hands to the decoder: the decoder is
convolutional, so blocks of `z` can be vocoded separately with a little
context. The latent is found by inspection, not by name: it is the single
tensor produced outside the `/dec/` nodes that those nodes read (in
en_US-joe-medium it is `/Mul_7_output_0`). `onnx.utils.Extractor` cuts the
graph there; the two parts are written next to the model's other derived
files (`voxcli.fsutil.atomic_write`, under a file lock so two processes
never split at the same time) and reused while the source model is unchanged
and the parts still have the size and sha256 recorded when they were written
(`voxcli.runtimes.derived`: a flipped byte means splitting again, not noise).
A voice without such a tensor is not split: the caller synthesizes whole
sentences instead.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from voxcli.fsutil import atomic_write
from voxcli.runtimes import derived

_LOG = logging.getLogger(__name__)

DECODER_PREFIX: Final = "/dec/"
_MANIFEST: Final = "split.json"
_FRONT: Final = "front.onnx"
_DECODER: Final = "decoder.onnx"
_FORMAT: Final = 1  # bump when the split procedure changes


@dataclass(frozen=True)
class SplitGraph:
    """The two halves of a voice, as paths on disk or serialized bytes (no writable cache)."""

    latent: str
    """Name of the latent tensor between the parts."""
    front: Path | bytes
    decoder: Path | bytes


class SplitError(Exception):
    """This graph cannot be split; synthesize whole sentences instead."""


def find_latent(model) -> str:
    """The one tensor from outside `/dec/` that feeds the decoder nodes (raises SplitError)."""
    graph = model.graph
    decoder = [n for n in graph.node if n.name.startswith(DECODER_PREFIX)]
    if not decoder:
        raise SplitError(f"no {DECODER_PREFIX} nodes")
    inside = {out for n in decoder for out in n.output}
    constants = {i.name for i in graph.initializer}
    constants |= {out for n in graph.node if n.op_type == "Constant" for out in n.output}
    outside = {name for n in decoder for name in n.input
               if name and name not in inside and name not in constants}
    if len(outside) != 1:
        raise SplitError(f"decoder reads {len(outside)} outside tensors: {sorted(outside)[:5]}")
    return outside.pop()


def split_in_memory(onnx_path: Path) -> SplitGraph:
    """Cut the graph at the latent; returns serialized front and decoder models."""
    import onnx
    import onnx.utils

    model = onnx.load(str(onnx_path))
    latent = find_latent(model)
    inputs = [i.name for i in model.graph.input]
    outputs = [o.name for o in model.graph.output]
    extractor = onnx.utils.Extractor(model)
    try:
        front = extractor.extract_model(inputs, [latent])
        decoder = extractor.extract_model([latent], outputs)
    except Exception as exc:  # onnx raises plain exceptions for unreachable tensors
        raise SplitError(f"cannot extract at {latent}: {exc}") from exc
    if {i.name for i in decoder.graph.input} != {latent}:
        raise SplitError("the decoder needs more than the latent")
    return SplitGraph(latent, front.SerializeToString(), decoder.SerializeToString())


def load_or_split(onnx_path: Path, derived_dir: Path | None) -> SplitGraph:
    """Front/decoder for `onnx_path`, from `derived_dir` when cached there, else split now.

    Raises SplitError when the voice cannot be split. Without a writable
    `derived_dir` the parts stay in memory (split again next time).
    """
    source = _fingerprint(onnx_path)
    if derived_dir is None:
        return split_in_memory(onnx_path)
    try:
        derived_dir.mkdir(parents=True, exist_ok=True)
        from filelock import FileLock

        with FileLock(str(derived_dir / "split.lock"), timeout=300):
            cached = _read_cached(derived_dir, source)
            if cached is not None:
                return cached
            split = split_in_memory(onnx_path)
            (derived_dir / _MANIFEST).unlink(missing_ok=True)  # invalid until both parts are new
            atomic_write(derived_dir / _FRONT, split.front)  # type: ignore[arg-type]
            atomic_write(derived_dir / _DECODER, split.decoder)  # type: ignore[arg-type]
            manifest = {"format": _FORMAT, "source": source, "latent": split.latent}
            atomic_write(derived_dir / _MANIFEST, json.dumps(manifest, indent=1).encode())
            derived.record(derived_dir, _parts(derived_dir))
            _LOG.info("split %s at %s into %s", onnx_path.name, split.latent, derived_dir)
            return SplitGraph(split.latent, derived_dir / _FRONT, derived_dir / _DECODER)
    except OSError as exc:  # read-only or full cache: still stream, from memory
        _LOG.warning("cannot cache the split graph in %s (%s); splitting in memory", derived_dir, exc)
        return split_in_memory(onnx_path)


def _fingerprint(path: Path) -> dict[str, object]:
    st = path.stat()
    return {"name": path.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _parts(derived_dir: Path) -> list[Path]:
    """The files of one split; all three are hashed when written and checked before use."""
    return [derived_dir / _FRONT, derived_dir / _DECODER, derived_dir / _MANIFEST]


def _read_cached(derived_dir: Path, source: dict[str, object]) -> SplitGraph | None:
    """The cached split if it is of this source and every part is as recorded, else None (split again)."""
    if not derived.usable(derived_dir, _parts(derived_dir), "the split voice graph"):
        return None
    try:
        manifest = json.loads((derived_dir / _MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT or manifest.get("source") != source:
        return None
    return SplitGraph(str(manifest.get("latent")), derived_dir / _FRONT, derived_dir / _DECODER)
