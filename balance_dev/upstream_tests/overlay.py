"""The library versions vLLM's own CI runs its tests with, in a folder put first on the test process's path.

vLLM's runtime requirements are lower bounds (``transformers >= 5.5.3``); its CI runs the tests with the
exact versions of its test lock (``requirements/test/cuda.txt`` in the sdist, compiled by uv). A newer
transformers than the release supports breaks vLLM's own model modules (0.24.0's LLaVA module imports
what transformers 5.24 no longer has), so the tests would judge transformers, not the scheduler. The venv
that runs them (``.venv``: the pinned vLLM on the CPU build of torch) is never changed: the lock's versions
of ROOTS go into an overlay folder (``pip install --target``, ``--no-deps``), then whatever those require
and the venv plus overlay do not satisfy, again at the lock's version, until nothing is missing
(``.ci/vllm_companions.py missing``, with the overlay on the path). vLLM's own closure is checked the same
way at the end: the overlay may not break vLLM's requirements.

Nothing here is per release: the lock is the release's file, and ROOTS are what the scheduler tests go
through outside vLLM (transformers: model configs and processors) plus the test runner vLLM's CI uses.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from balance_dev.project_files import REPO_ROOT

# The release's compiled test locks, in the order tried: the CUDA CI's (tests/v1/core runs there), then
# the single lock of the releases before requirements/test/ was split by platform.
LOCKS = ("requirements/test/cuda.txt", "requirements/test.txt")
ROOTS = ("transformers", "pytest", "pytest-timeout")
STAMP = ".overlay.json"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;#]+)")
MAX_ROUNDS = 10  # each round adds at least one package; the closure of transformers + pytest is small


class OverlayError(Exception):
    pass


def lock_pins(text: str) -> dict[str, str]:
    """``name==version`` lines of a uv/pip-compile lock, by canonical name; local versions (``+cu130``) kept."""
    pins: dict[str, str] = {}
    for line in text.splitlines():
        if match := _PIN.match(line.strip()):
            pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


def find_lock(files: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """(path, pins) of the first of LOCKS the release has."""
    for path in LOCKS:
        if path in files:
            return path, lock_pins(files[path])
    raise OverlayError(f"the sdist has none of {', '.join(LOCKS)}: no test lock to take versions from")


def pins_for(missing_lines: Sequence[str], pins: Mapping[str, str]) -> list[str]:
    """What to install for each unsatisfied requirement ``missing`` printed: the lock's version if it has one
    (and it satisfies the requirement), else the requirement itself for pip to choose."""
    out = []
    for line in missing_lines:
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            raise OverlayError(f"cannot read {line!r} from vllm_companions missing ({exc})") from None
        locked = pins.get(canonicalize_name(req.name))
        if locked is not None and req.specifier.contains(locked, prereleases=True):
            out.append(f"{req.name}=={locked}")
        else:
            out.append(str(req))
    return out


@dataclass(frozen=True)
class Overlay:
    path: Path
    lock: str
    installed: dict[str, str]  # what the overlay holds: name -> version

    def describe(self) -> str:
        held = ", ".join(f"{n} {v}" for n, v in sorted(self.installed.items())) or "nothing"
        return f"{held} (versions from {self.lock})"


def _env(overlay: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = str(overlay)
    return env


def missing(python: Path, overlay: Path, requirements: Sequence[str]) -> list[str]:
    script = REPO_ROOT / ".ci" / "vllm_companions.py"
    done = subprocess.run(
        [str(python), str(script), "missing", *requirements],
        env=_env(overlay),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise OverlayError(f"vllm_companions missing exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return [line for line in done.stdout.splitlines() if line.strip()]


def overlay_versions(overlay: Path) -> dict[str, str]:
    from importlib import metadata

    return {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions(path=[str(overlay)])}


def build(python: Path, overlay: Path, lock: str, pins: Mapping[str, str], vllm: str, log: Path) -> Overlay:
    """``overlay`` holding ROOTS at the lock's versions and what they need; reused when its stamp matches."""
    roots = []
    for name in ROOTS:
        if (version := pins.get(canonicalize_name(name))) is None:
            raise OverlayError(f"{lock} pins no {name}: cannot tell which version vLLM's CI runs the tests with")
        roots.append(f"{name}=={version}")
    stamp_text = json.dumps({"roots": roots, "vllm": vllm, "python": str(python)}, sort_keys=True)
    stamp = overlay / STAMP
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == stamp_text:
        return Overlay(overlay, lock, overlay_versions(overlay))
    if overlay.exists():
        shutil.rmtree(overlay)
    overlay.mkdir(parents=True)
    wanted = roots
    for _ in range(MAX_ROUNDS):
        install = pins_for(missing(python, overlay, wanted), pins)
        if not install:
            break
        with log.open("a", encoding="utf-8") as out:
            out.write(f"\n$ pip install --target {overlay} --no-deps {' '.join(install)}\n")
            out.flush()
            cmd = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "--upgrade"]
            code = subprocess.run(
                ["nice", "-n", "10", *cmd, "--target", str(overlay), *install],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=_env(overlay),
                check=False,
            ).returncode
        if code != 0:
            raise OverlayError(f"pip could not install {' '.join(install)} into {overlay}: see {log}")
    else:
        raise OverlayError(f"the overlay's requirements kept growing after {MAX_ROUNDS} rounds: see {log}")
    # The overlay may not break vLLM: its whole closure must still be satisfied with the overlay first.
    if broken := missing(python, overlay, [f"vllm=={vllm}"]):
        raise OverlayError(f"with {lock}'s versions first on the path, vLLM {vllm} lacks {', '.join(broken)}")
    # pip --target drops a bin/ of console scripts: not needed, and not on any path.
    shutil.rmtree(overlay / "bin", ignore_errors=True)
    stamp.write_text(stamp_text, encoding="utf-8")
    return Overlay(overlay, lock, overlay_versions(overlay))


def main() -> int:  # pragma: no cover - manual use: python -m balance_dev.upstream_tests.overlay LOCK OUT VLLM
    lock, out, vllm = sys.argv[1:4]
    pins = lock_pins(Path(lock).read_text(encoding="utf-8"))
    print(build(Path(sys.executable), Path(out), lock, pins, vllm, Path(out).with_suffix(".log")).describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
