"""Every form a hand-kept copy has written the balance deltas in, as data (one place).

``migrate`` recognizes a delta only in one of these forms; any other statement a copy adds is an
*extra edit*, never silently taken for a delta. The forms are code patterns (``astpattern``:
capitals stand for whatever code is there). They come from vllm-ascend's released copies
(0.13.0rc1 on) and from this project's generated module; a new form is a new line here.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

# What the runtime base calls the leader's count, reduced once per gather (vllm_ascend/core).
LEADER_COUNT = "balance_leader_running"


@dataclass(frozen=True)
class Form:
    delta: int
    name: str
    code: str  # the statements, consecutive in one block
    restores: str = ""  # upstream's statement in their place once the delta is taken out ("": none)
    first: bool = False  # must be the first statement of schedule() (after a docstring)
    stop: str = "break"  # delta 2: what the gate does, upstream's own stop (``break``, or a stop flag set)


# Delta 1: balance off runs upstream's schedule(). Statements before the return (DISABLED_PATH) are
# another feature's edits inside the disabled path: reported as extra edits, not taken for the delta.
EARLY_RETURN = "if not self._balance_enabled:\n    DISABLED_PATH\n    return super().schedule(*ARGS, **KWARGS)"

# Delta 2: the gate. GATE must compare one of LEADER_COUNTS with the cap (``gate`` below reads it).
_GATE_SHAPES = {
    "one-statement gate": "if GATE:\n    break",
    "balance_flag pair": "balance_flag = GATE\nif balance_flag:\n    break",
}
# Where upstream's cap check sets a flag instead of breaking (one disjunct of ``<flag> = ... or ...``), the
# flags known to stop admission into RUNNING, and so what the gate sets in place of its ``break``. 0.34's
# ``loads_only``: nothing enters RUNNING this step, while asynchronous KV loads still start (they take no
# running slot until their KV arrives), on the leader as on every rank. Another flag is a maintainer's call.
STOP_FLAGS = ("loads_only",)
STOPS = ("break", *(f"{flag} = True" for flag in STOP_FLAGS))


def with_stop(code: str, stop: str) -> str:
    """A gate form's code with its ``break`` (the stop statement alone on its line) replaced by ``stop``."""
    return re.sub(r"^(\s*)break$", lambda m: m.group(1) + stop, code, flags=re.M)


_WRAPPER = "if self._balance_enabled:\n"

# Delta 3: break where upstream asserts.
QUEUE_BREAK = "if request_queue is None:\n    break"
QUEUE_ASSERT = "assert request_queue is not None"

FORMS: tuple[Form, ...] = (
    Form(1, "early return", EARLY_RETURN, first=True),
    *(Form(2, name, with_stop(code, stop), stop=stop) for stop in STOPS for name, code in _GATE_SHAPES.items()),
    *(
        Form(2, f"{name} in `if self._balance_enabled:`", _WRAPPER + textwrap.indent(code, "    "))
        for name, code in _GATE_SHAPES.items()
    ),
    Form(3, "queue break", QUEUE_BREAK, restores=QUEUE_ASSERT),
)

# The leader's count as each gate form reads it, and what reading it costs.
LEADER_COUNTS = {
    "max(t.item() for t in self.balance_queue)": "the seed's: the gathered counts' maximum, taken at every admission",
    f"self.{LEADER_COUNT}": "the generated module's: the gathered counts' maximum, taken once per gather",
}

# Where a copy says what each rank sends in the gather: COUNT, in the method named first.
PAYLOADS = (
    ("balance_gather", "torch.tensor([COUNT], *ARGS, **KWARGS)"),  # vllm-ascend's copies
    ("balance_running_count", "return COUNT"),  # the generated module
)

# Words for a term of upstream's cap count that a copy's count lacks (shown as the code otherwise).
COUNT_TERMS = {"self.num_waiting_for_streaming_input": "streaming slots"}


def gate_form_names() -> tuple[str, ...]:
    """The delta-2 forms a generated copy can be written in (a spec's ``gate_form``); the stop is upstream's."""
    return tuple(f.name for f in FORMS if f.delta == 2 and f.stop == "break")


def gate_form(name: str) -> Form:
    """The form as written with ``break``: the generator puts upstream's own stop in its place."""
    (form,) = [f for f in FORMS if f.delta == 2 and f.name == name and f.stop == "break"]
    return form
