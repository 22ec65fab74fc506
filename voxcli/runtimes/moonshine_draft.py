"""Greedy decoding checked against a draft: the greedy transcript in a few decoder calls (issue 16).

Why: an utterance's final decode is unforced (the batch text), and greedy
decoding calls the decoder once per token: ~10 ms a token for Moonshine base
on 2 cores, 0.55 s for a 13 s utterance, longer than the endpoint hold it
should fit in. But the streamer already holds a good guess of that text (the
caption's words, from the re-decodes). Here the guess is fed to the decoder a
few tokens at a time after the accepted ones (its KV cache takes several
tokens per call), and every position's argmax is read: the draft tokens the
model would have chosen itself are accepted, the first one it would not is
replaced by its own choice, and the rest of the draft is lined up again (the
model inserts a comma, drops a word, capitalizes). Every token kept is the
model's own greedy choice after the tokens before it, so the result is the
greedy transcript up to rounding: dynamic int8 scales activations over a
call's tokens, so a multi-token call can flip a near-tie (the words then
differ a little from the batch decode, and with the draft). A wrong draft
costs little time: after a call that confirms none of it, the decoder goes
token by token (greedy) until the model's token turns up in the draft again,
and after MAX_MISSES such calls in a row it stops drafting. This is "prompt
lookup" speculative decoding with the caption as the prompt; no second model.
"""
from __future__ import annotations

from typing import Callable, Final

import numpy as np

CHUNK: Final = 8
"""Draft tokens checked per decoder call after a miss; doubled (up to MAX_CHUNK) after each chunk taken whole.
On Moonshine base (2 cores) a call with 8 tokens costs ~2x one with 1, with 32 ~4x."""
MAX_CHUNK: Final = 32
RESYNC: Final = 4
"""How far ahead in the draft a replaced token is looked for (the model dropped draft tokens)."""
MAX_MISSES: Final = 2
"""Drafted calls in a row that confirm no draft token before drafting stops for the rest of the decode."""

EARLY_EOS_MARGIN: Final = 1.5
"""A first token that is end-of-text by less than this many logits gives way to the runner-up.

Moonshine base (int8) puts "end" and the first word in a near-tie on some speech: the first 9, 9.5
and 12 s of two_cities.wav decoded to "" (end-of-text ahead of "It" by 0.7-0.9 logits; at 8, 10 and
13 s behind it), a whole utterance lost. On silence end-of-text leads by 3.2, on noise by 11-13.5."""


def first_token(row: np.ndarray, eos: int) -> int:
    """The greedy first token from one logits row, except an end-of-text that barely wins (EARLY_EOS_MARGIN)."""
    best = int(row.argmax())
    if best != eos:
        return best
    masked = row.copy()
    masked[eos] = -np.inf
    second = int(masked.argmax())
    return second if row[eos] - row[second] < EARLY_EOS_MARGIN else eos


Run = Callable[[np.ndarray, dict[str, np.ndarray], bool], tuple[np.ndarray, list[np.ndarray]]]
"""`run(input_ids [1, n], cache, use_cache_branch) -> (logits [1, n, V], present values in cache-name order)`."""


def draft_generate(run: Run, cache_names: list[str], empty: dict[str, np.ndarray], bos: int, eos: int,
                   draft: list[int], budget: int, repeated_tail: Callable[[list[int]], int],
                   is_punct: Callable[[int], bool]) -> list[int]:
    """Greedy token ids (without BOS/EOS), calling the decoder on draft chunks instead of one token at a time."""
    tokens: list[int] = []
    cache, pending, p, first, chunk, misses = dict(empty), bos, 0, True, CHUNK, 0
    while len(tokens) < budget:
        d = draft[p : p + min(chunk, budget - len(tokens))]
        logits, present = run(np.array([[pending, *d]], dtype=np.int64), cache, not first)
        preds = logits[0].argmax(axis=-1)
        if first:
            preds[0] = first_token(logits[0, 0], eos)
        n = 0  # draft tokens the model confirmed
        while n < len(d) and int(preds[n]) == d[n]:
            n += 1
        kept = list(d[:n])
        nxt = int(preds[n])
        for t in [*kept, nxt]:  # as greedy would: stop at EOS, at a loop, at the budget
            if t == eos or len(tokens) >= budget:
                return tokens
            tokens.append(t)
            cut = repeated_tail(tokens)
            if cut:
                del tokens[len(tokens) - cut :]
                return tokens
        length = _cache_len(cache) + 1 + n  # positions now valid: the cache, `pending`, the confirmed draft
        for name, value in zip(cache_names, present):
            if first or ".decoder." in name:  # the cross-attention cache comes from the first call only
                cache[name] = value[:, :, :length] if ".decoder." in name else value
        first, pending = False, nxt
        p, found = _resync(draft, p + n, nxt, is_punct)
        misses = 0 if n else misses + bool(d)
        if d and n == len(d):
            chunk = min(2 * chunk, MAX_CHUNK)
        elif n:
            chunk = CHUNK
        else:  # nothing confirmed (or greedy): greedy until the model's token is found in the draft again
            chunk = CHUNK if found and misses < MAX_MISSES else 0
    return tokens


def _cache_len(cache: dict[str, np.ndarray]) -> int:
    for name, value in cache.items():
        if ".decoder." in name:
            return int(value.shape[2])
    return 0


def _resync(draft: list[int], p: int, token: int, is_punct: Callable[[int], bool]) -> tuple[int, bool]:
    """Where the draft goes on after the model's `token` at draft position `p`, and whether `token` was found there."""
    if p < len(draft) and draft[p] == token:
        return p + 1, True  # the draft's next token (all of the chunk was confirmed)
    ahead = draft[p + 1 : p + 1 + RESYNC]
    if token in ahead:
        return p + 2 + ahead.index(token), True  # the model skipped draft tokens
    return (p if is_punct(token) else p + 1), False  # an inserted comma/period, else a replaced word piece
