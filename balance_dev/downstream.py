"""`make downstream`: vllm-ascend's own balance tests on its published tree, before and after adoption.

    python -m balance_dev.downstream [--version 0.30.0rc2] [--venv .venv-downstream] [--work build/downstream]
                                     [--adopt-cmd CMD] [--bump latest|TAG] [--bump-cmd CMD]

1. vllm-ascend VERSION's sdist from the package index pip is configured with, held to the sha256 the index
   publishes and cached under the cache root, is extracted fresh twice (WORK/before, WORK/after). Their files
   stay byte-identical; only ``vllm_ascend/_build_info.py`` is added, the file their setup.py writes.
2. VENV gets the vLLM of the tree's pin on the CPU build of torch (.ci/install-vllm), what their tests need
   (pytest, torchvision, their requirements.txt minus the Ascend and C++ build stack) and two test-only
   files in its site-packages (balance_dev/downstream_site/). A stamp keyed by the pin skips this on reruns.
3. Their two balance test files run from the tree's root with their own tests/ut/conftest.py: "before".
4. ADOPT-CMD (default ``.venv/bin/balance-patchgen --root AFTER regen``) adopts WORK/after; the tests again.
5. With --bump: BUMP-CMD (``balance-patchgen --root AFTER bump TAG|--latest``), the new pin's vLLM in
   VENV-<version>, the tests again.

Each run also makes their own body comparison (``_schedule_body_ast`` from their test module) of the copy
against the pinned release's ``schedule()``, read from the installed vLLM, which their test cannot do on
a wheel-installed vLLM (their 29 tests all pass on a copy with a statement changed; this comparison does
not). Exit codes: 0 every run on the adopted tree is clean; 1 one is not (a failure, an error, a skip other
than "vllm not a git checkout", no results, or their comparison says the copy is not the pin's); 2 usage;
3 the adopt or bump command failed (its one-line error is printed); 4 setup failed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from balance_dev import plugin_trees
from generator.errors import PatchgenError
from generator.pins.pin import PIN_FILE, read_pin
from generator.sources import copies
from generator.tags import version_of

REPO_ROOT = Path(__file__).resolve().parent.parent
SITE_FILES = Path(__file__).resolve().parent / "downstream_site"
PROJECT = "vllm-ascend"
DEFAULT_VERSION = "0.30.0rc2"
TEST_FILES = (
    "tests/ut/patch/platform/test_patch_balance_schedule.py",
    "tests/ut/patch/platform/test_patch_engine_core.py",
)
# Their body test wants `git show TAG:...` in a vLLM checkout: on a wheel-installed vLLM it can only skip.
# The plugin makes that comparison instead, so this skip is expected and any other is not.
EXPECTED_SKIP = "vllm not a git checkout"
# What their setup.py writes into the package (from SOC_VERSION); their CPU CI builds get A2.
BUILD_INFO = "# Auto-generated file\n__device_type__ = 'A2'\n"
# Their requirements.txt minus: the Ascend stack (no NPU here), C++ build tools (their tree is never built),
# typing stubs, and torch's family (.ci/install-vllm brings the CPU torch; torchvision is added by version).
NOT_INSTALLED = frozenset(
    canonicalize_name(name)
    for name in (
        "torch",
        "torch-npu",
        "torchvision",
        "torchaudio",
        "triton-ascend",
        "cmake",
        "pybind11",
        "setuptools-scm",
        "pandas-stubs",
        "arctic-inference",
        "memfabric-hybrid",
        "memcache-hybrid",
    )
)
STAMP_FORMAT = 1  # bump when what a venv gets changes, so old stamps stop matching
PIP = ("-m", "pip", "install", "-q", "--disable-pip-version-check")
NICE = ("nice", "-n", "10")  # 2 cores shared with other jobs: installs and pytest yield to them


class HarnessError(Exception):
    def __init__(self, message: str, code: int = 4) -> None:
        super().__init__(message)
        self.code = code


def say(message: str) -> None:
    print(f"downstream: {message}", flush=True)


# ---------------------------------------------------------------------------------------------------------
# The sdist and the tree copies


def sdist_bytes(version: str) -> bytes:
    """vllm-ascend ``version``'s sdist, verified against the index's sha256 once, then from the cache."""
    try:
        return plugin_trees.sdist_bytes(PROJECT, version)
    except plugin_trees.TreeUnavailable as exc:
        raise HarnessError(str(exc)) from None


def extract_tree(data: bytes, dest: Path, version: str) -> Path:
    """A fresh copy of the sdist's tree under ``dest``, plus the _build_info.py their setup.py would write."""
    tree = plugin_trees.unpack(data, dest)
    if tree.name != f"vllm_ascend-{version}":
        raise HarnessError(f"the sdist of {version} unpacks to {tree.name}, not vllm_ascend-{version}")
    missing = [p for p in (str(PIN_FILE), "tests/ut/conftest.py") if not (tree / p).is_file()]
    if missing:
        raise HarnessError(f"the sdist of {version} lacks {', '.join(missing)}: this harness needs its test tree")
    build_info = tree / "vllm_ascend" / "_build_info.py"
    if build_info.exists():
        raise HarnessError(f"{build_info} is already in the sdist: the harness would overwrite their file")
    build_info.write_text(BUILD_INFO, encoding="utf-8")
    return tree


def pinned_vllm(tree: Path) -> str:
    return version_of(read_pin(tree / PIN_FILE))


# ---------------------------------------------------------------------------------------------------------
# The venv


def run_logged(cmd: Sequence[str], log: Path, *, cwd: Path = REPO_ROOT, env: dict[str, str] | None = None) -> int:
    with log.open("a", encoding="utf-8") as out:
        out.write(f"\n$ {shlex.join(cmd)}\n")
        out.flush()
        return subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, check=False).returncode


def must(cmd: Sequence[str], log: Path, what: str) -> None:
    if run_logged(cmd, log) != 0:
        raise HarnessError(f"{what} failed: see {log}")


def venv_output(python: Path, code: str) -> str:
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout


def installed_versions(python: Path) -> dict[str, str]:
    code = "import json; from importlib import metadata as m; "
    code += "print(json.dumps({d.name: d.version for d in m.distributions()}))"
    return {canonicalize_name(k): v for k, v in json.loads(venv_output(python, code)).items()}


def requirement_lines(path: Path) -> list[Requirement]:
    out = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):  # "-r other.txt" and options: not packages
            continue
        try:
            out.append(Requirement(line))
        except InvalidRequirement as exc:
            raise HarnessError(f"{path}: cannot read {line!r} ({exc})") from None
    return out


def their_requirements(tree: Path, installed: dict[str, str]) -> tuple[list[str], list[str]]:
    """(to install, notes): their requirements.txt minus NOT_INSTALLED and what the vLLM install put there.

    vLLM's closure wins over their pins (their transformers/fastapi pins target an older vLLM): a note says so.
    """
    wanted, notes = [], []
    for req in requirement_lines(tree / "requirements.txt"):
        name = canonicalize_name(req.name)
        # Markers are evaluated by this interpreter: .ci/install-vllm makes the venv with the same python3.
        if name in NOT_INSTALLED or (req.marker is not None and not req.marker.evaluate()):
            continue
        have = installed.get(name)
        if have is None:
            wanted.append(str(req))
        elif req.specifier and not req.specifier.contains(have, prereleases=True):
            notes.append(f"kept {req.name} {have} (vLLM's), their requirements.txt asks {req.specifier}")
    return wanted, notes


def pytest_requirement(tree: Path) -> list[str]:
    """pytest within their requirements-dev.txt's bounds (<9 at 0.30.0rc2), not this project's pytest pin."""
    dev = tree / "requirements-dev.txt"
    specs = [r for r in requirement_lines(dev) if canonicalize_name(r.name) == "pytest"] if dev.is_file() else []
    return [str(specs[0])] if specs else ["pytest"]


def torchvision_for(torch_version: str) -> str:
    # torchvision 0.N pairs with torch 2.(N-15) since torch 2.0; the index has it only as a CUDA build,
    # which --no-deps keeps from replacing the CPU torch (its ops are then missing: see the site guard).
    major, minor = (int(p) for p in torch_version.split("+")[0].split(".")[:2])
    if major != 2:
        raise HarnessError(f"torch {torch_version}: no known torchvision pairing")
    return f"torchvision==0.{minor + 15}.*"


def stamp_text(vllm: str, tree: Path) -> str:
    inputs = {"format": STAMP_FORMAT, "vllm": vllm, "requirements": (tree / "requirements.txt").read_text("utf-8")}
    return json.dumps(inputs, sort_keys=True)


def ensure_venv(venv: Path, vllm: str, tree: Path, log: Path) -> None:
    """``venv`` with vLLM ``vllm`` and what the tests need; a stamp keyed by the pin skips it on reruns."""
    stamped_venv(
        venv, vllm, log, ".downstream", stamp_text(vllm, tree), lambda python: install_test_needs(python, tree, log)
    )


def stamped_venv(venv: Path, vllm: str, log: Path, kind: str, stamp: str, then: Callable[[Path], None]) -> None:
    """``venv`` with vLLM ``vllm`` on the CPU build of torch, then ``then(its python)``; the file ``KIND-VLLM``
    holding ``stamp`` skips both on reruns (a plugin's own venv says what it installs in ``stamp``)."""
    python = venv / "bin" / "python"
    marker = venv / f"{kind}-{vllm}"
    if python.is_file() and marker.is_file() and marker.read_text("utf-8") == stamp:
        say(f"{venv.name}: vLLM {vllm} already installed (stamp {marker.name})")
    else:
        for old in venv.glob(f"{kind}-*"):
            old.unlink()
        started = time.monotonic()
        say(f"{venv.name}: installing vLLM {vllm} on the CPU build of torch (log: {log})")
        must([*NICE, str(REPO_ROOT / ".ci" / "install-vllm"), str(venv), vllm], log, ".ci/install-vllm")
        then(python)
        marker.write_text(stamp, encoding="utf-8")
        say(f"{venv.name}: installed in {time.monotonic() - started:.0f} s")
    install_site_files(python)


def with_torchvision(python: Path, log: Path) -> dict[str, str]:
    """The torchvision build for the venv's torch, installed; then what the venv holds."""
    torch = installed_versions(python).get("torch")
    if torch is None:
        raise HarnessError(f"no torch in {python.parent.parent} after .ci/install-vllm")
    must([*NICE, str(python), *PIP, "--no-deps", torchvision_for(torch)], log, "installing torchvision")
    return installed_versions(python)


def install_test_needs(python: Path, tree: Path, log: Path) -> None:
    installed = with_torchvision(python, log)
    wanted, notes = their_requirements(tree, installed)
    for note in notes:
        say(note)
    # Everything already installed is a constraint: their requirements may add packages, never move vLLM's.
    constraints = python.parent.parent / "downstream-constraints.txt"
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(installed.items())), encoding="utf-8")
    packages = [*pytest_requirement(tree), *wanted]
    say(f"installing {', '.join(packages)}")
    must([*NICE, str(python), *PIP, "-c", str(constraints), *packages], log, "installing their test requirements")


def install_site_files(python: Path) -> None:
    """The torchvision guard (imported by a .pth at start-up) and the pytest plugin, written on every run."""
    purelib = Path(venv_output(python, "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    for source in sorted(SITE_FILES.glob("*.py")):
        shutil.copyfile(source, purelib / source.name)
    (purelib / "balance_downstream.pth").write_text("import balance_downstream_torchvision\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------------------
# A test run


@dataclass
class Run:
    label: str
    outcomes: dict[str, str] = field(default_factory=dict)  # test id -> passed/failed/skipped/error
    details: dict[str, str] = field(default_factory=dict)  # test id -> skip reason or first error line
    body: dict[str, object] = field(default_factory=dict)  # the plugin's comparison
    seconds: float = 0.0
    problem: str = ""  # the run itself did not give results

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    def unexpected(self) -> list[str]:
        bad = [f"{t}: {o}: {self.details.get(t, '')}" for t, o in self.outcomes.items() if o in ("failed", "error")]
        bad += [
            f"{t}: skipped: {self.details[t]}"
            for t, o in self.outcomes.items()
            if o == "skipped" and EXPECTED_SKIP not in self.details.get(t, "")
        ]
        if self.problem:
            bad.append(self.problem)
        if "error" in self.body:
            bad.append(f"body comparison: {self.body['error']}")
        elif self.body.get("copy_is_pin") is not True:
            bad.append(f"body comparison: the copy is not {self.body.get('tag')}'s schedule() modulo the 3 deltas")
        return bad


def parse_junit(path: Path, run: Run) -> None:
    for case in ET.parse(path).iter("testcase"):
        test = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        kinds = {child.tag: child for child in case if child.tag in ("error", "failure", "skipped")}
        kind = next((k for k in ("error", "failure", "skipped") if k in kinds), None)
        run.outcomes[test] = {"error": "error", "failure": "failed", "skipped": "skipped", None: "passed"}[kind]
        if kind is not None:
            text = (kinds[kind].get("message") or kinds[kind].text or "").strip()
            run.details[test] = next((line for line in text.splitlines() if line.strip()), "(no message)")[:300]


def first_error(log: Path) -> str:
    """The first ``E   ...`` line pytest printed (a conftest that fails to import gives no junit cases)."""
    for line in log.read_text("utf-8", errors="replace").splitlines():
        if line.startswith("E   "):
            return line[4:].strip()[:300]
    return "no error line"


def run_tests(label: str, python: Path, tree: Path, work: Path, tests: Sequence[str]) -> Run:
    run = Run(label)
    junit, report, log = work / f"{label}.xml", work / f"{label}.body.json", work / f"{label}.log"
    for stale in (junit, report, log):
        stale.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # HF offline: nothing in these tests may reach a hub; vLLM's cache stays in the work folder.
    env |= {"BALANCE_DOWNSTREAM_REPORT": str(report), "HF_HUB_OFFLINE": "1", "VLLM_CACHE_ROOT": str(work / "vllm")}
    cmd = [*NICE, str(python), "-m", "pytest", "-p", "balance_downstream_pytest", "-p", "no:cacheprovider"]
    cmd += ["-q", "-rs", f"--junitxml={junit}", *tests]
    say(f"{label}: pytest {' '.join(Path(t).name for t in tests)} in {tree} (log: {log})")
    started = time.monotonic()
    status = run_logged(cmd, log, cwd=tree, env=env)
    run.seconds = time.monotonic() - started
    if junit.is_file():
        parse_junit(junit, run)
    if not run.outcomes:
        run.problem = f"pytest exited {status} without test results: {first_error(log)} (see {log})"
    if report.is_file():
        run.body = json.loads(report.read_text("utf-8"))
    else:
        run.body = {"error": f"the plugin wrote no report: see {log}"}
    return run


# ---------------------------------------------------------------------------------------------------------
# Adoption and bump


def command(template: str, **values: str) -> list[str]:
    try:
        return [part.format(**values) for part in shlex.split(template)]
    except (KeyError, ValueError, IndexError) as exc:
        raise HarnessError(
            f"cannot use the command {template!r} ({exc}): placeholders are {sorted(values)}", 2
        ) from None


def run_step(what: str, cmd: list[str], log: Path) -> None:
    """Run ``cmd``; when it fails, its one-line error (the last line on stderr) is the harness's error."""
    say(f"{what}: {shlex.join(cmd)} (log: {log})")
    started = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, errors="replace", check=False)
    except OSError as exc:  # not there (no .venv yet?) or not executable
        raise HarnessError(f"{what} cannot run {cmd[0]}: {exc.strerror}", 3) from None
    log.write_text(f"$ {shlex.join(cmd)}\n{done.stdout}{done.stderr}", encoding="utf-8")
    say(f"{what}: exited {done.returncode} in {time.monotonic() - started:.0f} s")
    if done.returncode != 0:
        lines = [line for text in (done.stdout, done.stderr) for line in text.splitlines() if line.strip()]
        raise HarnessError(f"{what} exited {done.returncode}: {lines[-1] if lines else '(no output)'}", 3)


# ---------------------------------------------------------------------------------------------------------
# The summary


def summary(runs: list[Run]) -> str:
    rows = [f"{'run':<16} {'passed':>6} {'failed':>6} {'skipped':>7} {'errors':>6} {'time':>6}  body comparison"]
    for run in runs:
        counts = (run.count("passed"), run.count("failed"), run.count("skipped"), run.count("error"))
        rows.append(
            f"{run.label:<16} {counts[0]:>6} {counts[1]:>6} {counts[2]:>7} {counts[3]:>6} "
            f"{run.seconds:>5.0f}s  {body_line(run.body)}"
        )
    for run in runs:
        if run.problem:
            rows.append(f"  {run.label}: {run.problem}")
        for test, outcome in run.outcomes.items():
            if outcome != "passed":
                rows.append(f"  {run.label} {outcome} {test}: {run.details.get(test, '')}")
    for before, after in itertools.pairwise(runs):
        if not (before.outcomes and after.outcomes):  # a run without results says so in its own line
            continue
        for test in sorted(set(before.outcomes) | set(after.outcomes)):
            old, new = before.outcomes.get(test, "absent"), after.outcomes.get(test, "absent")
            if old != new:
                rows.append(f"  {before.label} -> {after.label}: {test}: {old} -> {new}")
    return "\n".join(rows)


def body_line(body: dict[str, object]) -> str:
    if "error" in body:
        return f"not made: {body['error']}"
    verdict = "IS" if body.get("copy_is_pin") else "is NOT"
    line = f"copy {verdict} {body.get('tag')}'s schedule() (their _schedule_body_ast)"
    if body.get("installed_class_is_pin") is not True:
        line += "; but the installed Scheduler.schedule does not match the pin's text either: check the venv"
    return line


# ---------------------------------------------------------------------------------------------------------
# The whole run


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    patchgen = shlex.quote(str(REPO_ROOT / ".venv" / "bin" / "balance-patchgen"))
    parser = argparse.ArgumentParser(prog="python -m balance_dev.downstream", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default=DEFAULT_VERSION, help="vllm-ascend release (default: %(default)s)")
    parser.add_argument("--venv", type=Path, default=REPO_ROOT / ".venv-downstream")
    parser.add_argument("--work", type=Path, default=REPO_ROOT / "build" / "downstream")
    parser.add_argument("--adopt-cmd", default=f"{patchgen} --root {{tree}} regen", help="{tree}: the after tree")
    parser.add_argument(
        "--test",
        action="append",
        dest="tests",
        metavar="PATH",
        help="another test file of their tree to run with the two balance ones (repeatable)",
    )
    parser.add_argument("--bump", metavar="latest|TAG", help="after adoption: bump the after tree, test again")
    parser.add_argument(
        "--bump-cmd", default=f"{patchgen} --root {{tree}} bump {{bump}}", help="{tree}; {bump}: TAG or --latest"
    )
    args = parser.parse_args(argv)
    try:
        copies.version_key(args.version)  # a version of another shape never reaches a path or a URL
    except PatchgenError as exc:
        parser.error(str(exc))
    args.tests = tuple(dict.fromkeys([*TEST_FILES, *(args.tests or ())]))
    args.venv, args.work = (p if p.is_absolute() else REPO_ROOT / p for p in (args.venv, args.work))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    runs: list[Run] = []
    try:
        harness(args, runs)
    except (HarnessError, PatchgenError, OSError, subprocess.CalledProcessError, tarfile.TarError) as exc:
        if runs:
            print(summary(runs), flush=True)
        say(f"error: {exc}")
        return exc.code if isinstance(exc, HarnessError) else 4
    print(summary(runs), flush=True)
    # "before" is the hand copy as released: only the runs on the adopted tree must be clean.
    bad = [f"{run.label}: {line}" for run in runs[1:] for line in run.unexpected()]
    for line in bad:
        say(line)
    say("not clean after adoption" if bad else "clean after adoption")
    return 1 if bad else 0


def harness(args: argparse.Namespace, runs: list[Run]) -> None:
    """Every phase in order; ``runs`` collects the test runs made, for a summary even when a later phase fails."""
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    data = sdist_bytes(args.version)
    before = extract_tree(data, work / "before", args.version)
    after = extract_tree(data, work / "after", args.version)
    if missing := [t for t in args.tests if not (before / t).is_file()]:
        raise HarnessError(f"the sdist of {args.version} has no {', '.join(missing)}", 2)
    vllm = pinned_vllm(before)
    ensure_venv(args.venv, vllm, before, work / "install.log")
    python = args.venv / "bin" / "python"
    runs.append(run_tests("before", python, before, work, args.tests))
    run_step("adopt", command(args.adopt_cmd, tree=str(after)), work / "adopt.log")
    runs.append(run_tests("after", python, after, work, args.tests))
    if args.bump:
        bump = "--latest" if args.bump == "latest" else args.bump
        run_step("bump", command(args.bump_cmd, tree=str(after), bump=bump), work / "bump.log")
        new = pinned_vllm(after)
        if new == vllm:
            say(f"bump: the pin is still v{vllm}: nothing more to test")
            return
        venv = args.venv.with_name(f"{args.venv.name}-{new}")
        ensure_venv(venv, new, after, work / f"install-{new}.log")
        runs.append(run_tests(f"bumped-{new}", venv / "bin" / "python", after, work, args.tests))


if __name__ == "__main__":
    sys.exit(main())
