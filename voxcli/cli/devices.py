"""`voxcli devices`: list the audio devices PortAudio sees (for `--device`)."""
from __future__ import annotations

import json
from dataclasses import asdict
import typer

from voxcli.cli.errors import device_hint, guarded
from voxcli.cli.options import JsonOpt, VerboseOpt

HELP = """\
List audio input and output devices (index, name, host API, channels,
default rate). Pass an index or part of a name to `--device`.

[bold]Examples[/bold]

  voxcli devices
  voxcli devices --json | jq -r 'select(.max_output_channels > 0) | .name'
  voxcli speak "Hello." --device pulse
"""


@guarded
def devices(json_out: JsonOpt = False, verbose: VerboseOpt = False) -> None:
    """List audio devices (the `voxcli devices` command)."""
    from voxcli.audio.devices import list_devices
    from voxcli.cli.views.tts import render_devices
    from voxcli.errors import DeviceUnavailableError

    with device_hint("devices"):
        found = list_devices()
        if json_out:
            for d in found:
                print(json.dumps(asdict(d)), flush=True)
            return
        if not found:
            raise DeviceUnavailableError("no audio devices found")
    render_devices(found)


def register(app: typer.Typer) -> None:
    app.command("devices", help=HELP)(devices)
