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
"""

from __future__ import annotations

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


def group_max(value: int, group: dist.ProcessGroup) -> int:
    """The largest ``value`` over ``group`` (the live group: its size is read on every call)."""
    size = group.size()
    if size == 1:
        return value
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
