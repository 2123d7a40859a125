"""vLLM's companions on a CPU-only machine, computed from metadata (used by .ci/install-vllm).

A vLLM wheel declares the CUDA stack (the CUDA build of torch, triton, nvidia-*, flashinfer...)
beside the ordinary libraries it imports. On this project's machines the runtime needs only the
latter, next to the CPU build of torch. Nothing here is kept per vLLM version: the root
requirements are the release wheel's own ``Requires-Dist`` (its METADATA read from the package
index pip is configured with, by HTTP range reads), every deeper level is the installed packages'
metadata, markers are evaluated for the interpreter that runs this script, and the only hand-kept
data is CUDA_STACK below.

    python .ci/vllm_companions.py requires VERSION
        vLLM VERSION's requirements for this interpreter, no extras, CUDA stack removed.
    python .ci/vllm_companions.py resolve VERSION
        the exact versions (``name==version``, one a line) to install with --no-deps next to what
        is installed, so that vLLM VERSION's companions and everything they require are present.
        pip's own resolver decides (backtracking included: xgrammar's newest needs a newer
        apache-tvm-ffi than vLLM 0.24.0 pins), in a dry run where each CUDA-stack package that the
        closure reaches is an empty stand-in wheel: it constrains nothing, is never downloaded and
        never installed.
    python .ci/vllm_companions.py missing REQUIREMENT...
        what is not installed (or at a version outside what its requirers ask) in the closure of
        REQUIREMENT... over the installed packages' metadata, CUDA stack excluded: one merged
        requirement per line, to install with --no-deps; nothing printed when complete.
        On stderr, a note for each installed CUDA-stack package (torch) whose installed version is
        not what a requirer declares (vLLM 0.24.0 declares torch==2.11.0; the CPU build is 2.13.0).

Run both with the target venv's interpreter: markers are evaluated for it, and ``missing`` reads
its installed metadata.
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
import tempfile
import zipfile
from email.parser import BytesParser
from importlib import metadata
from pathlib import Path

try:
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name
    from packaging.version import Version
except ImportError:  # a bare venv: pip carries a copy
    from pip._vendor.packaging.markers import default_environment  # type: ignore[no-redef]
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
    from pip._vendor.packaging.specifiers import SpecifierSet  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[no-redef]
    from pip._vendor.packaging.version import Version  # type: ignore[no-redef]

# The CUDA stack, never installed (canonical names, fnmatch patterns). torch comes separately as
# the CPU build; everything else here is either a CUDA/ROCm build, GPU kernels, or needs one of
# those at import time (torchvision/torchaudio/torchcodec wheels on the index are built against
# the CUDA torch and break `import transformers` next to the CPU one).
CUDA_STACK = (
    "torch",
    "torchvision",
    "torchaudio",
    "torchcodec",
    "triton",
    "pytorch-triton*",
    "nvidia-*",
    "cuda-*",
    "cupy*",
    "xformers",
    "flashinfer*",
    "flash-attn*",
    "deep-gemm*",
    "deep-ep*",
    "quack-kernels",
    "nixl*",
    "tilelang",
    # GPU kernels and NVIDIA libraries that vLLM declares and that declare the above themselves.
    "humming-kernels",  # triton, cuda-bindings
    "tokenspeed-*",  # nvidia-cutlass-dsl, tokenspeed-triton
    "pynvvideocodec",  # NVIDIA's video codec, needs the CUDA driver
)


def is_cuda_stack(name: str) -> bool:
    canonical = canonicalize_name(name)
    return any(fnmatch.fnmatchcase(canonical, pattern) for pattern in CUDA_STACK)


def release_metadata(version: str) -> bytes:
    """METADATA of vLLM ``version``'s wheel on the configured index, by range reads (~1 MB)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from generator.sources import index
    from generator.sources.release import choose_wheel

    wheel = choose_wheel(index.list_files("vllm"), version)
    with zipfile.ZipFile(index.RangeReader(wheel.url, wheel.size)) as archive:
        return archive.read(f"vllm-{version}.dist-info/METADATA")


def release_requirements(version: str) -> list[Requirement]:
    message = BytesParser().parsebytes(release_metadata(version), headersonly=True)
    return [Requirement(line) for line in message.get_all("Requires-Dist") or []]


def applies(requirement: Requirement, extras: set[str]) -> bool:
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({**default_environment(), "extra": extra}) for extra in (extras or {""}))


def companions(version: str) -> list[str]:
    return [str(r) for r in release_requirements(version) if applies(r, set()) and not is_cuda_stack(r.name)]


_STUB_VERSION = "0+cpu.stand.in"


def _write_stub(directory: Path, name: str) -> None:
    """An empty wheel named ``name``, version _STUB_VERSION, with no requirements."""
    dist = canonicalize_name(name).replace("-", "_")
    info = f"{dist}-{_STUB_VERSION}.dist-info"
    files = {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {_STUB_VERSION}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: vllm_companions\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    with zipfile.ZipFile(directory / f"{dist}-{_STUB_VERSION}-py3-none-any.whl", "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        archive.writestr(f"{info}/RECORD", "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"]))


def resolve(version: str) -> list[str]:
    roots = companions(version)
    # The installed torch (the CPU build) stays: a companion that cannot live with it is an error.
    torch = installed_version("torch")
    pins = [f"torch=={torch}"] if torch else []
    # Stand-ins for the CUDA stack named outright (triton: xgrammar declares it); the closure may
    # reach others through the patterns (nvidia-*): those get theirs in a next round.
    stubbed = {n for n in CUDA_STACK if n != "torch" and not any(c in n for c in "*?[")}
    with tempfile.TemporaryDirectory(prefix="vllm-companions-") as tmp:
        work = Path(tmp)
        for name in stubbed:
            _write_stub(work, name)
        for _ in range(20):  # one more stand-in per round at least; the CUDA stack is finite
            constraints = pins + [f"{n}=={_STUB_VERSION}" for n in sorted(stubbed)]
            (work / "constraints.txt").write_text("".join(f"{line}\n" for line in constraints))
            report = work / "report.json"
            command = [
                sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--disable-pip-version-check",
                "--report", str(report), "--find-links", str(work), "-c", str(work / "constraints.txt"), *roots,
            ]  # fmt: skip
            if subprocess.run(command, stdout=sys.stderr).returncode != 0:
                raise SystemExit(f"vllm_companions: pip could not resolve vLLM {version}'s companions (above)")
            chosen = [
                (item["metadata"]["name"], item["metadata"]["version"])
                for item in json.loads(report.read_text())["install"]
            ]
            reached = {canonicalize_name(n) for n, v in chosen if is_cuda_stack(n) and v != _STUB_VERSION}
            if not reached:
                return sorted(f"{n}=={v}" for n, v in chosen if not is_cuda_stack(n))
            if reached <= stubbed:
                raise SystemExit(f"vllm_companions: pip chose {sorted(reached)} over their stand-ins")
            for name in reached - stubbed:
                _write_stub(work, name)
            stubbed |= reached
    raise SystemExit("vllm_companions: the CUDA stack kept growing: stopped after 20 rounds")


def installed_version(name: str) -> Version | None:
    try:
        return Version(metadata.version(name))
    except metadata.PackageNotFoundError:
        return None


def missing(roots: list[str]) -> list[str]:
    """Merged requirements of the closure that the environment does not satisfy."""
    specs: dict[str, SpecifierSet] = {}
    extras: dict[str, set[str]] = {}
    display: dict[str, str] = {}
    walked: dict[str, frozenset[str]] = {}
    pending = [("(root)", Requirement(root)) for root in roots]
    while pending:
        requirer, requirement = pending.pop()
        if is_cuda_stack(requirement.name):
            have = installed_version(requirement.name)
            if have is not None and not requirement.specifier.contains(have, prereleases=True):
                print(f"note: {requirer} requires {requirement}; installed: {have}", file=sys.stderr)
            continue
        name = canonicalize_name(requirement.name)
        display.setdefault(name, requirement.name)
        specs[name] = specs.get(name, SpecifierSet()) & requirement.specifier
        extras.setdefault(name, set()).update(requirement.extras)
        if installed_version(name) is None or walked.get(name) == frozenset(extras[name]):
            continue
        walked[name] = frozenset(extras[name])  # walk again when a requirer adds an extra
        for line in metadata.requires(name) or []:
            dependency = Requirement(line)
            if applies(dependency, extras[name]):
                pending.append((f"{display[name]} {installed_version(name)}", dependency))
    out = []
    for name in sorted(specs):
        have = installed_version(name)
        if have is None or not specs[name].contains(have, prereleases=True):
            out.append(f"{display[name]}{specs[name]}")
    return out


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "requires":
        print("\n".join(companions(argv[1])))
    elif len(argv) >= 2 and argv[0] == "resolve":
        print("\n".join(resolve(argv[1])))
    elif len(argv) >= 1 and argv[0] == "missing":
        print("\n".join(missing(argv[1:])))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
