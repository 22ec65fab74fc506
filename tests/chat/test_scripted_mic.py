"""The scripted microphone opens each `--input` when its turn comes and decodes it in blocks.

Before, `chat --input` decoded every file whole before the chat started
(issue 18 item 2); now a turn holds about a second of audio, cut into the
same 32 ms pieces, paced the same way.
"""
from __future__ import annotations

import numpy as np
import pytest

from voxcli.audio.files import read_audio
from voxcli.chat.scripted_mic import CHUNK, PacedFeeder, ScriptedInput, input_pieces
from voxcli.errors import UsageError

SR = 16000


def test_pieces_of_a_file_are_the_whole_decode_in_chunks(speech_samples) -> None:
    path = speech_samples["beckett"]
    whole = read_audio(path, rate=SR)[0]
    spec, pieces = input_pieces(ScriptedInput.parse(f"{path}@1.5"))
    pieces = list(pieces)
    assert spec.offset_s == 1.5
    assert all(p.size == CHUNK for p in pieces[:-1]) and 0 < pieces[-1].size <= CHUNK
    assert np.abs(np.concatenate(pieces) - whole).max() < 1e-6
    # The pair forms (what cli/chat.py passes) give the same pieces.
    for source in (path, whole):
        again = list(input_pieces((ScriptedInput(path), source))[1])
        assert [p.size for p in again] == [p.size for p in pieces]


def test_a_missing_input_fails_when_its_turn_comes(tmp_path) -> None:
    with pytest.raises(UsageError):
        input_pieces(ScriptedInput(tmp_path / "gone.wav"))


def test_feeder_paces_the_pieces_in_real_time(speech_samples) -> None:
    now = [0.0]
    fed: list[tuple[float, int]] = []
    feeder = PacedFeeder(lambda a: fed.append((now[0], a.size)), clock=lambda: now[0],
                         sleep=lambda s: now.__setitem__(0, now[0] + s))
    _, pieces = input_pieces(ScriptedInput(speech_samples["beckett"]))
    feeder.audio(pieces)
    sent = np.cumsum([0] + [n for _, n in fed])[:-1]
    assert [t for t, _ in fed] == pytest.approx(list(sent / SR))
    assert sum(n for _, n in fed) == read_audio(speech_samples["beckett"], rate=SR)[0].size
