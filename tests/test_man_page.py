"""man/voxcli.1: renders with man and groff without a single warning, and is not stale."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "man" / "voxcli.1"


def test_committed_man_page_is_not_stale():
    p = subprocess.run([sys.executable, "scripts/gen_man.py", "--check"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed (Debian: groff-base)")
def test_groff_reports_no_warnings():
    p = subprocess.run(["groff", "-ww", "-k", "-man", "-Tutf8", "-z", str(PAGE)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and p.stderr == "", p.stderr


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed (Debian: man-db)")
def test_man_renders_every_section_at_80_columns():
    env = {**os.environ, "MANWIDTH": "80", "MAN_KEEP_FORMATTING": "", "LANG": "C.UTF-8"}
    p = subprocess.run(["man", "--warnings", "-l", str(PAGE)], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    text = p.stdout
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "GLOBAL OPTIONS", "COMMANDS", "EXAMPLES", "ENVIRONMENT",
                    "FILES", "EXIT STATUS", "SEE ALSO"):
        assert f"\n{section}\n" in text, section
    for cmd in ("speak", "transcribe", "pull", "models", "rm", "devices", "bench ttfa", "ledger", "chat",
                "doctor", "config set"):
        assert f"voxcli {cmd}" in text, cmd
    for var in ("VOXCLI_CACHE_DIR", "VOXCLI_OFFLINE", "VOXCLI_INDEX_URL", "VOXCLI_CATALOG", "VOXCLI_CONFIG",
                "VOXCLI_DATA_DIR", "NO_COLOR"):
        assert var in text, var
    assert "| voxcli speak -" in text and "aplay" in text and "arecord" in text and "ffmpeg" in text
    assert "bench ttfa" in text and "--max-p95-ms" in text
    from voxcli.errors import ExitCode

    exit_section = text.split("\nEXIT STATUS\n", 1)[1].split("\nSEE ALSO\n", 1)[0]
    for code in ExitCode:
        assert f"       {int(code)} " in exit_section, code
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "\x1b[" not in text and "[bold]" not in text  # no leftover rich markup
