"""The draft of an utterance's unforced decodes: the caption's words, as of the running hold's onset (issue 16).

A model with `drafts = True` (Moonshine, `runtimes/moonshine_draft.py`) checks a draft a chunk of tokens per
decoder call instead of decoding token by token: the final of a long utterance fits in the endpoint hold.
Only the unforced decodes (the final, a cut) get one; the intermediate re-decodes are forced with the stable
words, or (at an utterance's start) short. The words are the model's own, but not bit-identical to the batch
decode: dynamic int8 scales activations over a call's tokens, so a multi-token call can flip a near-tie word,
and which words it checks (the caption at the hold's onset) depends on where the re-decodes fell (pacing).
"""
from __future__ import annotations


class OnsetDraft:
    """The caption's words as they were when the running hold began: the draft of the utterance's final decode.

    A model with `drafts` checks a draft a chunk of tokens per decoder call, and its int8 arithmetic
    rounds a little differently for another draft (a near-tie word can flip). The final decode is made
    from this snapshot, not from the caption at decode time, so it does not depend on when it runs:
    during the hold (speculative) or after it (serial), the same span gets the same draft, the same words.
    """

    def __init__(self) -> None:
        self._onset: int | None = None
        self._words: list[str] = []

    def observe(self, onset: int | None, in_speech: bool, words: list[str]) -> None:
        """Each VAD frame: keep the caption of a new silence onset; forget it when speech resumes."""
        if onset is None:
            if in_speech:
                self._onset = None
        elif onset != self._onset:
            self._onset, self._words = onset, list(words)

    def words(self, caption: list[str]) -> list[str]:
        """The snapshot while a hold runs or just ended; else the caption now (a cut's decode, mid-speech)."""
        return self._words if self._onset is not None else caption

    def reset(self) -> None:
        self._onset, self._words = None, []

    def draft_for(self, model: object, caption: list[str]) -> dict[str, str]:
        """`transcribe`'s keyword arguments for an unforced decode: `{"draft": text}`, or none for a model
        without `drafts` (or no caption yet)."""
        words = self.words(caption) if getattr(model, "drafts", False) else []
        return {"draft": " ".join(words)} if words else {}
