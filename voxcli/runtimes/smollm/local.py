"""LocalLLM: the SmolLM2-135M-Instruct runtime on onnxruntime (messages in, token ids out).

Why this shape: everything model-specific (GGUF -> ONNX graph build, tokenizer,
template, truncation, sampling, KV cache) lives here; the `LLMClient` that the
chat loop talks to (`stream(messages)` -> TextDelta with metrics, `cancel()`)
is the thin adapter `voxcli.llm.local.LocalClient`, so runtimes/ knows nothing
of the client contract. The prompt is prefilled in one run
(in 128-token runs beyond that, to bound scratch memory), then one
run per token; the KV cache is kept across turns so only the part of the
prompt that changed is prefilled (`kv_cache.py`). `cancel()` is checked
between tokens and also aborts a running prefill through onnxruntime's
RunOptions.terminate, so a cancel returns within one token.

Precision: "fast" (default) decodes with int8 MatMulNBits kernels run twice
per token (grid + remainder, see `linear.py`): logits within ~0.015 of the
numpy reference, about 2x faster per token than "exact", which keeps fp32
activations everywhere and matches the reference to ~1.5e-4.
"""
from __future__ import annotations

import gc
import threading
import time
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator

import numpy as np

from voxcli.errors import LLMError, UsageError
from voxcli.runtimes.onnx import release_free_memory
from voxcli.runtimes.smollm.graph import EMBED_NAME, MAX_POSITIONS, PRECISIONS, Precision
from voxcli.runtimes.smollm.kv_cache import KVCache
from voxcli.runtimes.smollm.prompt import DEFAULT_SYSTEM, FittedPrompt, fit_messages

DEFAULT_MODEL = "smollm2-135m-instruct"
"""Registry name of the on-device model."""
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The weights file inside that bundle."""

PREFILL_CHUNK = 128
"""Prompt tokens per prefill run: bounds scratch memory (attention: heads x chunk x context).

Why 128 (issue 18): onnxruntime's arena keeps the largest run's scratch for good, and chat re-prefills
~600-token prompts (a private cache beside the shared one, a history that rolled over). Two overlapping
generations per turn, 40 turns: +28 MB of RSS over turn 5 with 128-token runs, +62 MB with 256, +84 MB
with 512; a 600-token prefill took 15% less CPU in 128-token runs than in one 512 + rest."""


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
    """onnxruntime intra-op threads; None = the session policy's default (`voxcli.runtimes.onnx`)."""


class _Stopped(Exception):
    """Internal: the stream was cancelled between two runs."""


class _Handle:
    """Cancellation state of one `stream` call: a flag for between tokens, RunOptions for mid-run."""

    def __init__(self, run_options) -> None:
        # a run aborted by `terminate` is logged by onnxruntime as an error ("Exiting due to terminate flag
        # being set to true", red, on stderr) at every barge-in and Ctrl-C: a cancel is not an error, and a
        # real failure of the run still raises (LLMError); only fatal messages are logged for these runs
        run_options.log_severity_level = 4
        self.run_options = run_options
        self.cancelled = threading.Event()

    def cancel(self) -> None:
        self.cancelled.set()
        self.run_options.terminate = True


def _check_config(cfg: LocalLLMConfig, max_context: int) -> None:
    """Reject settings that cannot work with one clear line (UsageError, exit 2)."""
    if cfg.precision not in PRECISIONS:
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
    """The on-device chat model: `start(messages)` is iterated for token ids.

    Build with `LocalLLM.load(gguf_path, derived_dir)`; `voxcli.llm.local.LocalClient`
    wraps it as the `LLMClient` that `chat` uses.
    """

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
        """What the last `start` fitted into the context (for callers that show truncation)."""

    @classmethod
    def load(cls, gguf_path: Path, derived_dir: Path, config: LocalLLMConfig | None = None) -> "LocalLLM":
        """Open the GGUF, build (once) the ONNX decoder in `derived_dir`, start a session."""
        from voxcli.runtimes import derived
        from voxcli.runtimes.onnx import session as onnx_session
        from voxcli.runtimes.smollm.artifacts import info_path, load_model_info
        from voxcli.runtimes.smollm.gguf import GGUFModel, file_fingerprint
        from voxcli.runtimes.smollm.graph import ensure_decoder, graph_filename, graph_files

        config = config or LocalLLMConfig()
        _check_config(config, MAX_POSITIONS)
        gguf_path, derived_dir = Path(gguf_path), Path(derived_dir)
        graph = derived_dir / graph_filename(file_fingerprint(gguf_path), config.precision)
        # parse the GGUF only when something must be built (first use, or a cached file fails its hash check)
        cached = not derived.problems(derived_dir, [*graph_files(graph), info_path(gguf_path, derived_dir)])
        model = None if cached else GGUFModel(gguf_path)
        graph = ensure_decoder(gguf_path, derived_dir, config.precision, model)
        info = load_model_info(gguf_path, derived_dir, model)
        c = info.config
        _check_config(config, min(c.context, MAX_POSITIONS))
        try:
            session = onnx_session(graph, threads=config.threads)
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

    # -- generation ----------------------------------------------------------
    def cancel(self) -> None:
        """Stop every running generation at its next token (aborts a prefill in progress)."""
        with self._lock:
            handles = list(self._active)
        for h in handles:
            h.cancel()

    def start(self, messages: list[dict], **overrides) -> "Generation":
        """Fit `messages` into the context and register a generation; iterate it for token ids.

        `overrides` replace fields of the config for this call (e.g. temperature=0.7).
        Bad settings raise UsageError here, before any iteration.
        """
        t0 = time.perf_counter()
        cfg = replace(self.config, **overrides) if overrides else self.config
        _check_config(cfg, self._max_context)
        fitted = fit_messages(
            messages, self.tokenizer.encode, cfg.context_window - cfg.max_new_tokens,
            default_system=cfg.system_prompt,
        )
        self.last_prompt = fitted
        # registered now, not at the first next(): a cancel() that comes before
        # iteration starts still applies; the weak set forgets dropped generations
        handle = _Handle(self._ort.RunOptions())
        with self._lock:
            self._active.add(handle)
        return Generation(self, fitted, cfg, handle, GenerationStats(t_start=t0, prompt_tokens=len(fitted.ids)))

    def _new_cache(self, capacity: int) -> KVCache:
        extra = {EMBED_NAME: self._embed} if self._embed is not None else None
        return KVCache(self._session, self._n_layers, self._n_kv, self._hd, capacity, extra)

    def _claim_cache(self, handle: "_Handle", capacity: int) -> KVCache:
        """The shared cache if free (or held by a cancelled generation), else a private one."""
        with self._lock:
            c = self._cache
            free = c is None or c.owner is None or getattr(c.owner, "cancelled").is_set()
            if not free:
                return self._new_cache(capacity)  # a concurrent generation: do not share
            if c is None or c.capacity < capacity:
                c = self._cache = self._new_cache(capacity)
            c.owner = handle
            return c

    def _release(self, handle: "_Handle") -> None:
        with self._lock:
            if self._cache is not None and self._cache.owner is handle:
                self._cache.owner = None
            self._active.discard(handle)

    def reset_cache(self) -> None:
        """Forget the cached conversation (the next generation prefills from scratch)."""
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

    def logits_for(self, prompt_ids: list[int], next_ids: list[int] = ()) -> np.ndarray:
        """Logits [1 + len(next_ids), vocab]: after a one-pass prefill, then per fed token.

        Exposes exactly the runs a generation makes, so tests compare them with the reference.
        """
        cache = self._new_cache(len(prompt_ids) + len(next_ids))  # private: never the shared one
        rows = [self._feed(cache, list(prompt_ids))]
        for t in next_ids:
            rows.append(self._feed(cache, [int(t)]))
        return np.stack(rows)


@dataclass
class GenerationStats:
    """What one generation did, for the client's metrics (times are perf_counter seconds)."""

    t_start: float
    prompt_tokens: int
    """Prompt length after truncation."""
    cached_tokens: int = 0
    """Prompt tokens whose keys/values were reused from the previous turn."""
    tokens: int = 0
    """Tokens generated (end-of-turn not counted)."""
    t_first: float | None = None
    """When the first token was sampled (None: none was)."""
    cancelled: bool = False
    dropped: tuple[int, int] = field(default=(0, 0))
    """(oldest turns dropped, tokens clipped from one oversized message) to fit the context."""


class Generation:
    """One reply: iterate for its token ids (end-of-turn excluded); `stats` fills in as it runs."""

    def __init__(self, llm: LocalLLM, fitted: FittedPrompt, cfg: LocalLLMConfig, handle: _Handle,
                 stats: GenerationStats) -> None:
        self._llm, self._fitted, self._cfg, self._handle = llm, fitted, cfg, handle
        self.stats = stats
        self.stats.dropped = (fitted.dropped_turns, fitted.clipped_tokens)

    def cancel(self) -> None:
        """Stop this generation alone at its next token, aborting a prefill in flight (others go on)."""
        self._handle.cancel()

    def __iter__(self) -> Iterator[int]:
        llm, cfg, handle, st = self._llm, self._cfg, self._handle, self.stats
        rng = np.random.default_rng(cfg.seed)
        stop = llm.tokenizer.stop_ids
        cache = llm._claim_cache(handle, cfg.context_window)
        st.cached_tokens = cache.reuse_prefix(self._fitted.ids)
        pending = self._fitted.ids[st.cached_tokens :]
        try:
            while st.tokens < cfg.max_new_tokens and not handle.cancelled.is_set():
                try:
                    logits = llm._feed(cache, pending, handle)
                except _Stopped:
                    break
                except Exception as exc:
                    if handle.cancelled.is_set():  # RunOptions.terminate aborted the run
                        break
                    raise LLMError(f"local model failed: {exc}") from exc
                token = _sample(logits, cfg, rng)
                if st.t_first is None:
                    st.t_first = time.perf_counter()
                if token in stop:
                    break
                st.tokens += 1
                pending = [token]
                yield token
        finally:
            st.cancelled = handle.cancelled.is_set()
            llm._release(handle)
            release_free_memory()  # the prefill's scratch and a private cache's pages go back now
