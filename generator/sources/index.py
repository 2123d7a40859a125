"""The package index pip is configured to use, and HTTP reads from it.

The index is never named in this code: it comes from pip's own configuration (``PIP_INDEX_URL``,
pip.conf), falling back to pip's built-in default exactly as ``pip install`` would.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from generator.errors import FetchTimedOut, SourceUnavailable, UsageError

FETCH_TIMEOUT_ENV = "BALANCE_PATCHGEN_FETCH_TIMEOUT"
DEFAULT_FETCH_TIMEOUT_S = 60.0
_JSON_SIMPLE = "application/vnd.pypi.simple.v1+json"
_CHUNK = 64 * 1024


class Deadline:
    """One total time budget for a fetch, however many requests and reads it takes.

    A socket timeout alone bounds each wait, not the sum: a server trickling one byte every few
    seconds never trips it. Every request and every read asks this for the time left.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    @classmethod
    def from_env(cls) -> Deadline:
        raw = os.environ.get(FETCH_TIMEOUT_ENV, "").strip()
        if not raw:
            return cls(DEFAULT_FETCH_TIMEOUT_S)
        try:
            seconds = float(raw)
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds > 0):
            raise UsageError(
                f"{FETCH_TIMEOUT_ENV}={raw!r} is not a positive number of seconds: set it to e.g. 60, or unset it"
            )
        return cls(seconds)

    def expired(self) -> bool:
        return time.monotonic() >= self._end

    def left(self, url: str) -> float:
        """Seconds left, or FetchTimedOut naming what was being read."""
        left = self._end - time.monotonic()
        if left <= 0:
            raise FetchTimedOut(
                f"reading {url} did not finish within {self.seconds:g} s ({FETCH_TIMEOUT_ENV}): "
                f"check the network or raise {FETCH_TIMEOUT_ENV}, or use --source git/installed"
            )
        return left


def _socket_of(response: Any) -> socket.socket | None:
    # http.client keeps the connection's socket behind the buffered reader; it has no public handle.
    raw = getattr(getattr(response, "fp", None), "raw", None)
    sock = getattr(raw, "_sock", None)
    return sock if isinstance(sock, socket.socket) else None


def _read_body(response: Any, url: str, deadline: Deadline) -> bytes:
    """The whole body, each wait for bytes bounded by the time the deadline has left."""
    sock = _socket_of(response)
    read = getattr(response, "read1", None) or response.read
    chunks: list[bytes] = []
    while True:
        left = deadline.left(url)
        if sock is not None:
            sock.settimeout(left)
        chunk = read(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def configured_index_url() -> str:
    try:
        from pip._internal.configuration import Configuration
        from pip._internal.exceptions import ConfigurationError
        from pip._internal.models.index import PyPI
    except ImportError:
        raise SourceUnavailable(
            "pip is not importable, so the configured package index is unknown: install pip"
        ) from None
    config = Configuration(isolated=False)
    config.load()
    # Same precedence as pip: environment over the download/global sections of its files.
    for key in (":env:.index-url", "download.index-url", "global.index-url"):
        try:
            value = str(config.get_value(key))
        except ConfigurationError:
            continue
        if value.strip():
            return value.split()[0]
    return PyPI.simple_url


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None
    size: int | None


def list_files(project: str, index_url: str | None = None, deadline: Deadline | None = None) -> list[IndexFile]:
    index = (index_url or configured_index_url()).rstrip("/")
    url = f"{index}/{project}/"
    payload = _get_json(url, deadline or Deadline.from_env())
    files = []
    try:
        for item in payload.get("files", []):
            if item.get("yanked"):
                continue
            files.append(
                IndexFile(
                    filename=str(item["filename"]),
                    url=urllib.parse.urljoin(url, str(item["url"])),
                    sha256=(item.get("hashes") or {}).get("sha256"),
                    size=item.get("size"),
                )
            )
    except (KeyError, TypeError, AttributeError):
        raise SourceUnavailable(
            f"the package index answered {url} with a listing that is not PEP 691 JSON: "
            "check pip's index-url, or use --source git/installed"
        ) from None
    return files


def _get_json(url: str, deadline: Deadline) -> dict[str, Any]:
    request = urllib.request.Request(url, headers={"Accept": _JSON_SIMPLE})
    try:
        with urllib.request.urlopen(request, timeout=deadline.left(url)) as response:
            payload = json.loads(_read_body(response, url, deadline))
            if not isinstance(payload, dict):
                raise ValueError("not a JSON object")
            return payload
    except (urllib.error.URLError, TimeoutError, OSError, ValueError) as exc:
        if deadline.expired():
            deadline.left(url)
        raise SourceUnavailable(
            f"cannot read the package index at {url} ({_reason(exc)}): "
            "check the network or pip's index-url, or use --source git/installed"
        ) from None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc) or type(exc).__name__


class RangeReader:
    """A read-only, seekable file over HTTP range requests, for ``zipfile``.

    A wheel's directory sits at its end, so reading one member costs the directory plus that
    member, not the whole (hundreds of MB) artifact. Fetched spans are cached; ``downloaded``
    counts body bytes received, for the benchmark.

    A host that ignores ranges sends the whole file instead. That is accepted only when the index
    published the file's sha256 and the body matches it: the one hash that does not come from
    inside the artifact it vouches for.
    """

    _MIN_FETCH = 64 * 1024

    def __init__(
        self, url: str, size: int | None = None, deadline: Deadline | None = None, sha256: str | None = None
    ) -> None:
        self.url = url
        self.sha256 = sha256
        self.deadline = deadline or Deadline.from_env()
        self.downloaded = 0
        self._pos = 0
        self._spans: list[tuple[int, bytes]] = []
        self._size = size if size is not None else self._probe_size()

    def _probe_size(self) -> int:
        offset, body, total = self._fetch_range("bytes=-1")
        self._spans.append((offset, body))
        return total

    def _fetch_range(self, spec: str) -> tuple[int, bytes, int]:
        """(offset of the body in the file, body, file size) for a ``Range`` header value."""
        request = urllib.request.Request(self.url, headers={"Range": spec})
        try:
            with urllib.request.urlopen(request, timeout=self.deadline.left(self.url)) as response:
                if response.status == 200:
                    if self.sha256 is None:
                        raise SourceUnavailable(
                            f"the index file host ignored a range request for {self.url} and the index publishes "
                            "no sha256 to check the whole file against: use --source installed or --source git"
                        )
                    body = _read_body(response, self.url, self.deadline)
                    offset, total = 0, len(body)
                else:
                    body = _read_body(response, self.url, self.deadline)
                    # "bytes START-END/TOTAL"
                    span, _, size = str(response.headers.get("Content-Range", "")).partition("/")
                    offset, total = int(span.split()[-1].split("-")[0]), int(size)
        except (urllib.error.URLError, TimeoutError, OSError, ValueError, IndexError) as exc:
            if self.deadline.expired():
                self.deadline.left(self.url)
            raise SourceUnavailable(
                f"cannot read {self.url} ({_reason(exc)}): check the network, or use --source git/installed"
            ) from None
        self.downloaded += len(body)
        if response.status == 200 and hashlib.sha256(body).hexdigest() != self.sha256:
            raise SourceUnavailable(
                f"{self.url} does not match the sha256 the package index publishes for it: "
                "the download is corrupt or tampered with; retry, or use --source git"
            )
        return offset, body, total

    def prefetch(self, spans: list[tuple[int, int]]) -> None:
        """Fetch each ``(start, end)`` byte range now, one request each: later reads inside them cost nothing."""
        for start, end in spans:
            if self._cached(start, end) is None:
                self._spans.append(self._fetch_range(f"bytes={start}-{end - 1}")[:2])

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, n: int = -1) -> bytes:
        end = self._size if n is None or n < 0 else min(self._size, self._pos + n)
        if end <= self._pos:
            return b""
        data = self._cached(self._pos, end)
        if data is None:
            start, stop = self._pos, end
            if stop - start < self._MIN_FETCH:
                if stop == self._size:  # the zip's tail: its end records sit just before
                    start = max(0, stop - self._MIN_FETCH)
                else:  # a member's header: its data follows
                    stop = min(self._size, start + self._MIN_FETCH)
            self._spans.append(self._fetch_range(f"bytes={start}-{stop - 1}")[:2])
            data = self._cached(self._pos, end)
            if data is None:
                raise SourceUnavailable(
                    f"{self.url} answered bytes {start}-{stop - 1} with another span: retry, or use --source git"
                )
        self._pos = end
        return data

    def _cached(self, start: int, end: int) -> bytes | None:
        for span_start, body in self._spans:
            if span_start <= start and end <= span_start + len(body):
                return body[start - span_start : end - span_start]
        return None
