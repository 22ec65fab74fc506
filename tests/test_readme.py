"""The README's library example runs as written, on the real models (a README that lies is a bug)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _library_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Library usage", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the Library usage section should hold exactly one python block"
    return blocks[0]


def test_library_example_runs_and_hears_itself(tmp_path: Path, real_cache: Path):
    r = subprocess.run([sys.executable, "-c", _library_block()], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("TTFA ") and ", RTF " in lines[0]
    transcript = " ".join(lines[1:]).lower()  # finish() gives one line per utterance
    # Heard back: the example's point is that it runs; ASR accuracy is measured elsewhere. The voice's
    # noise makes every run a different rendition, and Moonshine tiny sometimes hears one word wrong
    # ("below there", and once in CI "arrives and kisses"): most of the words, not a chosen few.
    words = ("hello", "there", "sentence", "arrives", "pieces", "language", "model")
    assert sum(w in transcript for w in words) >= 5, transcript
    assert (tmp_path / "hello.wav").stat().st_size > 44
