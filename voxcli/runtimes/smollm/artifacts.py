"""The GGUF's tokenizer and hyper-parameters, cached as one JSON next to the built graph.

Why: once the decoder graph is built, the GGUF is only needed for its
vocabulary, merges and a few numbers -- but parsing its metadata with the
`gguf` package takes about 2 s and 160 MB of small arrays (peak RSS during
load went from ~420 MB to ~300 MB without it). So the first load writes them
to `derived_dir` (`fsutil.atomic_write` under a file lock, its sha256
recorded) and later loads read that file in milliseconds -- after checking
it against the record: a damaged or unrecorded file is rebuilt from the GGUF.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

from filelock import FileLock

from voxcli.fsutil import atomic_write
from voxcli.runtimes import derived
from voxcli.runtimes.smollm.gguf import GGUFModel, LlamaConfig, file_fingerprint
from voxcli.runtimes.smollm.tokenizer import ChatTokenizer

ARTIFACT_VERSION: Final = 1


@dataclass(frozen=True)
class ModelInfo:
    config: LlamaConfig
    tokenizer: ChatTokenizer


def info_path(gguf_path: Path, derived_dir: Path) -> Path:
    return Path(derived_dir) / f"llm-info-v{ARTIFACT_VERSION}-{file_fingerprint(gguf_path)}.json"


def load_model_info(gguf_path: Path, derived_dir: Path, model: GGUFModel | None = None) -> ModelInfo:
    """Tokenizer + config from the cache file, or from the GGUF (then cached)."""
    from tokenizers import Tokenizer

    path = info_path(gguf_path, derived_dir)
    if derived.usable(derived_dir, [path], "the LLM tokenizer and config"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            tok = ChatTokenizer(Tokenizer.from_str(data["tokenizer"]), data["eos_id"], data["im_end_id"])
            return ModelInfo(LlamaConfig(**data["config"]), tok)
        except (ValueError, KeyError, TypeError, OSError):
            pass  # unreadable (old or truncated by a crash): rebuild below
    model = model or GGUFModel(Path(gguf_path))
    info = ModelInfo(model.config, ChatTokenizer.from_gguf(model))
    data = {
        "tokenizer": info.tokenizer.tok.to_str(),  # type: ignore[attr-defined]
        "eos_id": info.tokenizer.eos_id,
        "im_end_id": info.tokenizer.im_end_id,
        "config": asdict(info.config),
    }
    path.parent.mkdir(parents=True, exist_ok=True)  # the bundle's derived_dir is created by whoever writes
    with FileLock(str(path) + ".lock"):  # the record must be of the bytes that stay
        atomic_write(path, json.dumps(data))
        derived.record(derived_dir, [path])
    return info
