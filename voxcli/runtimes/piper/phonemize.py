"""espeak-ng phonemes exactly the way Piper makes them, through ctypes.

Piper voices were trained on the phonemes of piper-tts's `espeakbridge`,
which calls `espeak_TextToPhonemesWithTerminator` (a function of Piper's
espeak-ng fork) to learn which punctuation ended each clause and whether it
ended a sentence. The library shipped by `espeakng-loader` only has
`espeak_TextToPhonemes`, which drops the punctuation. So we restore it: after
each call the text pointer has moved past the clause plus exactly one
character of look-ahead (espeak "ungets" it and reads it again next call),
so the text a clause consumed is known, and its end is classified with the
same rules as espeak's `ReadClause` (see `classify_clause_end`).

License: libespeak-ng is GPL-3.0; it is loaded at run time from the
`espeakng-loader` wheel, never vendored.
"""
from __future__ import annotations

import ctypes
import logging
import re
import threading
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from voxcli.errors import ModelNotFoundError

_LOG = logging.getLogger(__name__)

_AUDIO_OUTPUT_SYNCHRONOUS: Final = 0x02
_ESPEAK_INITIALIZE_DONT_EXIT: Final = 0x8000  # return an error instead of exit()
_ESPEAK_CHARS_UTF8: Final = 1
_ESPEAK_PHONEMES_IPA: Final = 0x02
# Phoneme separator (bits 8-23 of phonememode): a private-use char that never occurs in IPA.
_SEPARATOR: Final = "\ue001"
# espeak's linking phoneme ";" (Kirshenbaum), e.g. "me at" -> "mˌiːʲ æt": this library prints it
# as an empty string, piper-tts's espeak-ng prints "ʲ"; the separator makes the empty phoneme visible.
_LINK: Final = "\u02b2"

BOS: Final = "^"
EOS: Final = "$"
PAD: Final = "_"

# Characters espeak-ng's ReadClause treats as clause punctuation (ASCII first).
_QUESTION_EXCLAIM: Final = frozenset("?!")
_COMMA_LIKE: Final = {",": ",", ":": ":", ";": ";"}
_DASHES: Final = frozenset("\u2013\u2014\u2015")  # en/em dash, horizontal bar -> ";"
_ELLIPSIS: Final = "\u2026"
# Full stops with "no space needed after" (CJK, full width): sentence end, no symbol.
_OPTIONAL_SPACE_STOPS: Final = frozenset("\u3002\uff0e\uff01\uff1f")
_CLAUSE_PUNCT: Final = frozenset(".,:;?!") | _DASHES | {_ELLIPSIS} | _OPTIONAL_SPACE_STOPS
# Piper removes espeak's language-switch flags such as "(fr)".
_LANG_FLAG = re.compile(r"\([^)]+\)")
# Piper's raw-phoneme escape: [[ h ə l ˈoʊ ]]
_PHONEME_BLOCK = re.compile(r"(\[\[.*?\]\])")


@dataclass(frozen=True)
class Clause:
    """One espeak clause, with the punctuation Piper's bridge would report."""

    phonemes: str
    """IPA from espeak (language flags still inside)."""
    terminator: str
    """".", "?", "!", ",", ":", ";" or "" (what `espeakbridge.get_phonemes` reports)."""
    end_of_sentence: bool
    """True when espeak ends a sentence here (Piper starts a new utterance)."""
    text: str
    """The source text this clause consumed (its own share, look-ahead removed)."""


@dataclass(frozen=True)
class Sentence:
    """One Piper utterance: the unit that becomes one `ids` sequence."""

    text: str
    """Source text of the sentence (stripped)."""
    phonemes: list[str]
    """Phoneme symbols (NFD code points, punctuation kept) as Piper feeds `phonemes_to_ids`."""


def classify_clause_end(text: str, at_eof: bool) -> tuple[str, bool]:
    """(terminator, end_of_sentence) for a clause that consumed `text`.

    Mirrors espeak-ng's ReadClause: two newlines make a paragraph (sentence
    end, no symbol); a clause without letters or digits never ends at
    punctuation; the first mark of a run of punctuation decides and swallows
    the rest ("?!" -> "?", ".," -> "."); three or more dots are an ellipsis
    (clause end, no symbol); dashes count as ";"; text that ends without
    punctuation is a sentence end only at the end of input (otherwise espeak
    broke a clause that filled its buffer).
    """
    body = text.rstrip()
    trailing = text[len(body):]
    if trailing.count("\n") >= 2:
        return "", True
    if not any(ch.isalnum() for ch in body):
        return "", at_eof
    run_start = len(body)
    while run_start > 0 and body[run_start - 1] in _CLAUSE_PUNCT:
        run_start -= 1
    run = body[run_start:]
    if not run:
        return "", at_eof
    first = run[0]
    if run.startswith("...") or first == _ELLIPSIS:
        return "", False
    if first in _QUESTION_EXCLAIM or first == ".":
        return first, True
    if first in _COMMA_LIKE:
        return _COMMA_LIKE[first], False
    if first in _DASHES:
        return ";", False
    if first in _OPTIONAL_SPACE_STOPS:
        return "", True
    return "", at_eof


class _EspeakLibrary:
    """The process-wide libespeak-ng: espeak keeps global state, so one lock guards every call."""

    _instance: _EspeakLibrary | None = None
    _instance_lock = threading.Lock()

    def __init__(self) -> None:
        import espeakng_loader  # deferred: no library loading at import time

        self.lock = threading.Lock()
        self._voice: str | None = None
        lib = ctypes.CDLL(espeakng_loader.get_library_path())
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_int]
        lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        data_path = espeakng_loader.get_data_path().encode()
        if lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, data_path, _ESPEAK_INITIALIZE_DONT_EXIT) < 0:
            raise ModelNotFoundError(f"espeak-ng failed to initialize with data at {data_path.decode()}")
        self._lib = lib

    @classmethod
    def get(cls) -> _EspeakLibrary:
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def _set_voice(self, voice: str) -> None:
        if voice != self._voice:
            if self._lib.espeak_SetVoiceByName(voice.encode()) != 0:
                raise ModelNotFoundError(f"espeak-ng has no voice {voice!r}")
            self._voice = voice

    def clauses(self, voice: str, text: str) -> list[Clause]:
        """Run espeak clause by clause, recovering each clause's text from the pointer advance."""
        data = text.replace("\x00", " ").encode("utf-8", "replace")  # NUL would end the C string
        if not data:
            return []
        with self.lock:
            self._set_voice(voice)
            ipa = self._run(data, _ESPEAK_PHONEMES_IPA)
            ascii_names: list[str] | None = None
            if any(_has_empty_phoneme(raw) for raw, _, _ in ipa):
                # empty IPA phonemes are either pauses or the linking ";": ask for the names
                ascii_names = [raw for raw, _, _ in self._run(data, 0)]
        out: list[Clause] = []
        for k, (raw, own_text, at_eof) in enumerate(ipa):
            names = ascii_names[k] if ascii_names is not None and len(ascii_names) == len(ipa) else None
            terminator, end_of_sentence = classify_clause_end(own_text, at_eof)
            out.append(Clause(_join_phonemes(raw, names), terminator, end_of_sentence, own_text))
        return out

    def _run(self, data: bytes, mode: int) -> list[tuple[str, str, bool]]:
        """(separated phonemes, own text, at_eof) per clause; the caller holds the lock."""
        buffer = ctypes.create_string_buffer(data)
        base = ctypes.addressof(buffer)
        pointer = ctypes.c_void_p(base)
        out: list[tuple[str, str, bool]] = []
        own_start = 0
        while pointer.value is not None:
            before = pointer.value
            raw = self._lib.espeak_TextToPhonemes(
                ctypes.byref(pointer), _ESPEAK_CHARS_UTF8, mode | (ord(_SEPARATOR) << 8)
            )
            at_eof = pointer.value is None
            end = len(data) if at_eof else pointer.value - base
            # every clause but the last read one character too far (espeak ungets it)
            own_end = end if at_eof else _start_of_last_char(data, end, own_start)
            own_text = data[own_start:own_end].decode("utf-8", "replace")
            own_start = own_end
            out.append(((raw or b"").decode("utf-8", "replace"), own_text, at_eof))
            if not at_eof and pointer.value == before:  # no progress: never loop forever
                break
        return out


def _has_empty_phoneme(separated: str) -> bool:
    return any("" in word.split(_SEPARATOR)[1:] for word in separated.split(" "))


def _join_phonemes(separated: str, names: str | None) -> str:
    """Drop the separators; an empty IPA phoneme named ";" is written "ʲ" like piper-tts does."""
    ipa_words = separated.split(" ")
    name_words = names.split(" ") if names is not None else None
    if name_words is not None and len(name_words) != len(ipa_words):
        name_words = None
    words = []
    for w, word in enumerate(ipa_words):
        parts = word.split(_SEPARATOR)
        named = name_words[w].split(_SEPARATOR) if name_words is not None else None
        if named is not None and len(named) != len(parts):
            named = None
        words.append("".join(
            _LINK if (not part and named is not None and named[i] == ";") else part
            for i, part in enumerate(parts)
        ))
    return " ".join(words)


def _start_of_last_char(data: bytes, end: int, floor: int) -> int:
    """Byte offset where the UTF-8 character ending at `end` starts (never below `floor`)."""
    i = end - 1
    while i > floor and (data[i] & 0xC0) == 0x80:
        i -= 1
    return max(i, floor)


class EspeakPhonemizer:
    """Text -> Piper sentences (phoneme lists) for one espeak voice."""

    def __init__(self, voice: str, vowel_clusters: Iterable[Sequence[str]] | None = None) -> None:
        self.voice = voice
        self.vowel_clusters = {tuple(c) for c in vowel_clusters} if vowel_clusters else None
        self._espeak = _EspeakLibrary.get()
        with self._espeak.lock:
            self._espeak._set_voice(voice)  # fail early on an unknown voice

    def clauses(self, text: str) -> list[Clause]:
        return self._espeak.clauses(self.voice, text)

    def phonemize(self, text: str) -> list[Sentence]:
        """Sentences of phonemes, split exactly where Piper splits (raw [[ phonemes ]] allowed)."""
        # (phonemes, source texts) per sentence, built the way piper's PiperVoice.phonemize does
        sentences: list[tuple[list[str], list[str]]] = []
        parts = _PHONEME_BLOCK.split(text)
        after_raw = False
        for i, part in enumerate(parts):
            if part.startswith("[[") and part.endswith("]]"):
                after_raw = True
                if not sentences:
                    sentences.append(([], []))
                phonemes, texts = sentences[-1]
                if i > 0 and parts[i - 1].endswith(" "):
                    phonemes.append(" ")
                phonemes.extend(part[2:-2].strip())
                texts.append(part)
                if i < len(parts) - 1 and parts[i + 1].startswith(" "):
                    phonemes.append(" ")
                continue
            part_sentences = self._phonemize_text(part)
            if after_raw and part_sentences:
                sentences[-1][0].extend(part_sentences[0][0])
                sentences[-1][1].extend(part_sentences[0][1])
                part_sentences = part_sentences[1:]
            sentences.extend(part_sentences)
            after_raw = False
        out = []
        for phonemes, texts in sentences:
            if not phonemes:
                continue  # Piper skips empty utterances
            if self.vowel_clusters:
                phonemes = merge_vowel_clusters(phonemes, self.vowel_clusters)
            out.append(Sentence("".join(texts).strip(), phonemes))
        return out

    def _phonemize_text(self, text: str) -> list[tuple[list[str], list[str]]]:
        """Clauses -> sentences for plain text, punctuation appended as piper-tts does."""
        sentences: list[tuple[list[str], list[str]]] = []
        phonemes: list[str] = []
        texts: list[str] = []
        for clause in self.clauses(text):
            symbols = _LANG_FLAG.sub("", clause.phonemes) + clause.terminator
            if clause.terminator in (",", ":", ";"):
                symbols += " "  # not a sentence boundary
            phonemes.extend(unicodedata.normalize("NFD", symbols))
            texts.append(clause.text)
            if clause.end_of_sentence:
                sentences.append((phonemes, texts))
                phonemes, texts = [], []
        if phonemes:
            sentences.append((phonemes, texts))
        elif texts and sentences:
            sentences[-1][1].extend(texts)  # keep the source text, like piper no empty sentence
        return sentences


def merge_vowel_clusters(phones: Sequence[str], clusters: set[tuple[str, ...]]) -> list[str]:
    """Greedy longest-first merge of known vowel clusters (Piper's `vowel_clusters` option)."""
    longest = max(len(c) for c in clusters)
    out: list[str] = []
    i = 0
    while i < len(phones):
        for n in range(min(longest, len(phones) - i), 1, -1):
            if tuple(phones[i:i + n]) in clusters:
                out.append("".join(phones[i:i + n]))
                i += n
                break
        else:
            out.append(phones[i])
            i += 1
    return out


def phonemes_to_ids(phonemes: Sequence[str], id_map: Mapping[str, Sequence[int]]) -> list[int]:
    """`^ _ p1 _ p2 _ ... $` through the voice's id map; unknown phonemes are skipped (as Piper does)."""
    pad = list(id_map[PAD])
    ids = list(id_map[BOS]) + pad
    missing: set[str] = set()
    for phoneme in phonemes:
        mapped = id_map.get(phoneme)
        if mapped is None:
            missing.add(phoneme)
            continue
        ids.extend(mapped)
        ids.extend(pad)
    ids.extend(id_map[EOS])
    if missing:
        _LOG.warning("phonemes missing from the voice's id map, skipped: %s", sorted(missing))
    return ids
