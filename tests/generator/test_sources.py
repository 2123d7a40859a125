"""Every source on real upstream bytes: git (a real repository built here), installed, release."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import re
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import git
import pytest
from click.testing import CliRunner, Result

from balance_dev.package_index import wheel_bytes, wheel_name, wheel_of
from balance_dev.upstream_repo import build_vllm_repo
from generator import cli
from generator.builder import pipeline
from generator.errors import SourceUnavailable
from generator.sources import cache, installed, package, release
from generator.sources import git as git_source
from generator.sources.base import UPSTREAM_PATH, UpstreamFile
from generator.sources.resolve import SourceKind, fetch_upstream
from generator.tags import version_of


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


def test_release_verifies_the_member_against_the_wheel_record(
    local_index: dict[str, bytes], upstream_pinned: UpstreamFile, pinned_tag: str
) -> None:
    version = version_of(pinned_tag)
    name = f"vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
    local_index[name] = wheel_bytes(version, upstream_pinned.data, upstream_pinned.data)
    assert release.fetch(pinned_tag)[0].data == upstream_pinned.data
    local_index[name] = wheel_bytes(version, upstream_pinned.data + b"# tampered\n", upstream_pinned.data)
    with pytest.raises(SourceUnavailable, match="does not match the wheel's RECORD hash"):
        release.fetch(pinned_tag)


def test_the_whole_package_is_read_checked_and_cached_once(
    local_index: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    members = {f"vllm/m{i}.py": f"x = {i}\n".encode() for i in range(40)} | {"vllm/data.txt": b"not python\n"}
    local_index[wheel_name("9.0.0")] = wheel_of("9.0.0", members)
    got = package.release("v9.0.0")
    assert got.origin == "release" and got.paths == frozenset(m for m in members if m.endswith(".py"))
    assert all(got.text(m) == members[m].decode() for m in got.paths)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # from the cache alone now
    cached = package.release("v9.0.0")
    assert cached.origin == "cache" and {m: cached.text(m) for m in cached.paths} == {m: got.text(m) for m in got.paths}


def test_the_whole_package_refuses_a_member_its_record_does_not_hash(local_index: dict[str, bytes]) -> None:
    members = {"vllm/a.py": b"x = 2\n", "vllm/b.py": b"y = 1\n"}
    local_index[wheel_name("9.0.0")] = wheel_of("9.0.0", members, record={**members, "vllm/a.py": b"x = 1\n"})
    with pytest.raises(SourceUnavailable, match=r"vllm/a\.py in vllm-9\.0\.0-.* does not match the wheel's RECORD"):
        package.release("v9.0.0")
    assert cache.load_package("v9.0.0") is None  # nothing kept of a wheel that failed its check


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


# --- hardening (issue 9): broken clones, corrupt wheels, deadlines, unwritable and altered caches ------


def _clone_path(url: str) -> Path:
    return cache.cache_root() / "git" / hashlib.sha256(url.encode()).hexdigest()[:16]


@pytest.mark.parametrize("state", ["init-only", "garbage", "other-remote"])
def test_git_a_broken_cached_clone_is_replaced(vllm_repo: Path, upstream_pinned: UpstreamFile, state: str) -> None:
    url = vllm_repo.as_uri()
    path = _clone_path(url)
    path.parent.mkdir(parents=True)
    if state == "init-only":  # what a kill between `git init` and adding the remote used to leave
        git.Repo.init(path, bare=True)
    elif state == "garbage":
        path.mkdir()
        (path / "HEAD").write_text("not a ref\n")
    else:
        git.Repo.init(path, bare=True).create_remote("origin", "https://example.invalid/other.git")
    assert git_source.fetch(upstream_pinned.tag, url).data == upstream_pinned.data
    assert git.Repo(path).git.config("remote.origin.url") == url
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp folder left behind


def test_git_a_new_clone_appears_only_complete(vllm_repo: Path, upstream_pinned: UpstreamFile) -> None:
    """The clone is built in a temp folder: the final path never holds a repository without its remote."""
    url = vllm_repo.as_uri()
    seen: list[str] = []
    path = _clone_path(url)

    def watch(event: str, args: tuple[object, ...]) -> None:
        if event == "os.rename" and str(args[1]) == str(path):
            seen.append(git.Repo(args[0]).git.config("remote.origin.url"))  # type: ignore[arg-type]

    # Audit hooks cannot be removed: this one only looks at renames onto this test's clone path.
    sys.addaudithook(watch)
    assert git_source.fetch(upstream_pinned.tag, url).data == upstream_pinned.data
    assert seen == [url]


def _corrupt_deflate(wheel: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
        offset = archive.getinfo(UPSTREAM_PATH).header_offset
    # The member's data starts after its 30-byte local header, file name and extra field.
    name_len = int.from_bytes(wheel[offset + 26 : offset + 28], "little")
    extra_len = int.from_bytes(wheel[offset + 28 : offset + 30], "little")
    start = offset + 30 + name_len + extra_len
    # 0xff opens a deflate block of the reserved type 3: zlib refuses it outright.
    return wheel[:start] + b"\xff" * 16 + wheel[start + 16 :]


def test_release_a_corrupt_deflate_stream_is_source_unavailable(
    local_index: dict[str, bytes], upstream_pinned: UpstreamFile, pinned_tag: str
) -> None:
    version = version_of(pinned_tag)
    name = f"vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
    local_index[name] = _corrupt_deflate(wheel_bytes(version, upstream_pinned.data, upstream_pinned.data))
    with pytest.raises(SourceUnavailable, match=r"is not a readable wheel \(error: "):
        release.fetch(pinned_tag)


@pytest.fixture
def trickling_index(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, upstream_pinned: UpstreamFile, pinned_tag: str
) -> Iterator[None]:
    """A loopback index that sends one byte every 0.2 s and never finishes, so no single read times out.

    ``request.param`` says which request trickles: the project listing or the wheel's range reads.
    """
    version = version_of(pinned_tag)
    name = f"vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
    wheel = wheel_bytes(version, upstream_pinned.data, upstream_pinned.data)
    stop = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def _trickle(self, status: int, header: tuple[str, str]) -> None:
            self.send_response(status)
            self.send_header(*header)
            self.send_header("Content-Length", str(len(wheel)))
            self.end_headers()
            try:
                while not stop.wait(0.2):
                    self.wfile.write(b" ")
                    self.wfile.flush()
            except OSError:  # the client gave up, as it should
                return

        def do_GET(self) -> None:
            if self.path != "/simple/vllm/":
                self._trickle(206, ("Content-Range", f"bytes 0-{len(wheel) - 1}/{len(wheel)}"))
            elif request.param == "listing":
                self._trickle(200, ("Content-Type", "application/vnd.pypi.simple.v1+json"))
            else:
                body = json.dumps({"files": [{"filename": name, "url": f"/files/{name}", "size": len(wheel)}]})
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_address[1]}/simple")
    monkeypatch.setenv("BALANCE_PATCHGEN_FETCH_TIMEOUT", "2")
    try:
        yield
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


def _cli(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli.main, ["--root", str(root), *args], catch_exceptions=False)


@pytest.mark.timeout(60)  # before the fix every byte restarted the socket timeout: this ran for hours
@pytest.mark.parametrize("trickling_index", ["listing", "range"], indirect=True)
@pytest.mark.usefixtures("trickling_index")
def test_release_one_total_deadline_for_a_trickling_index(project: Path) -> None:
    started = time.monotonic()
    result = _cli(project, "check", "--source", "release")
    elapsed = time.monotonic() - started
    assert result.exit_code == 3, result.output
    assert "did not finish within 2 s (BALANCE_PATCHGEN_FETCH_TIMEOUT)" in result.stderr
    assert elapsed < 10


@pytest.mark.parametrize("value", ["0", "-5", "soon", "nan", "inf"])
def test_a_bad_fetch_timeout_is_a_usage_error(project: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("BALANCE_PATCHGEN_FETCH_TIMEOUT", value)
    result = _cli(project, "check", "--source", "release")
    assert result.exit_code == 2
    assert "BALANCE_PATCHGEN_FETCH_TIMEOUT" in result.stderr and "positive number of seconds" in result.stderr


def test_a_download_is_kept_when_the_cache_cannot_be_written(
    local_index: dict[str, bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    upstream_pinned: UpstreamFile,
    pinned_tag: str,
) -> None:
    version = version_of(pinned_tag)
    local_index[f"vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"] = wheel_bytes(
        version, upstream_pinned.data, upstream_pinned.data
    )
    blocker = tmp_path / "cache-is-a-file"
    blocker.write_text("not a folder\n")  # mkdir below it fails even for root
    monkeypatch.setenv("BALANCE_PATCHGEN_CACHE", str(blocker))
    messages: list[str] = []
    got = fetch_upstream(pinned_tag, SourceKind.RELEASE, progress=messages.append)
    assert got.data == upstream_pinned.data
    assert any(m.startswith("warning: cannot write the cache in") for m in messages), messages


def _fake_vllm(root: Path, version: str, file: bytes | None, record_of: bytes) -> Path:
    """A real installed distribution named vllm (dist-info + RECORD) under ``root``, for sys.path."""
    dist_info = root / f"vllm-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(record_of).digest()).rstrip(b"=").decode()
    (dist_info / "RECORD").write_text(f"{UPSTREAM_PATH},sha256={digest},{len(record_of)}\n")
    if file is not None:
        (root / UPSTREAM_PATH).parent.mkdir(parents=True)
        (root / UPSTREAM_PATH).write_bytes(file)
    return root


def test_installed_without_its_scheduler_file_is_exit_3(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, upstream_pinned: UpstreamFile, pinned_tag: str
) -> None:
    site = _fake_vllm(tmp_path / "site", version_of(pinned_tag), None, upstream_pinned.data)
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    result = _cli(project, "check", "--source", "installed")
    assert result.exit_code == 3, result.output
    assert "lists vllm/v1/core/sched/scheduler.py in its RECORD but" in result.stderr


@pytest.mark.parametrize(
    "row",
    [
        f"{UPSTREAM_PATH},,",  # listed without a hash
        f"{UPSTREAM_PATH},md5=abc,1",  # not a sha256
        f"{UPSTREAM_PATH}",  # a bare path
        f"x/{UPSTREAM_PATH},sha256=DIGEST,1",  # another file whose path ends the same
    ],
)
def test_installed_needs_the_files_own_sha256_row_in_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, upstream_pinned: UpstreamFile, pinned_tag: str, row: str
) -> None:
    site = _fake_vllm(tmp_path / "site", version_of(pinned_tag), upstream_pinned.data, upstream_pinned.data)
    record = next(site.glob("vllm-*.dist-info")) / "RECORD"
    digest = record.read_text().split(",")[1]
    record.write_text(row.replace("sha256=DIGEST", digest) + "\n")
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    with pytest.raises(SourceUnavailable, match=f"has no sha256 for {re.escape(UPSTREAM_PATH)} in its RECORD"):
        installed.fetch(pinned_tag)
    record.write_text(f'"{UPSTREAM_PATH}",{digest},1\n')  # quoted, as csv may write it: still found
    assert installed.fetch(pinned_tag).data == upstream_pinned.data


def test_installed_edited_together_with_its_record_is_refused_by_the_committed_header(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, upstream_pinned: UpstreamFile, pinned_tag: str
) -> None:
    edited = upstream_pinned.data.replace(b"token_budget > 0", b"token_budget >= 0", 1)
    site = _fake_vllm(tmp_path / "site", version_of(pinned_tag), edited, edited)
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    (project / "generated/balance_scheduler.py").write_text(pipeline.generate(upstream_pinned), encoding="utf-8")
    before = (project / "generated/balance_scheduler.py").read_bytes()
    for command in ("regen", "check", "verify"):
        result = _cli(project, command)
        assert result.exit_code == 3, (command, result.output)
        assert "though it matches its RECORD: reinstall" in result.stderr
    assert (project / "generated/balance_scheduler.py").read_bytes() == before


def test_a_cache_entry_replaced_with_its_sidecar_is_refused_until_refresh(
    project: Path, upstream_older: UpstreamFile
) -> None:
    # The older tag is not installed, so auto reads the cache.
    (project / "generated/balance_scheduler.py").write_text(pipeline.generate(upstream_older), encoding="utf-8")
    (project / ".github/vllm-release-tag.commit").write_text(f"{upstream_older.tag}\n")
    before = (project / "generated/balance_scheduler.py").read_bytes()
    altered = upstream_older.data.replace(b"token_budget > 0", b"token_budget >= 0", 1)
    cache.store(upstream_older.tag, altered)  # entry and sidecar agree: only the header can tell
    for command in ("regen", "check", "verify"):
        result = _cli(project, command)
        assert result.exit_code == 3, (command, result.output)
        assert "run again with --refresh" in result.stderr
    assert (project / "generated/balance_scheduler.py").read_bytes() == before
    result = _cli(project, "regen", "--refresh")  # fetches the release again, verified against RECORD
    assert result.exit_code == 0, result.output
    assert (project / "generated/balance_scheduler.py").read_bytes() == before
    assert cache.load(upstream_older.tag) == upstream_older.data


@pytest.fixture
def whole_file_index(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, tuple[bytes, str | None]]]:
    """A loopback index whose file host ignores Range and sends whole files; it publishes the
    sha256 given beside each file (None: no hash)."""
    files: dict[str, tuple[bytes, str | None]] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            if self.path == "/simple/vllm/":
                listing = [
                    {"filename": n, "url": f"/files/{n}", "size": len(d), "hashes": {"sha256": h} if h else {}}
                    for n, (d, h) in files.items()
                ]
                body = json.dumps({"files": listing}).encode()
            else:
                body = files[self.path.removeprefix("/files/")][0]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_address[1]}/simple")
    try:
        yield files
    finally:
        server.shutdown()
        server.server_close()


def test_release_a_whole_file_is_checked_against_the_index_hash(
    whole_file_index: dict[str, tuple[bytes, str | None]], upstream_pinned: UpstreamFile, pinned_tag: str
) -> None:
    version = version_of(pinned_tag)
    name = f"vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
    wheel = wheel_bytes(version, upstream_pinned.data, upstream_pinned.data)
    whole_file_index[name] = (wheel, hashlib.sha256(wheel).hexdigest())
    assert release.fetch(pinned_tag)[0].data == upstream_pinned.data
    # RECORD and CRC agree with the altered member; only the index's hash of the whole file does not.
    altered = upstream_pinned.data.replace(b"token_budget > 0", b"token_budget >= 0", 1)
    whole_file_index[name] = (wheel_bytes(version, altered, altered), hashlib.sha256(wheel).hexdigest())
    with pytest.raises(SourceUnavailable, match="does not match the sha256 the package index publishes"):
        release.fetch(pinned_tag)
    whole_file_index[name] = (wheel, None)
    with pytest.raises(SourceUnavailable, match="publishes no sha256"):
        release.fetch(pinned_tag)


@pytest.mark.parametrize(
    "listing", [b'{"files": [{"url": "/x"}]}', b'{"files": 5}', b'{"files": [5]}', b"[1, 2]", b"not json"]
)
def test_release_a_listing_that_is_not_pep_691_is_source_unavailable(
    monkeypatch: pytest.MonkeyPatch, pinned_tag: str, listing: bytes
) -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(listing)))
            self.end_headers()
            self.wfile.write(listing)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_address[1]}/simple")
    try:
        with pytest.raises(SourceUnavailable, match="package index"):
            release.fetch(pinned_tag)
    finally:
        server.shutdown()
        server.server_close()


def test_a_cache_sidecar_that_is_not_text_is_a_corrupt_entry(
    monkeypatch: pytest.MonkeyPatch, upstream_older: UpstreamFile
) -> None:
    cache.store(upstream_older.tag, upstream_older.data)
    entry = cache.cache_root() / "upstream" / upstream_older.tag / "scheduler.py"
    entry.with_suffix(".py.sha256").write_bytes(b"\xff\xfe\n")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # the refetch fails: exit 3, no crash
    with pytest.raises(SourceUnavailable, match="cannot read the package index"):
        fetch_upstream(upstream_older.tag)
    assert not entry.exists()
