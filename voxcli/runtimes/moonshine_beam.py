"""Beam search with length normalization for Moonshine's merged decoder (issue 16: "Moonshine tiny with
better decoding"). Opt-in (`MoonshineASR(beam=N)`): greedy stays the default until the dev set says otherwise.

The beams run as one batch through the decoder (its inputs have a dynamic
batch axis): the encoder output and its cross-attention cache are computed
once and repeated per beam, the self-attention cache is reordered after every
step so each row follows its beam. A hypothesis is scored by its summed
log-probability divided by its length in tokens (+1 for EOS), so short
endings are not favoured; a hypothesis caught in a loop (`repeated_tail`)
ends there with one copy kept, as in greedy decoding.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def beam_generate(run: Callable[[dict[str, np.ndarray]], tuple[np.ndarray, dict[str, np.ndarray]]],
                  feeds0: dict[str, Any], prefix: list[int], budget: int, beam: int, eos: int,
                  repeated_tail: Callable[[list[int]], int]) -> list[int]:
    """Token ids after `prefix` (prefix included) of the best normalized hypothesis.

    `run(feeds) -> (last-position logits [B, V], present cache by input name)`;
    `feeds0` is the first step's feeds (batch 1, BOS + prefix, empty cache).
    """
    logits, cache = run(feeds0)
    scores = np.zeros(1, dtype=np.float64)
    seqs: list[list[int]] = [list(prefix)]
    finished: list[tuple[float, list[int]]] = []
    static = {k: v for k, v in feeds0.items() if k in ("encoder_hidden_states", "encoder_attention_mask")}
    for step in range(budget):
        logp = _log_softmax(logits.astype(np.float64))
        total = scores[:, None] + logp
        order = np.argsort(total, axis=None)[::-1][: 2 * beam]
        keep_rows, new_seqs, new_scores = [], [], []
        for flat in order:
            row, tok = divmod(int(flat), logp.shape[1])
            grown = seqs[row] + ([] if tok == eos else [tok])
            cut = 0 if tok == eos else repeated_tail(grown)
            if tok == eos or cut:
                body = grown[: len(grown) - cut]
                finished.append((float(total[row, tok]) / (len(body) - len(prefix) + 1), body))
                continue
            keep_rows.append(row), new_seqs.append(grown), new_scores.append(total[row, tok])
            if len(new_seqs) == beam:
                break
        if not new_seqs or (len(finished) >= beam and max(f[0] for f in finished) >=
                            max(new_scores) / (len(new_seqs[0]) - len(prefix) + 1)):
            break
        idx = np.array(keep_rows)
        seqs, scores = new_seqs, np.array(new_scores)
        feeds = {"input_ids": np.array([[s[-1]] for s in seqs], dtype=np.int64),
                 "use_cache_branch": np.array([True]),
                 **{k: np.repeat(v[:1], len(seqs), axis=0) for k, v in static.items()},
                 **{k: (np.repeat(v[:1], len(seqs), axis=0) if ".encoder." in k else v[idx]) for k, v in cache.items()}}
        logits, present = run(feeds)
        cache = {k: (cache[k] if ".encoder." in k else present[k]) for k in cache}
    alive = [(float(s) / (len(q) - len(prefix) + 1), q) for s, q in zip(scores, seqs)]
    return max(finished + alive, key=lambda f: f[0])[1]
