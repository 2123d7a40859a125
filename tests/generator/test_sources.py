"""Every source on real upstream bytes: git (a real repository built here), installed, release."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from balance_dev.upstream_repo import build_vllm_repo
from generator import pipeline
from generator.errors import SourceUnavailable
from generator.pin import version_of
from generator.sources import cache, installed, release
from generator.sources import git as git_source
from generator.sources.base import UPSTREAM_PATH, UpstreamFile
from generator.sources.resolve import SourceKind, fetch_upstream


@pytest.fixture
def vllm_repo(tmp_path: Path, upstream_pinned: UpstreamFile, upstream_older: UpstreamFile) -> Path:
    """The older release tagged, then the pinned one, then work after the release."""
    releases = [(u.tag, u.data) for u in (upstream_older, upstream_pinned)]
    return build_vllm_repo(tmp_path / "vllm", releases, then=upstream_pinned.data + b"# work after the release\n")


def test_git_local_checkout_reads_the_tag_not_the_work_tree(vllm_repo: Path, upstream_pinned: UpstreamFile) -> None:
    got = git_source.fetch(upstream_pinned.tag, str(vllm_repo))
    assert got.data == upstream_pinned.data
    assert got.origin == "git"


def test_git_unknown_tag_is_source_unavailable(vllm_repo: Path) -> None:
    with pytest.raises(SourceUnavailable, match=r"tag v0\.0\.1 not found"):
        git_source.fetch("v0.0.1", str(vllm_repo))


def test_git_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable, match="is not a git repository"):
        git_source.fetch("v1.0.0", str(tmp_path))


def test_git_url_is_a_cached_blobless_clone_fetching_only_the_tag(
    vllm_repo: Path, upstream_pinned: UpstreamFile, upstream_older: UpstreamFile
) -> None:
    url = vllm_repo.as_uri()
    assert git_source.fetch(upstream_pinned.tag, url).data == upstream_pinned.data
    clones = list((cache.cache_root() / "git").iterdir())
    assert len(clones) == 1
    clone = git.Repo(clones[0])
    assert clone.bare
    assert [t.name for t in clone.tags] == [upstream_pinned.tag]  # only the tag asked for
    assert clone.git.config("remote.origin.partialclonefilter") == "blob:none"
    # A second tag reuses the same clone.
    assert git_source.fetch(upstream_older.tag, url).data == upstream_older.data
    assert list((cache.cache_root() / "git").iterdir()) == clones
    with pytest.raises(SourceUnavailable, match="not found"):
        git_source.fetch("v0.0.1", url)


def test_installed_refuses_a_locally_edited_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, upstream_pinned: UpstreamFile, pinned_tag: str
) -> None:
    """A site-packages whose scheduler.py no longer matches its RECORD is not 'upstream'."""
    version = version_of(pinned_tag)
    dist_info = tmp_path / f"vllm-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(upstream_pinned.data).digest()).rstrip(b"=").decode()
    (dist_info / "RECORD").write_text(f"{UPSTREAM_PATH},sha256={digest},{len(upstream_pinned.data)}\n")
    edited = tmp_path / UPSTREAM_PATH
    edited.parent.mkdir(parents=True)
    edited.write_bytes(upstream_pinned.data.replace(b"token_budget > 0", b"token_budget >= 0", 1))
    # Not monkeypatch.syspath_prepend: it imports pkg_resources, whose distutils hack breaks torch.
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    with pytest.raises(SourceUnavailable, match="does not match its RECORD hash"):
        installed.fetch(pinned_tag)
    edited.write_bytes(upstream_pinned.data)
    assert installed.fetch(pinned_tag).data == upstream_pinned.data


def test_installed_refuses_another_version(upstream_older: UpstreamFile) -> None:
    with pytest.raises(SourceUnavailable, match="installed vLLM is"):
        installed.fetch(upstream_older.tag)


@pytest.mark.network
def test_release_reads_one_member_and_matches_installed(pinned_tag: str, upstream_pinned: UpstreamFile) -> None:
    got, downloaded = release.fetch(pinned_tag)
    assert got.data == upstream_pinned.data
    assert downloaded < 2 * 1024 * 1024  # the wheel is ~270 MB; range reads fetch ~1 MB


def _wheel(version: str, member: bytes, record_of: bytes) -> bytes:
    digest = base64.urlsafe_b64encode(hashlib.sha256(record_of).digest()).rstrip(b"=").decode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(UPSTREAM_PATH, member)
        archive.writestr(f"vllm-{version}.dist-info/RECORD", f"{UPSTREAM_PATH},sha256={digest},\n")
    return buffer.getvalue()


@pytest.fixture
def local_index(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, bytes]]:
    """A PEP 691 index on loopback with range support, configured the way pip is (PIP_INDEX_URL)."""
    files: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            if self.path == "/simple/vllm/":
                import json

                body = json.dumps(
                    {
                        "files": [
                            {"filename": n, "url": f"/files/{n}", "hashes": {}, "size": len(d)}
                            for n, d in files.items()
                        ]
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            elif self.path.startswith("/files/") and self.path[7:] in files:
                data = files[self.path[7:]]
                spec = self.headers["Range"].split("=")[1]
                start_s, end_s = spec.split("-")
                start = len(data) - int(end_s) if not start_s else int(start_s)
                end = len(data) - 1 if not start_s or not end_s else int(end_s)
                body = data[start : end + 1]
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
            else:
                body = b""
                self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_address[1]}/simple")
    try:
        yield files
    finally:
        server.shutdown()
        server.server_close()


def test_release_verifies_the_member_against_the_wheel_record(
    local_index: dict[str, bytes], upstream_pinned: UpstreamFile, pinned_tag: str
) -> None:
    version = version_of(pinned_tag)
    name = f"vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
    local_index[name] = _wheel(version, upstream_pinned.data, upstream_pinned.data)
    assert release.fetch(pinned_tag)[0].data == upstream_pinned.data
    local_index[name] = _wheel(version, upstream_pinned.data + b"# tampered\n", upstream_pinned.data)
    with pytest.raises(SourceUnavailable, match="does not match the wheel's RECORD hash"):
        release.fetch(pinned_tag)


def test_release_without_a_wheel_of_that_version(local_index: dict[str, bytes], pinned_tag: str) -> None:
    with pytest.raises(SourceUnavailable, match=r"has no vLLM .* wheel"):
        release.fetch(pinned_tag)


def test_release_offline_is_source_unavailable(monkeypatch: pytest.MonkeyPatch, pinned_tag: str) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # discard port: refused
    with pytest.raises(SourceUnavailable, match="cannot read the package index"):
        release.fetch(pinned_tag)


def test_auto_uses_the_cache_and_never_a_corrupted_entry(
    monkeypatch: pytest.MonkeyPatch, upstream_older: UpstreamFile
) -> None:
    # The older tag is not installed, so auto falls back to the cache (filled here) then release.
    cache.store(upstream_older.tag, upstream_older.data)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # any network use would fail
    assert fetch_upstream(upstream_older.tag).origin == "cache"
    entry = cache.cache_root() / "upstream" / upstream_older.tag / "scheduler.py"
    entry.write_bytes(upstream_older.data + b"# corrupted\n")
    with pytest.raises(SourceUnavailable):
        fetch_upstream(upstream_older.tag)
    assert not entry.exists()


def test_every_source_gives_the_same_bytes(vllm_repo: Path, upstream_pinned: UpstreamFile, pinned_tag: str) -> None:
    outputs = {
        "git": pipeline.generate(fetch_upstream(pinned_tag, SourceKind.GIT, str(vllm_repo))),
        "installed": pipeline.generate(fetch_upstream(pinned_tag, SourceKind.INSTALLED)),
        "release": pipeline.generate(fetch_upstream(pinned_tag, SourceKind.RELEASE)),
    }
    assert len(set(outputs.values())) == 1
