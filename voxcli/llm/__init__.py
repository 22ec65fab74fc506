"""Language models behind `voxcli chat`: one factory, two kinds of client.

`open_llm(url=...)` gives the OpenAI-compatible HTTP client; without a URL
(or with `url="local"`) it gives the on-device model (`voxcli.runtimes.smollm.local`),
so `voxcli chat` works offline by default. Both implement
`voxcli.llm.base.LLMClient`. Imports are lazy: choosing the HTTP client never
loads the on-device model's code, and `import voxcli.llm` costs nothing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from voxcli.llm.base import LLMClient

LOCAL = "local"


def open_llm(
    url: str | None = None,
    model: str | None = None,
    *,
    api_key_env: str | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    connect_timeout: float | None = None,
    first_token_timeout: float | None = None,
    progress_timeout: float | None = None,
    offline: bool | None = None,
    **local_options: Any,
) -> "LLMClient":
    """An LLM client: HTTP when `url` is an http(s) URL, the on-device model otherwise.

    `local_options` are `LocalLLMConfig` fields (e.g. `threads=1`); `offline` applies to
    resolving the on-device model. `progress_timeout` (HTTP only): seconds without new text, after
    the first token, that end the answer as cut off (`LLMTimeouts.progress`).
    """
    if url and url != LOCAL:
        from voxcli.llm.openai_compat import LLMTimeouts, OpenAICompatClient

        t = LLMTimeouts()
        timeouts = LLMTimeouts(
            connect=connect_timeout if connect_timeout is not None else t.connect,
            first_token=first_token_timeout if first_token_timeout is not None else t.first_token,
            progress=progress_timeout if progress_timeout is not None else t.progress,
        )
        return OpenAICompatClient(
            url, model, api_key_env=api_key_env, timeouts=timeouts, max_tokens=max_tokens, temperature=temperature
        )
    from voxcli.llm.local import LocalLLMConfig, load_local_llm

    cfg = LocalLLMConfig()
    overrides: dict[str, Any] = dict(local_options)
    if max_tokens is not None:
        overrides["max_new_tokens"] = max_tokens
    if temperature is not None:
        overrides["temperature"] = temperature
    if overrides:
        from dataclasses import replace

        cfg = replace(cfg, **overrides)
    return load_local_llm(model, cfg, offline=offline)
