"""Process trees of the e2e: each in its own session, stopped like an operator would, none left behind.

Also the loopback check: every TCP/UDP socket a session's processes hold must be bound to and
connected with 127.0.0.1 (or ::1); read from ``/proc`` (what ``ss -tunap`` shows, no tool needed).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO


class Failed(Exception):
    """One e2e failure: ``run.py`` prints it as ``make e2e: FAILED: <message>``."""

    def __init__(self, message: str, log: str | None = None) -> None:
        super().__init__(message)
        self.log = log


def _stat(pid: str) -> tuple[str, str, int] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()
    return name, fields[0], int(fields[3])


def session_pids(sid: int) -> dict[int, str]:
    """Live processes (not zombies) of session ``sid``: pid -> name."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(entry)) is not None:
            name, state, session = st
            if session == sid and state != "Z":
                found[int(entry)] = name
    return found


@dataclass
class Tree:
    """One command (``vllm serve ...``) and everything it starts, in a session of its own."""

    name: str
    cmd: list[str]
    log_path: str
    env: dict[str, str]
    cwd: str
    proc: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        # Open for the whole life of the tree (the children write to it), closed in stop()/kill().
        self._log = open(self.log_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            self.cmd,
            env=self.env,
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def sid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def exited(self) -> int | None:
        assert self.proc is not None
        return self.proc.poll()

    def log_text(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def terminate(self) -> None:
        """SIGTERM to the leader only, as an operator stopping the service would: vLLM must take its
        own children down."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait_gone(self, deadline: float) -> None:
        """Wait for the whole session to be gone; leftovers are killed and fail the run."""
        assert self.proc is not None
        while time.monotonic() < deadline:
            self.proc.poll()
            if not session_pids(self.sid):
                break
            time.sleep(0.2)
        left = session_pids(self.sid)
        if left:
            self.kill()
            raise Failed(
                f"{self.name}: processes outlived SIGTERM: "
                + ", ".join(f"{pid} {name}" for pid, name in sorted(left.items())),
                self.log_path,
            )
        self.proc.wait()
        self.close()

    def kill(self) -> None:
        """Last resort (a failed run): SIGKILL the whole session, reap the leader."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.sid, signal.SIGKILL)
        for pid in session_pids(self.sid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()
        self.close()

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


# SIGTERM to every session of a deployment being empty: every e2e script and the serving benchmark wait this long.
STOP_TIMEOUT_S = 90.0


def stop(trees: list[Tree], timeout: float) -> float:
    """Stop all trees at once (a deployment goes down together; one by one, the survivors log the
    loss of their DP peers first). Returns the seconds until every session was gone."""
    t0 = time.monotonic()
    for tree in trees:
        tree.terminate()
    for tree in trees:
        tree.wait_gone(t0 + timeout)
    return time.monotonic() - t0


def check_alive(trees: list[Tree], when: str) -> None:
    """Fail at once, naming the tree, if any tree's leader has exited."""
    for tree in trees:
        if (rc := tree.exited()) is not None:
            raise Failed(f"{tree.name}: exited {rc} {when}", tree.log_path)


def _poll(ready: Callable[[], bool], trees: list[Tree], deadline: float, late: str, log: str, pause: float) -> None:
    """Until ``ready()``; fail if a tree's leader exits first, or with ``late`` after ``deadline``."""
    while not ready():
        check_alive(trees, "during start-up")
        if time.monotonic() > deadline:
            raise Failed(late, log)
        time.sleep(pause)


def wait_healthy(url: str, trees: list[Tree], deadline: float) -> None:
    """Poll ``url`` (a server's /health) until 200; fail at once if any tree's leader exits."""

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    _poll(healthy, trees, deadline, f"{url} not healthy before the start-up timeout", trees[0].log_path, 1.0)


# vLLM titles each of several API server processes "VLLM::APIServer_N" (its comm keeps the first 15
# characters); a single API server runs in the `vllm serve` process itself. uvicorn logs this line
# once per server when it starts accepting.
API_SERVER_COMM = "VLLM::APIServer"
STARTUP_COMPLETE = "Application startup complete."


def wait_api_servers(tree: Tree, trees: list[Tree], deadline: float) -> int:
    """Until every API server of ``tree`` has finished start-up; returns how many there are.

    /health answers as soon as one server is up, but a request the kernel hands to another one still
    starting waits for it: on 2 cores that was 2-3 s once (vLLM 0.32, Ray), long enough for the freeze
    scenario's short requests to reach their rank only after the long ones were done. All API server
    processes exist before any can answer (they start together, before the engines' handshake).
    """
    servers = max(1, sum(1 for name in session_pids(tree.sid).values() if name.startswith(API_SERVER_COMM)))
    _poll(
        lambda: tree.log_text().count(STARTUP_COMPLETE) >= servers,
        trees,
        deadline,
        f"{tree.name}: {servers} API servers, not all started before the start-up timeout",
        tree.log_path,
        0.5,
    )
    return servers


def wait_logged(tree: Tree, needle: str, deadline: float) -> None:
    """Until ``needle`` is in the tree's output (a daemon saying it is up); fail if its leader exits."""
    _poll(
        lambda: needle in tree.log_text(),
        [tree],
        deadline,
        f"{tree.name}: no {needle!r} before the start-up timeout",
        tree.log_path,
        0.5,
    )


def processes_with_env(name: str, value: str) -> list[str]:
    """Live processes whose environment has ``name=value``: what a run started, even if it left its session
    (Ray renames its workers, so their command lines do not say whose they are; the environment does)."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            st = _stat(entry)
        except OSError:
            continue
        if st is not None and st[1] != "Z":
            found.append(f"{entry} {st[0]}")
    return found


def free_ports(n: int) -> list[int]:
    """Ports the OS hands out on 127.0.0.1, all distinct, released just before vLLM binds them."""
    import socket

    socks, ports = [], []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


IP = ipaddress.IPv4Address | ipaddress.IPv6Address


def _addr(hex_addr: str) -> tuple[IP, int]:
    host, port = hex_addr.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        return ipaddress.IPv4Address(raw[::-1]), int(port, 16)
    # /proc/net/tcp6: four 32-bit words, each in host (little-endian) order
    return ipaddress.IPv6Address(b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))), int(port, 16)


def _loopback(ip: IP) -> bool:
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1 on a dual-stack socket
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


Socket = tuple[
    str, "ipaddress.IPv4Address | ipaddress.IPv6Address", int, "ipaddress.IPv4Address | ipaddress.IPv6Address", int
]


def _inet_sockets() -> dict[int, Socket]:
    """inode -> (proto, local ip, local port, remote ip, remote port) for every inet socket."""
    out = {}
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        try:
            with open(f"/proc/net/{proto}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            (lip, lport), (rip, rport) = _addr(cols[1]), _addr(cols[2])
            out[int(cols[9])] = (proto, lip, lport, rip, rport)
    return out


@dataclass
class SocketReport:
    seen: int = 0
    off_loopback: list[str] = field(default_factory=list)  # a connection or a bind outside loopback
    wildcard_listeners: list[str] = field(default_factory=list)  # listening on every interface


def socket_report(trees: list[Tree]) -> SocketReport:
    """Every inet socket the processes of ``trees`` hold (what ``ss -tunap`` would list for them).

    A connected socket must have both ends on loopback. A listening socket must be bound to loopback;
    one bound to the wildcard address is reported apart: torch.distributed's TCPStore server binds
    every interface whatever host it is given (vLLM's DP group and its workers' process group use
    one), and only the connections made to it say who is contacted.
    """
    inet = _inet_sockets()
    report = SocketReport()
    for tree in trees:
        for pid, name in session_pids(tree.sid).items():
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if not target.startswith("socket:["):
                    continue
                sock = inet.get(int(target[len("socket:[") : -1]))
                if sock is None:
                    continue  # a unix socket (ZMQ ipc): not on the network
                report.seen += 1
                proto, lip, lport, rip, rport = sock
                where = f"{tree.name} pid {pid} ({name}) {proto} {lip}:{lport} -> {rip}:{rport}"
                if rport == 0 and rip.is_unspecified:  # listening (tcp) or unconnected (udp)
                    if lip.is_unspecified:
                        report.wildcard_listeners.append(f"{name} {proto} port {lport}")
                    elif not _loopback(lip):
                        report.off_loopback.append(where)
                elif not (_loopback(lip) and _loopback(rip)):
                    report.off_loopback.append(where)
    report.off_loopback = sorted(set(report.off_loopback))
    report.wildcard_listeners = sorted(set(report.wildcard_listeners))
    return report
