"""Released upstream files as a later vLLM might change them: real bytes with one anchor taken away."""

from __future__ import annotations

import re

# The WAITING loop's running-cap check, in each form vLLM has released (`len(self.running) == ...`
# up to 0.24, `num_running >= ...` after): what delta 2 anchors on.
_CAP_BREAK = re.compile(rb"\n +if (len\(self\.running\)|num_running) (==|>=) self\.max_num_\w+:\n +break\n")


def without_cap_check(scheduler_py: bytes) -> bytes:
    """``scheduler_py`` whose WAITING loop lost upstream's running-cap ``break``: delta 2 has no anchor."""
    found = _CAP_BREAK.findall(scheduler_py)
    if len(found) != 1:
        raise ValueError(f"expected one running-cap check in the WAITING loop, found {len(found)}")
    return _CAP_BREAK.sub(b"\n", scheduler_py, count=1)
