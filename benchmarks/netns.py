"""Linux plumbing for ``make bench-net``: a private network namespace per process, a TUN device in it.

Root only. A rank leaves the host's network namespace for an anonymous one of its own
(``unshare(CLONE_NEWNET)``), which the kernel deletes when the last process in it exits: nothing is
named in ``ip netns``, so nothing can be left behind, whatever ends the run. Inside it the rank has
``lo`` and one TUN device holding a 10.77.x.y address that exists nowhere else; the delay relay
(``benchmarks.delay_relay``) holds the device's other end. Interfaces are configured by ioctl, as
``ip`` would, so the benchmark needs no iproute2.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import signal
import socket
import struct

CLONE_NEWNET = 0x4000_0000
PR_SET_PDEATHSIG = 1
PR_SET_TIMERSLACK = 29
TUNSETIFF = 0x4004_54CA
IFF_UP = 0x0001
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000  # packets without the 4-byte protocol header: a read is exactly one IP packet
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
SIOCSIFADDR = 0x8916
SIOCSIFNETMASK = 0x891C
IFREQ_SIZE = 40  # sizeof(struct ifreq) on Linux
NETWORK = "10.77.0.0"
PREFIX = 16

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _check(result: int, call: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{call}: {os.strerror(errno)}")


def rank_address(rank: int) -> str:
    """The address rank ``rank`` holds on its TUN device (10.77.0.1 for rank 0)."""
    host = rank + 1
    if host >= (1 << (32 - PREFIX)) - 1:
        raise ValueError(f"rank {rank} does not fit in {NETWORK}/{PREFIX}")
    return f"10.77.{host >> 8}.{host & 0xFF}"


def die_with_parent(parent: int) -> None:
    """SIGKILL this process as soon as ``parent`` (the process that forked it) exits, however it exits."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:  # it died before the signal was armed
        os._exit(1)


def precise_timers() -> None:
    """Wake up when asked: the default 50 us timer slack would stretch a 200 us delay by a quarter."""
    _check(_libc.prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0), "prctl(PR_SET_TIMERSLACK)")


def enter_private_network() -> None:
    """Move this process (call it before any thread starts) into a new, empty network namespace, ``lo`` up."""
    _check(_libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
    _set_up("lo")


def open_tun(name: str, address: str) -> int:
    """A TUN device ``name`` in this process's namespace, holding ``address``/16, up; its fd (non-blocking).

    The device lives as long as any copy of the fd is open (the relay receives one), and goes with
    the namespace.
    """
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    try:
        fcntl.ioctl(fd, TUNSETIFF, _ifreq(name, struct.pack("H", IFF_TUN | IFF_NO_PI)))
        netmask = socket.inet_ntoa(struct.pack("!I", (0xFFFF_FFFF << (32 - PREFIX)) & 0xFFFF_FFFF))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            fcntl.ioctl(s, SIOCSIFADDR, _ifreq(name, _sockaddr_in(address)))
            fcntl.ioctl(s, SIOCSIFNETMASK, _ifreq(name, _sockaddr_in(netmask)))
        _set_up(name)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _ifreq(name: str, payload: bytes) -> bytes:
    raw = name.encode()
    if len(raw) >= 16:
        raise ValueError(f"interface name too long: {name!r}")
    return struct.pack("16s", raw) + payload.ljust(IFREQ_SIZE - 16, b"\0")


def _sockaddr_in(address: str) -> bytes:
    return struct.pack("=H2s4s8s", socket.AF_INET, b"", socket.inet_aton(address), b"")


def _set_up(name: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        (flags,) = struct.unpack_from("H", fcntl.ioctl(s, SIOCGIFFLAGS, _ifreq(name, b"")), 16)
        fcntl.ioctl(s, SIOCSIFFLAGS, _ifreq(name, struct.pack("H", flags | IFF_UP)))
