"""`voxcli pull`, `voxcli models`, `voxcli rm`: the model cache from the command line.

Thin callers of `voxcli.hub` (`hub.pull.pull_many`, `hub.resolve.list_models`,
`hub.pull.remove`): what a source is (catalog name, URL, path) is decided by
the library, so `voxcli.pull(...)` in Python does exactly what the command does.
"""
from __future__ import annotations

import json
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from voxcli import paths
from voxcli.cli.complete import complete_installed_model, complete_model
from voxcli.cli.errors import STATE, err, guarded
from voxcli.cli.options import JsonOpt, OfflineOpt, QuietOpt, VerboseOpt, flag
from voxcli.errors import ModelNotFoundError, UsageError

if TYPE_CHECKING:
    from voxcli.hub.model_cards import ModelCard

PULL_HELP = """\
Download, verify and install models into the cache.

NAME is a catalog name (see `voxcli models`), an https:// URL of a file or
archive (.tar.gz, .tar.bz2, .zip), or a local directory or archive.
Models that ship inside an installed Python package are found in place.

[bold]Examples[/bold]

  voxcli pull --defaults                         the default TTS, ASR and VAD models
  voxcli pull moonshine-tiny-en
  voxcli pull smollm2-135m-instruct              the on-device chat LLM (98 MB)
  voxcli pull ./my-voice.tar.gz --name myvoice   a voice of your own
  voxcli pull https://example.org/v.onnx --name v --sha256 HEX
"""

MODELS_HELP = """\
List known and installed models: kind, size, licence, status.

[bold]Examples[/bold]

  voxcli models
  voxcli models --json | jq '.[] | select(.status != "missing") | .name'
  voxcli models --path piper-joe-medium          print the model's directory
  voxcli models --info whisper-base              the model card (size, licence, WER, RTF)
  voxcli models --kind asr --json | jq '.[] | {name, wer: .card.wer}'
"""

RM_HELP = """\
Remove a model (and what was built from it) from the cache, or what interrupted pulls left.

--partials removes partial downloads and staging folders left by pulls that
were killed (only those no running pull holds; `voxcli doctor` lists them).

[bold]Examples[/bold]

  voxcli rm smollm2-135m-instruct
  voxcli rm --partials
"""


NamesArg = Annotated[Optional[list[str]], typer.Argument(
    metavar="NAME|URL|PATH", help="Model(s) to install.", show_default=False, autocompletion=complete_model)]


@guarded
def pull(
    names: NamesArg = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    offline: OfflineOpt = False,
    verbose: VerboseOpt = False,
    defaults: Annotated[bool, flag("--defaults", help="Install every default model.")] = False,
    name: Annotated[Optional[str], typer.Option("--name", help="Name for a model pulled from a URL or path.")] = None,
    sha256: Annotated[Optional[str], typer.Option("--sha256", help="Expected sha256 of a URL/path download.")] = None,
    kind: Annotated[Optional[str], typer.Option(
        "--kind", help="Kind of a URL/path model (tts, asr, vad, llm, data); guessed if omitted.")] = None,
    force: Annotated[bool, flag("--force", help="Download and install again even if present.")] = False,
    measure: Annotated[Optional[bool], typer.Option(
        "--measure/--no-measure", show_default=False, help="After pulling the accurate ASR tier (moonshine-base-en), "
        "time it on this machine (~10-30 s; by default once, --measure times it again): when it keeps real time it "
        "becomes the default recognizer.")] = None,
) -> None:
    """Download, verify and install models (the `voxcli pull` command)."""
    from voxcli.cli.views.progress import make_progress
    from voxcli.hub.pull import default_names, pull_many

    targets = list(names or [])
    if defaults:
        targets = default_names() + [t for t in targets if t not in default_names()]
    if not targets:
        raise UsageError("nothing to pull", hint="give a model name (see `voxcli models`) or --defaults")
    if STATE.offline or offline or paths.offline():
        raise UsageError("cannot pull while offline", hint="drop --offline / unset VOXCLI_OFFLINE")
    progress = make_progress(json_out, quiet)
    try:
        bundles = pull_many(targets, name=name, sha256=sha256, kind=kind, force=force, on_progress=progress)
    finally:
        close = getattr(progress, "close", None)
        if close:
            close()
    if json_out:
        for b in bundles:
            print(json.dumps({"event": "installed", "name": b.name, "kind": b.kind, "origin": b.origin,
                              "path": str(b.path)}))
    if measure is not False:
        _measure_accurate_tier([b.name for b in bundles], again=bool(measure or force), json_out=json_out, quiet=quiet)


def _measure_accurate_tier(pulled: list[str], *, again: bool, json_out: bool, quiet: bool) -> None:
    """Time the accurate ASR tier on this machine right after its pull, so the default can follow it.

    Why at pull: the pull is the moment a user expects to wait, it builds the
    int8 graphs the first `transcribe` would otherwise build (~20 s), and the
    record (`voxcli doctor` shows it) is what `asr.models.default_asr` reads.
    Measured once per machine and model files; `--measure` (or `--force`) measures again. The model is
    installed whatever happens here: a timing that fails is one line, and the fast tier stays the default.
    """
    from voxcli.asr.live_tier import measurements
    from voxcli.asr.models import ACCURATE_ASR, DEFAULT_ASR, default_asr
    from voxcli.config import resolve
    from voxcli.errors import VoxError

    if ACCURATE_ASR not in pulled:
        return
    if not again and any(m is not None for _b, m, _n in measurements(False, [ACCURATE_ASR])[0]):
        return  # measured here before: nothing changed
    if not quiet and not json_out:
        err(f"timing {ACCURATE_ASR} on this machine (~10-30 s; --no-measure skips it) ...")
    try:
        rows, errors = measurements(True, [ACCURATE_ASR])
    except (VoxError, OSError, ImportError) as e:  # the voice that reads the script, an unwritable data dir
        rows, errors = [], [f"{type(e).__name__}: {e}"]
    m = next((m for _b, m, _n in rows if m is not None), None)
    if m is None:
        why = "; ".join(errors) or "not installed"
        if json_out:
            print(json.dumps({"event": "measure_failed", "name": ACCURATE_ASR, "error": why}))
        err(f"voxcli: could not time {ACCURATE_ASR}: {why}; the default recognizer stays {DEFAULT_ASR}")
        return
    default, configured = default_asr(), resolve("asr.model")
    if json_out:
        print(json.dumps({"event": "measured", "name": m.model, "worker_rtf": m.worker_rtf, "tier": m.tier,
                          "default_asr": default, "configured": configured}))
    elif not quiet:
        wins = f" (asr.model {configured} still wins)" if configured else ""
        verdict = (f"keeps real time here (worker RTF {m.worker_rtf:.2f}): it is now the default recognizer{wins} "
                   f"(the fast tier: --model {DEFAULT_ASR})" if default == ACCURATE_ASR else
                   f"needs worker RTF {m.worker_rtf:.2f} here ({m.tier}; live wants <= 0.5): the default stays "
                   f"{DEFAULT_ASR}; for files: --model {ACCURATE_ASR}; on an idle machine, time it again: "
                   f"`voxcli pull {ACCURATE_ASR} --measure`")
        err(f"{m.model} {verdict}")


@guarded
def models(
    json_out: JsonOpt = False,
    path: Annotated[Optional[str], typer.Option(
        "--path", metavar="NAME", help="Print the directory of an installed model.",
        autocompletion=complete_installed_model)] = None,
    kind: Annotated[Optional[str], typer.Option("--kind", help="Only models of this kind.")] = None,
    info: Annotated[Optional[str], typer.Option(
        "--info", metavar="NAME", help="Show one model's card (with --json: one object).",
        autocompletion=complete_model)] = None,
    verbose: VerboseOpt = False,
) -> None:
    """List known and installed models (the `voxcli models` command)."""
    from voxcli.hub.cache import Cache
    from voxcli.hub.catalog import load_catalog
    from voxcli.hub.resolve import installed_bundle, list_models

    cache = Cache.default()
    cards = {name: e.card for name, e in load_catalog().items()}  # checked once, when the catalog is parsed
    if info is not None:
        _show_info(info, [r for r in list_models(cache) if r.name == info], cards.get(info), json_out)
        return
    if path is not None:
        b = installed_bundle(path, cache)
        if b is None:
            raise ModelNotFoundError(f"model {path!r} is not installed", hint=f"run `voxcli pull {path}`")
        print(b.path)
        return
    rows = list_models(cache, kind)
    if json_out:
        print(json.dumps([{**asdict(r), "card": c.to_dict() if (c := cards.get(r.name)) else None} for r in rows],
                         indent=2))
        return
    from voxcli.cli.views.model_card import card_brief
    from voxcli.cli.views.pull import show_models

    show_models([replace(r, description=f"{r.description}; {card_brief(c)}") if (c := cards.get(r.name)) else r
                 for r in rows], cache.root)


def _show_info(name: str, rows: list, card: "ModelCard | None", json_out: bool) -> None:
    """`voxcli models --info NAME`: the card of a catalog model (kind, size, licence, status for any model)."""
    if not rows:
        raise ModelNotFoundError(f"unknown model {name!r}", hint="see `voxcli models`")
    row = rows[0]
    if json_out:
        print(json.dumps({**asdict(row), "card": card.to_dict() if card else None}, indent=2))
        return
    from voxcli.cli.views.model_card import show_card

    show_card(row, card)


@guarded
def rm(
    name: Annotated[Optional[str], typer.Argument(
        help="Model name.", show_default=False, autocompletion=complete_installed_model)] = None,
    partials: Annotated[bool, flag(
        "--partials", help="Remove partial downloads and staging folders of interrupted pulls.")] = False,
    verbose: VerboseOpt = False,
) -> None:
    """Remove a model from the cache, or the leftovers of interrupted pulls (the `voxcli rm` command)."""
    if name is None and not partials:
        raise UsageError("nothing to remove", hint="give a model name (see `voxcli models`) or --partials")
    if name is not None:
        from voxcli.hub.pull import remove

        remove(name)
        err(f"removed {name}")
    if partials:
        from voxcli.hub import leftovers

        removed = leftovers.clean()
        size = sum(x.size for x in removed) / 1e6
        err(f"removed {len(removed)} partial download(s) and staging folder(s) ({size:.1f} MB)"
            if removed else "no leftovers of interrupted pulls")


def register(app: typer.Typer) -> None:
    app.command("pull", help=PULL_HELP, short_help="Download, verify and install models into the cache.")(pull)
    app.command("models", help=MODELS_HELP, short_help="List known and installed models.")(models)
    app.command("rm", help=RM_HELP, short_help="Remove a model from the cache.")(rm)
