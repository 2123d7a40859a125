"""A PEP 691 package index on loopback, serving wheels built here: what tests read releases from."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager

from generator.sources.base import UPSTREAM_PATH
from generator.tags import version_of


def wheel_bytes(version: str, member: bytes, record_of: bytes) -> bytes:
    """A vLLM wheel holding only ``member`` as scheduler.py, its RECORD hashing ``record_of``."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(record_of).digest()).rstrip(b"=").decode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(UPSTREAM_PATH, member)
        archive.writestr(f"vllm-{version}.dist-info/RECORD", f"{UPSTREAM_PATH},sha256={digest},\n")
    return buffer.getvalue()


def wheel_of(version: str, members: dict[str, bytes], record: dict[str, bytes] | None = None) -> bytes:
    """A vLLM wheel holding ``members``; its RECORD hashes ``record`` (default: the members themselves)."""
    rows = ""
    for name, data in (record or members).items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows += f"{name},sha256={digest},{len(data)}\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr(f"vllm-{version}.dist-info/RECORD", rows)
    return buffer.getvalue()


def wheel_name(version: str) -> str:
    return f"vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"


def publish(index: dict[str, bytes], tag: str, data: bytes) -> None:
    """Put release ``tag`` on a served index: a wheel holding ``data`` as scheduler.py, RECORD matching."""
    version = version_of(tag)
    index[wheel_name(version)] = wheel_bytes(version, data, data)


@contextmanager
def serve(files: dict[str, bytes]) -> Iterator[str]:
    """Serve ``files`` (read at each request, so a test may change them) with range support; yields the index URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            if self.path == "/simple/vllm/":
                listing = [
                    {"filename": n, "url": f"/files/{n}", "hashes": {}, "size": len(d)} for n, d in files.items()
                ]
                body = json.dumps({"files": listing}).encode()
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
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()
