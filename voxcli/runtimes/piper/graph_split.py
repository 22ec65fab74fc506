"""Split a Piper (VITS) graph in three, once per model: front part, flow, HiFi-GAN decoder.

The cut that costs the first audio least is at the prior sample `z_p`
([1, 192, frames], one frame per 256 samples): everything before it (text
encoder, duration predictor, sampling `z_p = m_p + noise * exp(logs_p) *
noise_scale`) must see the whole sentence, everything after it is
convolutional along the frames and can run a block at a time with a little
context: the flow (`z_p` -> latent `z`, exact with 28 frames of context each
side) and the decoder (`z` -> audio, exact with 10). Cutting after the flow
instead (format 1-2) made the flow run over the whole sentence before any
audio existed (issue 15).

Both seams are found by structure, not by name: `z_p` is the output of the
first `Add` after the last `RandomNormalLike` (the prior's noise; the other
one is the duration predictor's), the latent is the single tensor from
outside the `/dec/` nodes that those nodes read (in en_US-joe-medium
`/Add_output_0` and `/Mul_7_output_0`). The flow also reads the frame mask
(all ones for one unpadded sentence; fed by the caller). `onnx.utils.Extractor`
cuts the graph; the parts are written next to the model's other derived files
(`voxcli.fsutil.atomic_write`, under a file lock so two processes never split
at the same time) and reused while the source model is unchanged and the
parts still have the size and sha256 recorded when they were written
(`voxcli.runtimes.derived`: a flipped byte means splitting again, not noise).
A voice without these seams is not split: the caller synthesizes whole
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
_MANIFEST: Final = "zp-split.json"
_FRONT: Final = "zp-front.onnx"
_FLOW: Final = "zp-flow.onnx"
_DECODER: Final = "zp-decoder.onnx"
_FORMAT: Final = 3  # bump when the split procedure changes (2: front outputs durations; 3: cut at z_p)
_LEGACY: Final = ("split.json", "front.onnx", "decoder.onnx")
"""Files of formats 1-2 (cut after the flow): removed when this format is written (63 MB)."""


@dataclass(frozen=True)
class SplitGraph:
    """The parts of a voice, as paths on disk or serialized bytes (no writable cache)."""

    latent: str
    """Name of the latent `z` between flow and decoder."""
    front: Path | bytes
    """Model inputs -> `z_p` (first output) [+ durations]."""
    decoder: Path | bytes
    """`z` -> audio."""
    durations: str | None = None
    """Name of the per-phoneme duration tensor (frames) the front part also outputs, when found."""
    flow: Path | bytes | None = None
    """`z_p` [+ mask] -> `z`."""
    prior: str = ""
    """Name of `z_p`, the front part's first output and the flow's input."""
    mask: str | None = None
    """Name of the flow's frame-mask input ([1, 1, frames], ones), if it reads one."""


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


def find_durations(model) -> str | None:
    """The duration predictor's rounded output: frames per phoneme id, [1, 1, ids] (None if not found).

    Why: word timings (voxcli.tts.words) need to know which frames each phoneme
    fills. VITS computes `w_ceil = ceil(exp(logw) * mask * length_scale)` and
    sums it (`CumSum`) to lay phonemes out on frames; that `Ceil` is the only
    one in a Piper graph, found by structure, not by name.
    """
    ceils = [n for n in model.graph.node if n.op_type == "Ceil"
             and not n.name.startswith(DECODER_PREFIX)]
    summed = {i for n in model.graph.node if n.op_type == "CumSum" for i in n.input}
    found = [n.output[0] for n in ceils if n.output[0] in summed]
    return found[0] if len(found) == 1 else None


def find_prior(model) -> str:
    """`z_p`: the output of the first `Add` after the last `RandomNormalLike` (raises SplitError).

    VITS samples the prior as `m_p + randn_like(m_p) * exp(logs_p) * noise_scale`;
    the graph's other RandomNormalLike (the stochastic duration predictor's
    noise) comes earlier, since the prior's length depends on the durations.
    """
    nodes = list(model.graph.node)
    noise = [n for n in nodes if n.op_type == "RandomNormalLike"]
    if not noise:
        raise SplitError("no RandomNormalLike: no prior sample to cut at")
    consumers: dict[str, list] = {}
    for n in nodes:
        for name in n.input:
            consumers.setdefault(name, []).append(n)
    frontier, seen = list(noise[-1].output), set()
    while frontier:  # breadth first: the nearest Add downstream of the noise
        following = []
        for tensor in frontier:
            for n in consumers.get(tensor, []):
                if n.op_type == "Add":
                    return n.output[0]
                if id(n) not in seen:
                    seen.add(id(n))
                    following.extend(n.output)
        frontier = following
    raise SplitError("no Add after the prior's RandomNormalLike")


def flow_inputs(model, prior: str) -> list[str]:
    """Tensors computed before `prior` that the rest of the graph reads: the frame mask, if any."""
    graph = model.graph
    consumers: dict[str, list] = {}
    for n in graph.node:
        for name in n.input:
            consumers.setdefault(name, []).append(n)
    after, stack, seen = [], [prior], set()
    while stack:
        for n in consumers.get(stack.pop(), []):
            if id(n) not in seen:
                seen.add(id(n))
                after.append(n)
                stack.extend(n.output)
    inside = {out for n in after for out in n.output} | {prior}
    constants = {i.name for i in graph.initializer}
    constants |= {out for n in graph.node if n.op_type == "Constant" for out in n.output}
    extra = sorted({name for n in after for name in n.input
                    if name and name not in inside and name not in constants})
    if len(extra) > 1:
        raise SplitError(f"the flow reads {len(extra)} tensors besides z_p: {extra[:5]}")
    return extra


def split_in_memory(onnx_path: Path) -> SplitGraph:
    """Cut the graph at `z_p` and at the latent; returns serialized front, flow and decoder models."""
    import onnx
    import onnx.utils

    model = onnx.load(str(onnx_path))
    latent = find_latent(model)
    prior = find_prior(model)
    mask = flow_inputs(model, prior)
    inputs = [i.name for i in model.graph.input]
    outputs = [o.name for o in model.graph.output]
    durations = find_durations(model)
    extractor = onnx.utils.Extractor(model)
    try:
        front = extractor.extract_model(inputs, [prior] + ([durations] if durations else []))
        flow = extractor.extract_model([prior, *mask], [latent])
        decoder = extractor.extract_model([latent], outputs)
    except Exception as exc:  # onnx raises plain exceptions for unreachable tensors
        raise SplitError(f"cannot extract at {prior} / {latent}: {exc}") from exc
    if {i.name for i in decoder.graph.input} != {latent}:
        raise SplitError("the decoder needs more than the latent")
    if {i.name for i in flow.graph.input} != {prior, *mask}:
        raise SplitError("the flow needs more than z_p and the mask")
    return SplitGraph(latent, front.SerializeToString(), decoder.SerializeToString(), durations,
                      flow.SerializeToString(), prior, mask[0] if mask else None)


def load_or_split(onnx_path: Path, derived_dir: Path | None) -> SplitGraph:
    """Front/flow/decoder for `onnx_path`, from `derived_dir` when cached there, else split now.

    Raises SplitError when the voice cannot be split. Without a writable
    `derived_dir` the parts stay in memory (split again next time).
    """
    source = _fingerprint(onnx_path)
    if derived_dir is None:
        return split_in_memory(onnx_path)
    # Every start after the first: reading needs no lock (nor filelock's ~10 ms import, issue 15): the
    # parts are written atomically and checked against their records (quietly here; the locked path says why).
    if derived_dir.is_dir() and not derived.problems(derived_dir, _parts(derived_dir)):
        cached = _read_cached(derived_dir, source)
        if cached is not None:
            return cached
    try:
        derived_dir.mkdir(parents=True, exist_ok=True)
        from filelock import FileLock

        with FileLock(str(derived_dir / "split.lock"), timeout=300):
            cached = _read_cached(derived_dir, source)
            if cached is not None:
                return cached
            split = split_in_memory(onnx_path)
            (derived_dir / _MANIFEST).unlink(missing_ok=True)  # invalid until every part is new
            for name in _LEGACY:
                (derived_dir / name).unlink(missing_ok=True)
            for name, data in ((_FRONT, split.front), (_FLOW, split.flow), (_DECODER, split.decoder)):
                atomic_write(derived_dir / name, data)  # type: ignore[arg-type]
            manifest = {"format": _FORMAT, "source": source, "latent": split.latent,
                        "durations": split.durations, "prior": split.prior, "mask": split.mask}
            atomic_write(derived_dir / _MANIFEST, json.dumps(manifest, indent=1).encode())
            derived.record(derived_dir, _parts(derived_dir))
            _LOG.info("split %s at %s and %s into %s", onnx_path.name, split.prior, split.latent, derived_dir)
            return _on_disk(derived_dir, manifest)
    except OSError as exc:  # read-only or full cache: still stream, from memory
        _LOG.warning("cannot cache the split graph in %s (%s); splitting in memory", derived_dir, exc)
        return split_in_memory(onnx_path)


def _fingerprint(path: Path) -> dict[str, object]:
    st = path.stat()
    return {"name": path.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _parts(derived_dir: Path) -> list[Path]:
    """The files of one split; all four are hashed when written and checked before use."""
    return [derived_dir / _FRONT, derived_dir / _FLOW, derived_dir / _DECODER, derived_dir / _MANIFEST]


def _on_disk(derived_dir: Path, manifest: dict) -> SplitGraph:
    durations, mask = manifest.get("durations"), manifest.get("mask")
    return SplitGraph(str(manifest.get("latent")), derived_dir / _FRONT, derived_dir / _DECODER,
                      str(durations) if durations else None, derived_dir / _FLOW,
                      str(manifest.get("prior")), str(mask) if mask else None)


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
    return _on_disk(derived_dir, manifest)
