"""A vllm-ascend-shaped source tree, written by this project for its tests (no vllm-ascend code in it).

The layout is vllm-ascend's (pin in ``.github/``, the balance patch file where its tree keeps it);
the hand-written parts are this project's own words; the copied ``schedule()`` is upstream's text
at a tag with the deltas put in by plain text edits, in the seed's form (``balance_queue`` gather,
``max(t.item() ...)`` gate, ``==`` as at v0.24.0), the way a maintainer re-copies it by hand.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PATCH = Path("vllm_ascend/patch/platform/patch_balance_schedule.py")
PIN = Path(".github/vllm-release-tag.commit")
SEED_GATE = "if max(t.item() for t in self.balance_queue) == self.max_num_running_reqs:"

HEAD = '''"""Balance scheduling (test tree): gathers each rank's running count into balance_queue every step."""

import torch
import torch.distributed as dist
from vllm.logger import logger
from vllm.v1.core.sched.scheduler import Scheduler


def helper_outside_the_copy() -> int:
    return 1


class BalanceScheduler(Scheduler):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._balance_enabled = True
        self.dp_group = None
        self.balance_queue = [torch.tensor([0], dtype=torch.int) for _ in range(2)]

    def balance_gather(self):
        if not self._balance_enabled or self.dp_group is None:
            return
        running_tensor = torch.tensor([len(self.running)], dtype=torch.int, device="cpu")
        dist.all_gather(self.balance_queue, running_tensor, group=self.dp_group)

'''
TAIL = """

# Hand-written after the copy: it stays byte for byte.
BALANCE_SCHEDULER_TAIL = True
"""


def method_lines(upstream_text: str, cls: str = "Scheduler", name: str = "schedule") -> list[str]:
    tree = ast.parse(upstream_text)
    (klass,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    (func,) = [n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name]
    lines = upstream_text.splitlines()
    first = min([func.lineno, *(d.lineno for d in func.decorator_list)])
    return lines[first - 1 : func.end_lineno]


def hand_copy(upstream_text: str) -> str:
    """Upstream's schedule() with the seed's three deltas, put in by text edits (not by the generator)."""
    lines = method_lines(upstream_text)
    body_at = next(i for i, line in enumerate(lines) if line.rstrip().endswith(":") and ")" in line) + 1
    params = re.search(r"def schedule\(self(?:, )?([^)]*)\)", " ".join(lines[:body_at]))
    forwarded = ", ".join(p.split(":")[0].split("=")[0].strip() for p in (params[1] if params else "").split(",") if p)
    out = [
        *lines[:body_at],
        "        if not self._balance_enabled:",
        f"            return super().schedule({forwarded})",
    ]
    rest = lines[body_at:]
    flag_at = _cap_flag_end(rest)
    for n, line in enumerate(rest):
        stripped = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        if stripped == "assert request_queue is not None":
            out += [f"{indent}if request_queue is None:", f"{indent}    break"]
            continue
        out.append(line)
        # Upstream's cap check's break, in both shapes it has had: the gate goes right after it.
        previous = rest[n - 1].strip() if n else ""
        cap_check = ("max_num_running_reqs" in previous or "max_num_active_reqs" in previous) and previous.startswith(
            "if "
        )
        if stripped == "break" and cap_check and "self.waiting" not in previous:
            cap = "max_num_active_reqs" if "max_num_active_reqs" in previous else "max_num_running_reqs"
            out += [
                "",
                f"{indent[:-4]}# Leader at cap: freeze admission on every rank.",
                f"{indent[:-4]}{SEED_GATE.replace('max_num_running_reqs', cap)}",
                f"{indent}break",
            ]
        if flag_at is not None and n == flag_at[0]:
            # From 0.34 the cap check sets a mode instead of breaking: the gate sets the same flag after it.
            flag, cap, flag_indent = flag_at[1:]
            out += [
                f"{flag_indent}# Leader at cap: every rank enters the mode the leader's check puts it in.",
                f"{flag_indent}{SEED_GATE.replace('max_num_running_reqs', cap).replace('==', '>=')}",
                f"{flag_indent}    {flag} = True",
            ]
    return "\n".join(out) + "\n"


def _cap_flag_end(lines: list[str]) -> tuple[int, str, str, str] | None:
    """Where upstream's ``<flag> = (<count> >= self.<cap> or ...)`` ends, the flag, the cap and its indent."""
    for n, line in enumerate(lines):
        start = re.fullmatch(r"( *)(\w+) = \(", line.rstrip())
        if start is None:
            continue
        end = next((i for i in range(n + 1, len(lines)) if lines[i].strip() == ")"), None)
        if end is None:
            continue
        inside = " ".join(lines[n + 1 : end])
        cap = re.search(r">= self\.(max_num_active_reqs|max_num_running_reqs) or", inside)
        if cap is not None:
            return end, start[2], cap[1], start[1]
    return None


def upstream_imports(upstream_text: str) -> str:
    """Upstream's top-level import statements, as a maintainer copies them along with the method."""
    tree = ast.parse(upstream_text)
    kept = [
        ast.get_source_segment(upstream_text, n) or ""
        for n in tree.body
        if isinstance(n, (ast.Import, ast.ImportFrom)) and getattr(n, "module", "") != "__future__"
    ]
    return "".join(f"{line}\n" for line in kept)


def patch_text(upstream_text: str) -> str:
    docstring, _, rest = HEAD.partition("\n\n")
    return f"{docstring}\n\n{upstream_imports(upstream_text)}{rest}{hand_copy(upstream_text)}{TAIL}"


def write(root: Path, upstream_text: str, tag: str) -> Path:
    """A tree at ``root`` pinned to ``tag`` whose patch file holds a hand copy of ``upstream_text``'s schedule()."""
    (root / PIN).parent.mkdir(parents=True, exist_ok=True)
    (root / PIN).write_text(f"{tag}\n")
    (root / PATCH).parent.mkdir(parents=True, exist_ok=True)
    (root / PATCH).write_text(patch_text(upstream_text))
    return root
