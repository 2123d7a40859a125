"""The maximum of one integer over a process group, in log-depth network rounds.

Balance scheduling needs one number per engine step: the leader's count, the largest of every DP
rank's own count. On a multi-node DP group every sequential message is a network delay, and
gloo's collectives are linear in the group size for this: ``all_gather`` waits about 2(N-1) one-way
delays (and its CPU cost grows about as N^2), ``all_reduce(MAX)`` about N. This is a dissemination
exchange over point-to-point messages instead: in round k each rank sends what it knows so far to
rank + 2^k and takes the maximum with what rank - 2^k sends it. After ceil(log2 N) rounds every rank
has seen every other rank's value (the ranges overlap for non-powers of two, which a maximum does
not mind), so the group size needs no special case.

Every rank runs the same exchanges in the same order, so the result is exact and identical on all
ranks. Every receive is posted before the first send: gloo's TCP transport sends a message only
once the receiver has announced the matching receive, so only round 0 pays that announcement's
delay and the later rounds find theirs already arrived: ceil(log2 N) + 1 one-way delays in all.
A rank that never takes part makes the others fail after the group's own timeout (gloo's wait on a
receive uses it), never hang.

Two transports carry the same exchange. gloo's point-to-point messages (``group_max(value, group)``)
cost about 100-200 us of CPU per round: a c10d work object per send and per receive, the receive
completed on gloo's own I/O thread and handed to the caller through a condition variable, so every
round waits for two thread wake-ups, which on cores busy with vLLM's spin-waiting workers took
milliseconds (``make bench-serve``, docs/benchmarks.md). ``group_max(value, group, host=H)`` runs the
exchange over TCP connections of its own, one per round and direction, set up once per group: per
round one ``send`` and one blocking ``recv`` in the calling thread, no other thread involved (about
10 us of CPU per round here). Each message carries the call's sequence number, so a rank that skipped
a call is an error, not a wrong maximum.
"""

from __future__ import annotations

import datetime
import socket
import struct

import torch
import torch.distributed as dist

# gloo matches point-to-point messages by (peer, tag): a tag of our own keeps these apart from any
# other send/recv on the same group. Round k uses _TAG + k.
_TAG = 0x6261_0000


def rounds(size: int) -> int:
    """Exchange rounds for a group of ``size`` ranks: ceil(log2 size)."""
    if size < 1:
        raise ValueError(f"a group has at least one rank, got {size}")
    return (size - 1).bit_length()


def network_delays(size: int) -> int:
    """Sequential one-way network delays one call waits: the rounds, plus round 0's announcement."""
    n = rounds(size)
    return n + 1 if n else 0


# One inbox and one outbox tensor per round, kept per group size: allocating them on every call cost
# about a quarter of a call's CPU at DP 2. Reuse is safe because a call returns only after every one of
# its sends and receives completed; elastic DP's other sizes get their own.
_buffers: dict[int, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}


def _round_buffers(size: int, n: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    if size not in _buffers:
        _buffers[size] = (
            [torch.zeros(1, dtype=torch.int64) for _ in range(n)],
            [torch.zeros(1, dtype=torch.int64) for _ in range(n)],
        )
    return _buffers[size]


def group_max(value: int, group: dist.ProcessGroup, host: str | None = None) -> int:
    """The largest ``value`` over ``group`` (the live group: its size is read on every call).

    ``host``: this rank's address for the exchange's own TCP connections (see the module's text);
    None: over gloo's point-to-point messages.
    """
    size = group.size()
    if size == 1:
        return value
    if host is not None:
        return socket_exchange(group, host)(value)
    rank = group.rank()
    n = rounds(size)
    inbox, outbox = _round_buffers(size, n)
    # All receives first: each announces itself to its sender now, not when the round starts.
    receives = [group.recv([inbox[k]], (rank - (1 << k)) % size, _TAG + k) for k in range(n)]
    best = value
    sends = []
    for k in range(n):
        outbox[k].fill_(best)
        sends.append(group.send([outbox[k]], (rank + (1 << k)) % size, _TAG + k))
        receives[k].wait()
        best = max(best, int(inbox[k][0]))
    for send in sends:
        send.wait()
    return best


# -- the exchange over TCP connections of its own ---------------------------------------------------

_WIRE = struct.Struct("<qq")  # (call sequence number, value)
_ADDRESS_BYTES = 128  # "host port" in UTF-8, padded: the set-up exchange's fixed-size message
_SETUP_TAG = _TAG + 64


def _timeout_s(group: dist.ProcessGroup) -> float:
    """The group's own timeout (what gloo's waits use), so a rank that never takes part fails alike."""
    try:
        timeout = group._get_backend(torch.device("cpu")).options._timeout
        if isinstance(timeout, datetime.timedelta) and timeout.total_seconds() > 0:
            return timeout.total_seconds()
    except (AttributeError, RuntimeError):
        pass
    return 1800.0  # gloo's default


class SocketExchange:
    """The dissemination exchange of one group over TCP: connection k goes to rank + 2^k.

    Set up by the group's first call on every rank alike: each rank listens on ``host``, tells the
    rank that will connect to it (rank - 2^k) its address over the group's own point-to-point
    messages (the same dissemination pattern, backwards), connects to rank + 2^k for each round and
    accepts the connections of rank - 2^k. Connecting never waits for the peer's ``accept`` (the
    listen backlog takes it), so no rank waits on another's order.
    """

    def __init__(self, group: dist.ProcessGroup, host: str) -> None:
        self.group = group
        self.size = group.size()
        self.rank = group.rank()
        self.n = rounds(self.size)
        self.timeout = _timeout_s(group)
        self.seq = 0
        self.buf = bytearray(_WIRE.size)
        self.view = memoryview(self.buf)
        listener = socket.create_server((host, 0), backlog=max(16, 2 * self.n))
        listener.settimeout(self.timeout)
        try:
            bound_host, port = listener.getsockname()[:2]
            peers = self._exchange_addresses(f"{bound_host} {port}")
            self.out = [self._connect(peers[k], k) for k in range(self.n)]
            self.inp: list[socket.socket] = [None] * self.n  # type: ignore[list-item]
            for _ in range(self.n):
                conn, _ = listener.accept()
                self._tune(conn)
                got = self._read(conn)
                rank, k = divmod(got[1], 1 << 16)
                if got[0] != -1 or not 0 <= k < self.n or rank != (self.rank - (1 << k)) % self.size:
                    raise RuntimeError(f"group_max: unexpected connection {got} on rank {self.rank}")
                self.inp[k] = conn
        finally:
            listener.close()

    def _tune(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.settimeout(self.timeout)

    def _exchange_addresses(self, mine: str) -> list[tuple[str, int]]:
        """The address of rank + 2^k for every round k (each rank sends its own to rank - 2^k)."""
        raw = mine.encode()
        if len(raw) > _ADDRESS_BYTES:
            raise ValueError(f"group_max: address {mine!r} longer than {_ADDRESS_BYTES} bytes")
        outbox = torch.zeros(_ADDRESS_BYTES, dtype=torch.uint8)
        outbox[: len(raw)] = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        inbox = [torch.zeros(_ADDRESS_BYTES, dtype=torch.uint8) for _ in range(self.n)]
        size, rank = self.size, self.rank
        receives = [self.group.recv([inbox[k]], (rank + (1 << k)) % size, _SETUP_TAG + k) for k in range(self.n)]
        sends = [self.group.send([outbox], (rank - (1 << k)) % size, _SETUP_TAG + k) for k in range(self.n)]
        for work in receives + sends:
            work.wait()
        peers = []
        for box in inbox:
            host, port = bytes(box.tolist()).rstrip(b"\0").decode().rsplit(" ", 1)
            peers.append((host, int(port)))
        return peers

    def _connect(self, address: tuple[str, int], k: int) -> socket.socket:
        conn = socket.create_connection(address, timeout=self.timeout)
        self._tune(conn)
        conn.sendall(_WIRE.pack(-1, (self.rank << 16) + k))
        return conn

    def _read(self, conn: socket.socket) -> tuple[int, int]:
        got = 0
        while got < _WIRE.size:
            try:
                n = conn.recv_into(self.view[got:], _WIRE.size - got)
            except TimeoutError:
                raise RuntimeError(
                    f"group_max: rank {self.rank} of {self.size} waited {self.timeout:g} s for a peer that never "
                    "took part in the exchange (the group's timeout)"
                ) from None
            if n == 0:
                raise RuntimeError(f"group_max: a peer of rank {self.rank} closed its connection")
            got += n
        seq, value = _WIRE.unpack(self.buf)
        return seq, value

    def __call__(self, value: int) -> int:
        seq = self.seq
        self.seq += 1
        best = value
        for k in range(self.n):
            self.out[k].sendall(_WIRE.pack(seq, best))
            got_seq, got = self._read(self.inp[k])
            if got_seq != seq:
                raise RuntimeError(
                    f"group_max: rank {self.rank} is at call {seq}, its peer at call {got_seq}: the ranks no longer "
                    "run the same exchanges in the same order"
                )
            best = max(best, got)
        return best

    def close(self) -> None:
        for conn in [*self.out, *self.inp]:
            conn.close()


# One exchange per group object (elastic DP replaces the group: the new one gets its own).
_exchanges: dict[int, SocketExchange] = {}


def socket_exchange(group: dist.ProcessGroup, host: str) -> SocketExchange:
    found = _exchanges.get(id(group))
    if found is None or found.group is not group or found.size != group.size():
        if found is not None:
            found.close()
        found = _exchanges[id(group)] = SocketExchange(group, host)
    return found
