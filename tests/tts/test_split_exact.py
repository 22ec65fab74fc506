"""The z_p split (issue 15): blocks of flow + decoder join up to the whole decode, >= 90 dB SNR.

Noise scales 0, so the front part is deterministic and the unsplit model is a
second, independent reference. The block schedules cover the ones the
streamer produces (a small first block, then growing ones) and worst cases
(many tiny blocks, block edges everywhere).
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.voices import joe_engine
from voxcli.runtimes.onnx import session
from voxcli.runtimes.piper.voice import PiperVoice

SENTENCE = ("When the committee finally met on Thursday afternoon, the members argued for hours about the "
            "budget, the schedule and the new building, and nobody was willing to give an inch.")
SCHEDULES = {
    "defaults": None,
    "streamer-like": lambda k: [8, 16, 40, 100][k] if k < 4 else 256,
    "tiny": lambda k: 3,
    "odd": lambda k: 7 + 13 * k,
}


@pytest.fixture(scope="module")
def engine(voice_bundle) -> PiperVoice:  # type: ignore[no-untyped-def]
    return joe_engine(voice_bundle, deterministic=True)


def snr_db(reference: np.ndarray, test: np.ndarray) -> float:
    assert reference.size == test.size
    noise = float(np.sum((reference.astype(np.float64) - test) ** 2))
    return 10 * np.log10(float(np.sum(reference.astype(np.float64) ** 2)) / max(noise, 1e-30))


def test_the_front_part_ends_at_the_prior_sample(engine: PiperVoice) -> None:
    (p,) = engine.prepare(SENTENCE)
    assert engine.can_stream and p.latent is not None and p.latent.shape == (1, 192, p.frames)
    assert p.z is None, "prepare runs no flow: that is what made the first audio wait"
    assert p.durations is not None and int(p.durations.sum()) == p.frames  # the front part still gives durations


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_blocks_are_the_whole_decode(engine: PiperVoice, name: str) -> None:
    (p,) = engine.prepare(SENTENCE)
    whole = engine.whole(p)
    p.z = None  # the flow runs again, in segments, as the blocks ask for it
    blocks = np.concatenate(list(engine.blocks(p, SCHEDULES[name])))
    assert blocks.size == whole.size == p.frames * engine.hop_length
    assert snr_db(whole, blocks) >= 90.0


def test_whole_decode_is_the_unsplit_model(engine: PiperVoice, voice_bundle) -> None:  # type: ignore[no-untyped-def]
    (p,) = engine.prepare(SENTENCE)
    unsplit = session(voice_bundle.file("en_US-joe-medium.onnx")).run(None, engine._inputs(p.ids))[0].reshape(-1)
    assert snr_db(unsplit, engine.whole(p)) >= 90.0


def test_render_anywhere_is_exact_without_the_cache(engine: PiperVoice) -> None:
    """A window far ahead of the cached flow (a caller that jumps) is computed alone, still exact."""
    (p,) = engine.prepare(SENTENCE)
    whole, hop = engine.whole(p), engine.hop_length
    p.z = None
    part = engine.render(p, 200, 260)
    assert p.z is None and snr_db(whole[200 * hop:260 * hop], part) >= 90.0


def test_too_little_context_is_what_breaks_it(engine: PiperVoice) -> None:
    """The contexts are needed: without them the seams are audible (the test above is not vacuous)."""
    from dataclasses import replace

    (p,) = engine.prepare(SENTENCE)
    whole, base = engine.whole(p), engine.config
    try:
        engine.config = replace(base, flow_context=4)
        p.z = None
        no_flow_context = np.concatenate(list(engine.blocks(p, lambda k: 40)))
        engine.config = replace(base, lookback=0, lookahead=0)
        p.z = None
        no_decoder_context = np.concatenate(list(engine.blocks(p, lambda k: 40)))
    finally:
        engine.config = base
    assert snr_db(whole, no_flow_context) < 40.0 and snr_db(whole, no_decoder_context) < 40.0
