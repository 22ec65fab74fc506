"""LocalLLM: SmolLM2-135M-Instruct on onnxruntime, an `LLMClient` with no network.

Why this shape: the chat loop only needs `stream(messages)` and `cancel()`;
everything model-specific (GGUF -> ONNX graph build, tokenizer, template,
truncation, sampling) hides behind them. The prompt is prefilled in one run
(in 512-token runs beyond that, to bound attention scratch memory), then one
run per token; the KV cache is kept across turns so only the part of the
prompt that changed is prefilled (`kv_cache.py`). `cancel()` is checked
between tokens and also aborts a running prefill through onnxruntime's
RunOptions.terminate, so a cancel returns within one token.

Precision: "fast" (default) lets MatMulNBits quantize activations to int8 per
32-block -- what llama.cpp does with Q8_1 -- about 3-4x faster on 2 cores;
"exact" keeps fp32 activations and matches the numpy reference to ~1e-4.
"""
from __future__ import annotations

import gc
import os
import threading
import time
import weakref
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator, Literal

import numpy as np

from voxcli.errors import LLMError, ModelNotFoundError, UsageError
from voxcli.events import TextDelta
from voxcli.llm.base import make_metrics
from voxcli.runtimes.smollm.graph import EMBED_NAME, MAX_POSITIONS
from voxcli.runtimes.smollm.kv_cache import KVCache
from voxcli.runtimes.smollm.prompt import DEFAULT_SYSTEM, FittedPrompt, fit_messages

DEFAULT_MODEL = "smollm2-135m-instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

Precision = Literal["fast", "exact"]
_LEVELS = {"fast": 4, "exact": 0}
PREFILL_CHUNK = 512
"""Prompt tokens per prefill run: bounds attention scratch memory (heads x chunk x context)."""


@dataclass(frozen=True)
class LocalLLMConfig:
    """Generation and runtime options of the on-device model."""

    max_new_tokens: int = 256
    """Reply length cap; also reserved out of the context window for the reply."""
    temperature: float = 0.0
    """0 = greedy (deterministic); > 0 samples from softmax(logits / T)."""
    top_p: float = 0.9
    """Nucleus sampling: smallest set of tokens whose probability reaches top_p."""
    seed: int | None = 0
    """Sampling seed, reset at each `stream` call so a reply is reproducible."""
    context_window: int = 2048
    """Prompt + reply tokens (the model was trained to 8192; shorter is faster on CPU)."""
    system_prompt: str | None = DEFAULT_SYSTEM
    """Inserted when the conversation has no system message (None: none)."""
    precision: Precision = "fast"
    threads: int | None = None
    """onnxruntime intra-op threads; None = min(4, cpu count)."""


class _Stopped(Exception):
    """Internal: the stream was cancelled between two runs."""


class _Handle:
    """Cancellation state of one `stream` call: a flag for between tokens, RunOptions for mid-run."""

    def __init__(self, run_options) -> None:
        self.run_options = run_options
        self.cancelled = threading.Event()

    def cancel(self) -> None:
        self.cancelled.set()
        self.run_options.terminate = True


def _check_config(cfg: LocalLLMConfig, max_context: int) -> None:
    """Reject settings that cannot work with one clear line (UsageError, exit 2)."""
    if cfg.precision not in _LEVELS:
        raise UsageError(f"precision must be 'fast' or 'exact', not {cfg.precision!r}")
    if not 64 <= cfg.context_window <= max_context:
        raise UsageError(f"context window must be between 64 and {max_context} tokens, not {cfg.context_window}")
    if not 1 <= cfg.max_new_tokens <= cfg.context_window // 2:
        raise UsageError(
            f"max new tokens must be between 1 and half the context window ({cfg.context_window // 2}), "
            f"not {cfg.max_new_tokens}"
        )
    if cfg.temperature < 0 or not 0 < cfg.top_p <= 1:
        raise UsageError("temperature must be >= 0 and top_p in (0, 1]")


def _dequantize_rows(model, name: str, rows: int = 4096) -> np.ndarray:
    """float32 copy of a Q8_0 table, built in row chunks so the peak stays near one copy."""
    q = model.q8_0(name) if model.qtype(name) == "Q8_0" else None
    if q is None:
        return model.float32(name)
    n, nb, qk = q.codes.shape
    out = np.empty((n, nb * qk), dtype=np.float32)
    for r in range(0, n, rows):
        blk = q.codes[r : r + rows].astype(np.float32) * q.scales[r : r + rows, :, None]
        out[r : r + rows] = blk.reshape(-1, nb * qk)
    return out


def _sample(logits: np.ndarray, cfg: LocalLLMConfig, rng: np.random.Generator) -> int:
    """Greedy argmax, or temperature + top-p (nucleus) sampling."""
    if cfg.temperature <= 0:
        return int(np.argmax(logits))
    z = logits.astype(np.float64) / cfg.temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    order = np.argsort(-p)
    cum = np.cumsum(p[order])
    keep = order[: int(np.searchsorted(cum, cfg.top_p) + 1)]
    q = p[keep] / p[keep].sum()
    return int(keep[rng.choice(len(keep), p=q)])


class LocalLLM:
    """The on-device chat model. Build with `LocalLLM.load(gguf_path, derived_dir)`."""

    def __init__(self, session, embed: np.ndarray | None, tokenizer, n_layers: int, n_kv: int, head_dim: int,
                 config: LocalLLMConfig) -> None:
        import onnxruntime as ort

        self._session = session
        self._embed = embed
        self.tokenizer = tokenizer
        self._n_layers, self._n_kv, self._hd = n_layers, n_kv, head_dim
        self.config = config
        self._ort = ort
        self._active: "weakref.WeakSet[_Handle]" = weakref.WeakSet()
        self._cache: KVCache | None = None
        """Shared across turns so a growing conversation only prefills what is new."""
        self._lock = threading.Lock()
        self._max_context = MAX_POSITIONS
        self.name = "on-device model"
        """Shown by `voxcli chat` ("chat with ...")."""
        self.last_prompt: FittedPrompt | None = None
        """What the last `stream` sent (for callers that show truncation)."""

    @classmethod
    def load(cls, gguf_path: Path, derived_dir: Path, config: LocalLLMConfig | None = None) -> "LocalLLM":
        """Open the GGUF, build (once) the ONNX decoder in `derived_dir`, start a session."""
        import onnxruntime as ort

        from voxcli.runtimes.smollm.artifacts import info_path, load_model_info
        from voxcli.runtimes.smollm.gguf import GGUFModel, file_fingerprint
        from voxcli.runtimes.smollm.graph import ensure_decoder, graph_filename

        config = config or LocalLLMConfig()
        _check_config(config, MAX_POSITIONS)
        gguf_path, derived_dir = Path(gguf_path), Path(derived_dir)
        level = _LEVELS[config.precision]
        graph = derived_dir / graph_filename(file_fingerprint(gguf_path), level)
        info_cached = info_path(gguf_path, derived_dir).exists()
        # parse the GGUF only when something must be built (first use) or read from it
        model = None if graph.exists() and info_cached else GGUFModel(gguf_path)
        graph = ensure_decoder(gguf_path, derived_dir, level, model)
        info = load_model_info(gguf_path, derived_dir, model)
        c = info.config
        _check_config(config, min(c.context, MAX_POSITIONS))
        so = ort.SessionOptions()
        so.intra_op_num_threads = config.threads or min(4, os.cpu_count() or 1)
        so.inter_op_num_threads = 1
        try:
            session = ort.InferenceSession(str(graph), so, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise LLMError(f"cannot load the decoder graph {graph}: {exc}") from exc
        embed = None
        if any(i.name == EMBED_NAME for i in session.get_inputs()):  # "exact": float32 table fed at run
            embed = _dequantize_rows(model or GGUFModel(gguf_path), "token_embd.weight")
        tokenizer = info.tokenizer
        del model
        gc.collect()  # the GGUF reader's metadata parse holds ~160 MB of small arrays in cycles
        llm = cls(session, embed, tokenizer, c.n_layers, c.n_kv_heads, c.head_dim, config)
        llm._max_context = min(c.context, MAX_POSITIONS)
        llm.name = f"{Path(gguf_path).stem} (on-device, {config.precision})"
        return llm

    # -- LLMClient ----------------------------------------------------------
    def cancel(self) -> None:
        """Stop every running `stream` at its next token (aborts a prefill in progress)."""
        with self._lock:
            handles = list(self._active)
        for h in handles:
            h.cancel()

    def stream(self, messages: list[dict], **overrides) -> Iterator[TextDelta]:
        """Reply to `messages` token by token; the last delta carries the metrics.

        `overrides` replace fields of the config for this call (e.g. temperature=0.7).
        """
        t0 = time.perf_counter()
        cfg = replace(self.config, **overrides) if overrides else self.config
        _check_config(cfg, self._max_context)
        fitted = fit_messages(
            messages, self.tokenizer.encode, cfg.context_window - cfg.max_new_tokens,
            default_system=cfg.system_prompt,
        )
        # registered now, not at the first next(): a cancel() that comes before
        # iteration starts still applies; the weak set forgets dropped streams
        handle = _Handle(self._ort.RunOptions())
        with self._lock:
            self._active.add(handle)
        return self._generate(fitted, cfg, handle, t0)

    # -- generation ----------------------------------------------------------
    def _new_cache(self, capacity: int) -> KVCache:
        extra = {EMBED_NAME: self._embed} if self._embed is not None else None
        return KVCache(self._session, self._n_layers, self._n_kv, self._hd, capacity, extra)

    def _claim_cache(self, handle: "_Handle", capacity: int) -> KVCache:
        """The shared cache if free (or held by a cancelled stream), else a private one."""
        with self._lock:
            c = self._cache
            free = c is None or c.owner is None or getattr(c.owner, "cancelled").is_set()
            if not free:
                return self._new_cache(capacity)  # a concurrent stream: do not share
            if c is None or c.capacity < capacity:
                c = self._cache = self._new_cache(capacity)
            c.owner = handle
            return c

    def _release_cache(self, handle: "_Handle") -> None:
        with self._lock:
            if self._cache is not None and self._cache.owner is handle:
                self._cache.owner = None

    def reset_cache(self) -> None:
        """Forget the cached conversation (the next stream prefills from scratch)."""
        with self._lock:
            if self._cache is not None and self._cache.owner is None:
                self._cache = None

    def _feed(self, cache: KVCache, ids: list[int], handle: "_Handle | None" = None) -> np.ndarray:
        """Run `ids` (in prefill chunks) after what `cache` holds; logits of the last one."""
        logits = None
        for start in range(0, len(ids), PREFILL_CHUNK):
            with cache.lock:  # re-check under the lock: a cache taken over must not be written again
                if handle is not None and handle.cancelled.is_set():
                    raise _Stopped
                logits = cache.run(ids[start : start + PREFILL_CHUNK], handle.run_options if handle else None)
        assert logits is not None
        return logits

    def _generate(self, fitted: FittedPrompt, cfg: LocalLLMConfig, handle: "_Handle", t0: float) -> Iterator[TextDelta]:
        from voxcli.runtimes.smollm.tokenizer import IncrementalDecoder

        self.last_prompt = fitted
        t_first: float | None = None
        rng = np.random.default_rng(cfg.seed)
        decoder = IncrementalDecoder(self.tokenizer)
        stop = self.tokenizer.stop_ids
        cache = self._claim_cache(handle, cfg.context_window)
        reused = cache.reuse_prefix(fitted.ids)
        index, generated = 0, 0
        pending = fitted.ids[reused:]
        try:
            while generated < cfg.max_new_tokens and not handle.cancelled.is_set():
                try:
                    logits = self._feed(cache, pending, handle)
                except _Stopped:
                    break
                except Exception as exc:
                    if handle.cancelled.is_set():  # RunOptions.terminate aborted the run
                        break
                    raise LLMError(f"local model failed: {exc}") from exc
                token = _sample(logits, cfg, rng)
                if t_first is None:
                    t_first = time.perf_counter()
                if token in stop:
                    break
                generated += 1
                pending = [token]
                text = decoder.push(token)
                if text:
                    yield TextDelta(text=text, index=index)
                    index += 1
        finally:
            self._release_cache(handle)
            with self._lock:
                self._active.discard(handle)
        metrics = make_metrics(
            t_start=t0, t_first=t_first, t_end=time.perf_counter(), prompt_tokens=len(fitted.ids),
            tokens=generated, cancelled=handle.cancelled.is_set(),
        )
        metrics["cached_tokens"] = float(reused)
        if fitted.dropped_turns or fitted.clipped_tokens:
            metrics["dropped_turns"] = float(fitted.dropped_turns)
            metrics["clipped_tokens"] = float(fitted.clipped_tokens)
        yield TextDelta(text="", index=index, is_final=True, metrics=metrics)

    def logits_for(self, prompt_ids: list[int], next_ids: list[int] = ()) -> np.ndarray:
        """Logits [1 + len(next_ids), vocab]: after a one-pass prefill, then per fed token.

        Exposes exactly the runs `stream` makes, so tests compare them with the reference.
        """
        cache = self._new_cache(len(prompt_ids) + len(next_ids))  # private: never the shared one
        rows = [self._feed(cache, list(prompt_ids))]
        for t in next_ids:
            rows.append(self._feed(cache, [int(t)]))
        return np.stack(rows)

    def complete(self, messages: list[dict], **overrides) -> str:
        """The whole reply as one string (convenience for scripts and tests)."""
        return "".join(d.text for d in self.stream(messages, **overrides))


def load_local_llm(
    name: str | None = None,
    config: LocalLLMConfig | None = None,
    *,
    offline: bool | None = None,
    on_progress=None,
) -> LocalLLM:
    """Resolve the model through the registry (pulling it if needed, with progress) and load it."""
    from voxcli.hub.registry import resolve_model

    bundle = resolve_model(name or DEFAULT_MODEL, kind="llm", offline=offline, on_progress=on_progress)
    path = Path(bundle.path) / GGUF_FILE
    if not path.exists():  # another GGUF registered under another name
        found = sorted(Path(bundle.path).glob("*.gguf"))
        if not found:
            raise ModelNotFoundError(f"model {bundle.name!r} has no GGUF file in {bundle.path}")
        path = found[0]
    llm = LocalLLM.load(path, Path(bundle.derived_dir), config)
    llm.name = f"{bundle.name} (on-device, {llm.config.precision})"
    return llm
