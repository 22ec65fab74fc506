"""Issue 18 item 9: failures of the machine get their one-line cause and the documented exit code.

Before, a directory as `-o`, an unwritable output directory or cache, stdout on `/dev/full`,
a file size limit hit while writing the WAV, a voice file that rotted or vanished during
load all ended in "internal error ... report it" (exit 1). Every case runs the real CLI in a
subprocess against real files. We run as root, so a read-only directory is not available
without a bind mount; the tests use what refuses even root: a path under a regular file
(ENOTDIR), `/sys` (EPERM/EACCES), `/proc/x` (no such directory), `/dev/full` (ENOSPC) and
RLIMIT_FSIZE (EFBIG, as a full disk does in the middle of a write).
"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("real_cache")

LONG_TEXT = "Hello there. This sentence is long enough to need more than a few kilobytes of audio on disk. " * 3


def voxcli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, stdout=subprocess.PIPE,
           fsize: int | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real CLI; `fsize` caps the size of any file it writes (RLIMIT_FSIZE, a full disk stand-in)."""
    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run([sys.executable, "-m", "voxcli", *args], cwd=cwd, env={**os.environ, **(env or {})},
                          stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=180, preexec_fn=limit)


def one_error(r: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    """The run failed with `code` and one `voxcli: error:` line that contains every needle (no traceback)."""
    assert r.returncode == code, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("voxcli: error:")]
    assert len(errors) == 1, r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    for n in needles:
        assert n in errors[0], r.stderr
    return errors[0]


def test_an_existing_directory_as_output_is_a_usage_error_before_the_voice_loads(tmp_path):
    (tmp_path / "out.wav").mkdir()
    r = voxcli("speak", "Hi.", "-o", "out.wav", "--verbose", cwd=tmp_path)
    one_error(r, 2, "out.wav: is a directory")
    assert "tts model" not in r.stderr  # refused before any model was resolved
    assert os.listdir(tmp_path / "out.wav") == [] and len(os.listdir(tmp_path)) == 1


def test_an_output_under_a_regular_file_says_so(tmp_path):
    (tmp_path / "notes").write_text("a file, not a directory")
    one_error(voxcli("speak", "Hi.", "-o", "notes/x.wav", cwd=tmp_path), 2, "notes is not a directory")


def test_an_unwritable_output_directory_is_one_line_exit_1(tmp_path):
    """/sys refuses new files even to root (the stand-in for a read-only directory)."""
    r = voxcli("speak", "Hi.", "-o", "/sys/voxcli-test.wav")
    one_error(r, 1, "cannot write /sys/voxcli-test.wav")
    assert not Path("/sys/voxcli-test.wav").exists()


@pytest.mark.parametrize("args", [
    ["speak", "Hi.", "--raw"],
    ["speak", "Hi.", "--json", "-o", "{tmp}/hi.wav"],
    ["transcribe", "{speech}"],
    ["transcribe", "{speech}", "--live", "--speed", "0", "--json"],
], ids=["speak-raw", "speak-json", "transcribe", "transcribe-live-json"])
def test_stdout_on_dev_full(tmp_path, speech_samples, args):
    args = [a.format(tmp=tmp_path, speech=speech_samples["beckett"]) for a in args]
    with open("/dev/full", "w") as full:
        r = voxcli(*args, stdout=full)
    one_error(r, 1, "cannot write stdout: no space left on the device")
    assert not (tmp_path / "hi.wav").exists()  # the failed run left no output behind


def test_a_file_size_limit_while_writing_the_wav(tmp_path):
    """RLIMIT_FSIZE makes write(2) fail with EFBIG mid-file, as ENOSPC does on a full disk; libsndfile
    only says "System error.", so the cause is found from the limit. No partial file is left."""
    r = voxcli("speak", LONG_TEXT, "-o", "big.wav", cwd=tmp_path, fsize=16 * 1024)
    one_error(r, 1, "cannot write big.wav: a file size limit was reached")
    assert os.listdir(tmp_path) == []  # neither big.wav nor its temp file


@pytest.mark.parametrize("cache", ["{tmp}/a-file/cache", "/proc/voxcli-nothing/cache", "/sys/voxcli-cache"],
                         ids=["under-a-file", "missing-proc-dir", "sys"])
def test_an_unusable_cache_names_the_cache_and_the_variable(tmp_path, speech_samples, cache):
    """transcribe needs the ASR model from the cache (the voice ships in a package, speak may not touch it)."""
    (tmp_path / "a-file").write_text("x")
    r = voxcli("transcribe", str(speech_samples["beckett"]), env={"VOXCLI_CACHE_DIR": cache.format(tmp=tmp_path)})
    line = one_error(r, 1, "model cache")
    assert "VOXCLI_CACHE_DIR" in r.stderr, line


@pytest.fixture
def own_voice(tmp_path, voice_bundle) -> tuple[dict[str, str], Path]:
    """The default voice pulled from a local directory into an empty cache under the name `myvoice`."""
    src = tmp_path / "voice"
    src.mkdir()
    for p in voice_bundle.files.values():
        shutil.copy(p, src / p.name)
    env = {"VOXCLI_CACHE_DIR": str(tmp_path / "cache"), "VOXCLI_DATA_DIR": str(tmp_path / "data")}
    r = voxcli("pull", str(src), "--name", "myvoice", "--kind", "tts", env=env)
    assert r.returncode == 0, r.stderr
    onnx = next((tmp_path / "cache" / "models" / "myvoice").glob("*.onnx"))
    return env, onnx


def test_a_corrupt_voice_onnx_is_an_integrity_error(tmp_path, own_voice):
    """Bytes rot with the size and mtime unchanged (so the quick install check passes): the ONNX parse
    error used to be an internal error; it is exit 4 naming the file and the fix."""
    env, onnx = own_voice
    st = onnx.stat()
    with open(onnx, "r+b") as f:
        f.write(b"\xff" * 4096)
    os.utime(onnx, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = voxcli("speak", "Hi.", "--voice", "myvoice", "-o", str(tmp_path / "a.wav"), env=env)
    one_error(r, 4, f"voice model {onnx} is damaged")
    assert "voxcli pull --force" in r.stderr


DELETE_DURING_LOAD = """
import os, runpy, sys
import voxcli.runtimes.piper.graph_split as gs
split = gs.split_in_memory
def split_after_removal(path):
    os.unlink(path)  # the model goes away after it was resolved, as the voice is being loaded
    return split(path)
gs.split_in_memory = split_after_removal
sys.argv = ["voxcli", *sys.argv[1:]]
runpy.run_module("voxcli", run_name="__main__")
"""


def test_a_voice_removed_during_load_is_model_not_found(tmp_path, own_voice):
    """The removal is timed by wrapping the graph splitter (the file is really deleted; nothing is faked)."""
    env, onnx = own_voice
    r = subprocess.run([sys.executable, "-c", DELETE_DURING_LOAD, "speak", "Hi.", "--voice", "myvoice",
                        "-o", str(tmp_path / "a.wav")], env={**os.environ, **env}, capture_output=True,
                       text=True, timeout=180)
    one_error(r, 3, f"voice model file disappeared while loading: {onnx}")


@pytest.mark.parametrize("args", [["speak", "Hi.", "-o", "{tmp}/a.wav", "-q"], ["transcribe", "{speech}", "-q"]],
                         ids=["speak", "transcribe"])
def test_unknown_config_keys_warn_once(tmp_path, speech_samples, args):
    """A typo in the config must not silently do nothing (chat already warned; speak and transcribe too)."""
    cfg = tmp_path / "config.toml"
    cfg.write_text('[tts]\nvoise = "x"\n[asr]\nendpoint_msec = 300\n')
    args = [a.format(tmp=tmp_path, speech=speech_samples["beckett"]) for a in args]
    r = voxcli(*args, env={"VOXCLI_CONFIG": str(cfg)})
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("unknown key 'voise' in [tts] ignored") == 1
    assert r.stderr.count("unknown key 'endpoint_msec' in [asr] ignored") == 1


def test_a_corrupt_asr_model_is_an_integrity_error(tmp_path, speech_samples, asr_bundle, vad_bundle):
    """The ASR runtime is loaded by another module: the CLI's last line of defence recognises onnxruntime's
    load failure ("model verification failed") and says exit 4 instead of "internal error"."""
    models = tmp_path / "cache" / "models"
    for b in (asr_bundle, vad_bundle):
        if b.origin == "cache":
            shutil.copytree(b.path, models / b.name)
    ort = next((models / asr_bundle.name).glob("encoder*"))
    st = ort.stat()
    with open(ort, "r+b") as f:
        f.write(b"\xff" * 4096)
    os.utime(ort, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = voxcli("transcribe", "--offline", str(speech_samples["beckett"]),
               env={"VOXCLI_CACHE_DIR": str(tmp_path / "cache")})
    one_error(r, 4, "a model file is damaged")


def test_config_set_into_an_unwritable_directory_names_the_config_file():
    """Before: "voxcli: error: /sys/.c.toml.XXXX.tmp: permission denied" named our temp file, not the config."""
    r = voxcli("config", "set", "tts.voice", "x", env={"VOXCLI_CONFIG": "/sys/voxcli-test.toml"})
    one_error(r, 1, "cannot write /sys/voxcli-test.toml")
