"""The engine is a library: importing it never drags in the CLI's typer or rich."""
from __future__ import annotations

import subprocess
import sys

ENGINE_MODULES = [
    "voxcli", "voxcli.events", "voxcli.errors", "voxcli.paths",
    "voxcli.hub.registry", "voxcli.hub.download", "voxcli.hub.cache", "voxcli.hub.adhoc",
    "voxcli.audio.pcm", "voxcli.audio.files",
]


def test_engine_imports_neither_typer_nor_rich():
    import importlib.util

    mods = [m for m in ENGINE_MODULES + [
        "voxcli.tts.streamer", "voxcli.tts.chunker", "voxcli.asr.streamer", "voxcli.asr.endpointer",
        "voxcli.asr.agreement", "voxcli.bench.ledger", "voxcli.bench.metrics", "voxcli.runtimes.piper.voice",
        "voxcli.runtimes.moonshine", "voxcli.llm.openai_compat", "voxcli.runtimes.smollm.local", "voxcli.chat.agent",
    ] if importlib.util.find_spec(m) is not None]
    code = (
        "import sys, importlib\n"
        f"for m in {mods!r}: importlib.import_module(m)\n"
        # httpx's own __init__ imports rich/click for its CLI when they are installed,
        # so at run time only typer is a reliable signal; the AST test below covers rich.
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'typer')\n"
        "print(','.join(bad))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""


def test_import_voxcli_is_cheap():
    code = "import sys, voxcli; print(','.join(m for m in ('onnxruntime', 'numpy', 'httpx') if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == ""


def test_engine_sources_do_not_import_rich_typer_or_click():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "voxcli"
    offenders = []
    for path in [root / "__init__.py", root / "events.py", root / "errors.py", root / "settings.py"] + [
        p for d in ("engine", "models", "audio", "llm") for p in (root / d).rglob("*.py")
    ]:
        if not path.exists():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] in ("rich", "typer", "click") for n in names):
                offenders.append(str(path.relative_to(root)))
    assert offenders == []
