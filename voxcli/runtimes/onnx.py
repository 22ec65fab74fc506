"""The one onnxruntime session policy every model runtime uses.

Why one place: voxcli runs several models at once (`chat` has a voice, an
ASR model, a VAD and an LLM on the same cores). onnxruntime's defaults are
tuned for one model owning the machine: a thread pool per session sized to
the physical cores whose idle workers busy-wait ("spin") between runs. Four
such pools on two cores steal each other's time slices, so every session
here gets a fixed, small intra-op pool, no inter-op pool (sequential
execution), spinning off in both pools, all graph optimizations, and the
provider list chosen below. A caller that shares the CPU passes `threads`
(see `voxcli.chat.models.thread_budget`).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # pragma: no cover
    import onnxruntime as ort

PROVIDERS: Final = ("CPUExecutionProvider",)
"""Execution providers, in order of preference. CPU only: the wheels this project
depends on ship no GPU provider, and an accelerator would change the timing that
the streaming schedules were measured with."""
MAX_DEFAULT_THREADS: Final = 4
"""Cap of the default intra-op pool: the models are small, beyond 4 threads a run
gains little and costs the other streams their cores."""
_LOG_ERRORS_ONLY: Final = 3
"""onnxruntime severity 3 = errors: its warnings (unused initializers, ...) are not the user's business."""


def default_threads(cap: int = MAX_DEFAULT_THREADS) -> int:
    """Threads of a session whose caller gave none: the cores, at most `cap`, at least 1."""
    return max(1, min(cap, os.cpu_count() or 1))


def session_options(threads: int | None = None) -> "ort.SessionOptions":
    """SessionOptions of the policy (see the module docstring); `threads` = intra-op pool size."""
    import onnxruntime as ort

    if threads is not None and threads < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.intra_op_num_threads = threads or default_threads()
    opts.inter_op_num_threads = 1
    # Spinning workers burn the cores that the other models and the audio threads need between runs.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    opts.log_severity_level = _LOG_ERRORS_ONLY
    return opts


def session(model: Path | str | bytes, *, threads: int | None = None) -> "ort.InferenceSession":
    """An InferenceSession for a model file (or serialized model bytes) under the one policy."""
    import onnxruntime as ort

    source = model if isinstance(model, bytes) else os.fspath(model)
    return ort.InferenceSession(source, sess_options=session_options(threads), providers=list(PROVIDERS))
