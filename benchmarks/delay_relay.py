"""A userspace delay line between private network namespaces (``make bench-net``).

The kernel here has no ``netem`` (``tc qdisc ... netem``: "Specified qdisc kind is unknown") and
cannot load modules, so a network delay is made by hand: every rank's namespace is connected to the
rest only through its TUN device, and the relay holds the other end of each. Every IPv4 packet a
rank sends is read here, held for the current one-way delay, then written into the TUN device of
the namespace that owns the destination address. Packets leave in the order they came (one FIFO):
TCP sees a plain link with that latency.

Ranks talk to the relay over a Unix seqpacket socket bound to a path (path-bound sockets reach
across network namespaces): ``register <address>`` carrying the rank's TUN fd (SCM_RIGHTS), and
``delay <ms>`` from then on; the relay answers ``ok`` once the request holds.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import time
from collections import deque

from benchmarks.netns import precise_timers

MESSAGE = 256
_READS_PER_WAKEUP = 64  # per device, so that one busy rank cannot hold back the release of due packets


class DelayRelay:
    def __init__(self, control_path: str) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(control_path)
        self.listener.listen(1024)
        self.clients: dict[int, socket.socket] = {}  # by fd
        self.devices: list[int] = []
        self.routes: dict[bytes, int] = {}  # destination IPv4 address (4 bytes) -> that namespace's TUN fd
        self.delay_s = 0.0
        self.queue: deque[tuple[float, int, bytes]] = deque()  # (due, device, packet), in arrival order

    def serve_forever(self) -> None:
        precise_timers()
        while True:
            self._release(time.monotonic())
            timeout = max(0.0, self.queue[0][0] - time.monotonic()) if self.queue else None
            # select(), not epoll: epoll and poll round their timeout up to a whole millisecond.
            watched = [self.listener.fileno(), *self.clients, *self.devices]
            readable, _, _ = select.select(watched, [], [], timeout)
            now = time.monotonic()
            for fd in readable:
                if fd == self.listener.fileno():
                    client = self.listener.accept()[0]
                    self.clients[client.fileno()] = client
                elif fd in self.clients:
                    self._serve(self.clients[fd])
                else:
                    self._read(fd, now)

    def _release(self, now: float) -> None:
        while self.queue and self.queue[0][0] <= now:
            _, device, packet = self.queue.popleft()
            # OSError: the namespace is gone (its rank exited); the packet is lost, as on a real link.
            with contextlib.suppress(OSError):
                os.write(device, packet)

    def _read(self, device: int, now: float) -> None:
        due = now + self.delay_s
        for _ in range(_READS_PER_WAKEUP):
            try:
                packet = os.read(device, 65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.devices.remove(device)  # the rank's namespace went away
                return
            if len(packet) >= 20 and packet[0] >> 4 == 4:  # IPv4; IPv6 router solicitations are dropped
                target = self.routes.get(packet[16:20])
                if target is not None:
                    self.queue.append((due, target, packet))

    def _serve(self, client: socket.socket) -> None:
        message, fds, _, _ = socket.recv_fds(client, MESSAGE, 1)
        if not message:
            del self.clients[client.fileno()]
            client.close()
            return
        verb, _, arg = message.decode().partition(" ")
        if verb == "register" and len(fds) == 1:
            self.routes[socket.inet_aton(arg)] = fds[0]
            self.devices.append(fds[0])
        elif verb == "delay" and not fds:
            self.delay_s = float(arg) / 1000.0
        else:
            client.send(f"error: cannot read {message!r}".encode())
            return
        client.send(b"ok")


class RelayClient:
    """A rank's connection to the relay."""

    def __init__(self, control_path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.connect(control_path)

    def register(self, address: str, device: int) -> None:
        socket.send_fds(self.sock, [f"register {address}".encode()], [device])
        self._answer()

    def set_delay(self, delay_ms: float) -> None:
        self.sock.send(f"delay {delay_ms!r}".encode())
        self._answer()

    def _answer(self) -> None:
        answer = self.sock.recv(MESSAGE)
        if answer != b"ok":
            raise RuntimeError(f"delay relay: {answer.decode() or 'closed the connection'}")


def wait_for_socket(path: str, timeout_s: float) -> None:
    """Until the relay listens on ``path`` (it binds right after it starts)."""
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the delay relay did not open {path} within {timeout_s:g} s")
        time.sleep(0.01)
