"""Bad audio into `voxcli transcribe`: random bytes, truncated WAV/FLAC, odd sample rates, NaN/inf,
headers that lie (rate, channels, length) and files far longer than memory should hold.

The only acceptable outcomes are a transcript (exit 0) or one clear
`voxcli: error:` line (exit 2); never an internal error or a traceback. Real
speech (beckett.wav) is used where a transcript is expected, so "it did not
crash" is not the only thing checked.
"""
from __future__ import annotations

import resource
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import soundfile as sf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.audio.headers import wav_with_header
from voxcli.cli.app import app

SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _run(*args: str, input: bytes | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["transcribe", *args], input=input)


def _clean_outcome(r, ok_codes=(0, 2)) -> None:  # type: ignore[no-untyped-def]
    assert r.exit_code in ok_codes, (r.exit_code, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    if r.exit_code == 2:
        assert len([ln for ln in r.stderr.splitlines() if ln.startswith("voxcli: error:")]) == 1


@pytest.fixture(scope="module")
def beckett(speech_samples) -> np.ndarray:
    from voxcli.audio.files import read_audio

    return read_audio(speech_samples["beckett"], 16000)[0]


# ------------------------------------------------------------------ random bytes

@SETTINGS
@given(data=st.binary(max_size=4000), suffix=st.sampled_from([".wav", ".flac", ".ogg", ".mp3", ".raw", ""]),
       magic=st.sampled_from([b"", b"RIFF\x24\x00\x00\x00WAVEfmt ", b"fLaC", b"OggS", b"ID3"]))
def test_random_bytes_as_a_file_are_a_clear_error_or_a_transcript(real_cache, tmp_path_factory, data, suffix, magic):
    f = tmp_path_factory.mktemp("rnd") / f"noise{suffix}"
    f.write_bytes(magic + data)
    r = _run(str(f))
    _clean_outcome(r)
    if r.exit_code == 2:
        assert "cannot read audio" in r.stderr or "no audio" in r.stderr.lower()


@SETTINGS
@given(data=st.binary(min_size=0, max_size=64000), fmt=st.sampled_from(["s16le", "f32le"]),
       rate=st.sampled_from(["8000", "16000", "44100"]))
def test_random_bytes_on_stdin_never_crash(real_cache, data, fmt, rate):
    r = _run("-", "--format", fmt, "--rate", rate, input=data)
    _clean_outcome(r, ok_codes=(0,))


# ------------------------------------------------------------------ truncated files

@pytest.mark.parametrize("fmt", ["WAV", "FLAC"])
@pytest.mark.parametrize("keep", [0.0, 0.003, 0.1, 0.5, 0.777, 0.999])
def test_truncated_wav_and_flac(real_cache, beckett, tmp_path, fmt, keep):
    full = tmp_path / f"b.{fmt.lower()}"
    sf.write(full, beckett, 16000, format=fmt, subtype="PCM_16")
    raw = full.read_bytes()
    cut = tmp_path / f"cut.{fmt.lower()}"
    cut.write_bytes(raw[: int(len(raw) * keep)])
    r = _run(str(cut))
    _clean_outcome(r)
    if keep >= 0.5 and r.exit_code == 0:
        assert "ever tried" in r.stdout.lower()  # what survived the cut is still transcribed


# ------------------------------------------------------------------ rates and channels

@pytest.mark.parametrize("rate", [8000, 22050, 44100, 48000])
def test_files_at_other_rates_and_stereo_are_resampled(real_cache, beckett, tmp_path, rate):
    from voxcli.audio.pcm import resample

    audio = resample(beckett, 16000, rate)
    f = tmp_path / f"b{rate}.wav"
    sf.write(f, np.stack([audio, audio * 0.5], axis=1), rate, subtype="PCM_16")  # stereo too
    r = _run(str(f))
    assert r.exit_code == 0, r.stderr
    assert "ever tried" in r.stdout.lower() and "try again" in r.stdout.lower()


def test_stdin_rate_is_honoured_and_a_wrong_rate_does_not_crash(real_cache, beckett):
    from voxcli.audio.pcm import encode_pcm, resample

    pcm48 = encode_pcm(resample(beckett, 16000, 48000), "s16le")
    r = _run("-", "--rate", "48000", input=pcm48)
    assert r.exit_code == 0 and "ever tried" in r.stdout.lower(), r.stderr
    r = _run("-", "--rate", "8000", input=pcm48)  # six times too slow: nonsense, but no crash
    _clean_outcome(r, ok_codes=(0,))


# ------------------------------------------------------------------ NaN / inf

def test_nan_and_inf_in_stdin_are_silence_with_one_warning(real_cache, beckett):
    a = beckett.copy()
    a[1000:1400] = np.nan
    a[40000:40100] = np.inf
    a[80000:80050] = -np.inf
    a[90000:90010] = 1e30
    r = _run("-", "--format", "f32le", input=a.astype("<f4").tobytes())
    assert r.exit_code == 0, r.stderr
    assert r.stderr.count("NaN/inf") == 1
    assert "try again" in r.stdout.lower()


def test_nan_in_a_float_wav_file(real_cache, beckett, tmp_path):
    a = beckett.copy()
    a[5000:9000] = np.nan
    f = tmp_path / "nan.wav"
    sf.write(f, a, 16000, subtype="FLOAT")
    r = _run(str(f))
    assert r.exit_code == 0, r.stderr
    assert "NaN/inf" in r.stderr and "try again" in r.stdout.lower()


def test_all_nan_and_all_silence_give_an_empty_transcript(real_cache):
    for a in (np.full(32000, np.nan, np.float32), np.zeros(32000, np.float32)):
        r = _run("-", "--format", "f32le", input=a.astype("<f4").tobytes())
        assert r.exit_code == 0 and r.stdout.strip() == "", r.stderr


# ------------------------------------------------------------------ headers that lie, long files

AS_LIMIT = 1536 * 1024 * 1024
"""Address-space cap for the subprocesses below: a memory bomb then fails fast instead of swapping."""


def _capped(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))

    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, preexec_fn=cap)


@pytest.mark.parametrize("command", [["transcribe"], ["transcribe", "--live", "--speed", "0"], ["chat", "--input"]])
@pytest.mark.parametrize("rate", [1, 3, 999])
def test_a_header_rate_that_lies_is_one_error_line_not_a_memory_bomb(real_cache, tmp_path, command, rate):
    """issue 18.1: 318 KB of WAV saying 1 Hz became ~10 GB at 16 kHz (SIGSEGV / "internal error")."""
    f = tmp_path / "liar.wav"
    wav_with_header(f, rate, frames=159_000)  # the probe's 318 KB file
    r = _capped(sys.executable, "-m", "voxcli", *command, str(f))
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert r.stderr.splitlines() == [f"voxcli: error: {f}: header sample rate {rate} Hz is out of range (1000..384000 Hz)"]


def test_a_header_with_too_many_channels_is_one_error_line(real_cache, tmp_path):
    f = tmp_path / "wide.wav"
    sf.write(f, np.zeros((1000, 65), np.float32), 16000, subtype="PCM_16")
    r = _capped(sys.executable, "-m", "voxcli", "transcribe", str(f))
    assert r.returncode == 2 and r.stderr.splitlines() == [
        f"voxcli: error: {f}: header channel count 65 is out of range (1..64)"], r.stderr[-2000:]


def test_a_flac_header_that_lies_about_its_length_is_never_allocated(real_cache, beckett, tmp_path):
    """STREAMINFO says 2^36 - 1 samples (256 GiB as float32) for 10 s of audio: read in blocks, never sized by it."""
    f = tmp_path / "long_liar.flac"
    sf.write(f, beckett, 16000, format="FLAC", subtype="PCM_16")
    raw = bytearray(f.read_bytes())
    at = 8 + 13  # "fLaC", the block header, then 13 bytes into STREAMINFO: the 36-bit total sample count
    raw[at] |= 0x0F
    raw[at + 1 : at + 5] = b"\xff\xff\xff\xff"
    f.write_bytes(bytes(raw))
    r = _capped(sys.executable, "-m", "voxcli", "transcribe", str(f))
    _clean_outcome(subprocess_result(r))
    assert "MemoryError" not in r.stderr and "bad_alloc" not in r.stderr


def subprocess_result(r: subprocess.CompletedProcess[str]):  # type: ignore[no-untyped-def]
    """A CompletedProcess seen through the CliRunner result fields `_clean_outcome` reads."""
    from types import SimpleNamespace

    return SimpleNamespace(exit_code=r.returncode, stderr=r.stderr, stdout=r.stdout)


_FLAT_RSS = textwrap.dedent("""
    import resource, sys
    import numpy as np, soundfile as sf
    from voxcli.audio.files import iter_audio

    path, rate, minutes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with sf.SoundFile(path, "w", samplerate=rate, channels=2, format="FLAC", subtype="PCM_16") as f:
        minute = np.zeros((rate * 60, 2), np.float32)
        for _ in range(minutes):
            f.write(minute)
    del minute
    blocks = iter_audio(path, 16000)
    total = next(blocks).size  # imports done, first block decoded: the baseline
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for b in blocks:
        total += b.size
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
    print(total, grown)
""")


def test_a_long_file_decodes_in_flat_memory(tmp_path):
    """issue 18.2: 20 minutes at 48 kHz stereo is 440 MB decoded whole; in blocks the peak RSS must not move."""
    f = tmp_path / "silence.flac"
    r = _capped(sys.executable, "-c", _FLAT_RSS, str(f), "48000", "20", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    total, grown_kib = map(int, r.stdout.split())
    assert abs(total - 20 * 60 * 16000) <= 16, total
    assert grown_kib < 50 * 1024, f"peak RSS grew {grown_kib / 1024:.0f} MB over 20 minutes of audio"
