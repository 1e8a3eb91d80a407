"""make doctor: diagnose the environment for building PyTorch C++/CUDA extensions.

    make doctor                       # or: python tools/doctor.py

Prints what a build will use (python, torch and its CUDA, nvcc, CUDA_HOME, ninja, the compiler,
the GPU and the TORCH_CUDA_ARCH_LIST for it, JIT build folders), then every problem with its fix.
Exits 1 if any problem is an error. Learners run it first; `make gpu-check` prints it too.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

REPO = Path(__file__).resolve().parents[1]
DEFAULT_EXTENSIONS_ROOT = REPO / "build" / "torch_extensions"
SUBPROCESS_TIMEOUT_S = 15

# torch expands these names in TORCH_CUDA_ARCH_LIST (torch/utils/cpp_extension.py, named_arches);
# longer names first so that "Ampere+Tegra" is not read as "Ampere".
NAMED_ARCHES = {
    "Kepler+Tesla": "3.7",
    "Kepler": "3.5+PTX",
    "Maxwell+Tegra": "5.3",
    "Maxwell": "5.0;5.2+PTX",
    "Pascal": "6.0;6.1+PTX",
    "Volta+Tegra": "7.2",
    "Volta": "7.0+PTX",
    "Turing": "7.5+PTX",
    "Ampere+Tegra": "8.7",
    "Ampere": "8.0;8.6+PTX",
    "Ada": "8.9+PTX",
    "Hopper": "9.0+PTX",
    "Blackwell+Tegra": "11.0",
    "Blackwell": "10.0;10.3;12.0;12.1+PTX",
}
ARCH_ENTRY = re.compile(r"(\d+)\.(\d+)(a?)(\+PTX)?")

Gpu = tuple[str, tuple[int, int]]


@dataclass(frozen=True)
class Environment:
    """Every fact the diagnosis needs; None wherever the fact could not be read."""

    python_version: str
    python_executable: str
    torch_version: str
    torch_cuda: str | None  # torch.version.cuda, None for a CPU-only build
    cxx11_abi: bool | None
    cuda_home_env: str | None  # $CUDA_HOME as set in the environment
    cuda_home_resolved: str | None  # torch.utils.cpp_extension.CUDA_HOME, what builds use
    cuda_runtime_header: bool  # <resolved CUDA_HOME>/include/cuda_runtime.h exists
    nvcc_path: str | None
    nvcc_version: str | None  # "13.0", from `nvcc --version`
    ninja_version: str | None
    compiler: str | None  # $CXX or c++, as found on PATH
    compiler_version: str | None  # first line of `<compiler> --version`
    # Does a shared library this compiler links load libstdc++.so (True), or carry a static copy
    # of the C++ runtime (False)? None: not checked (no compiler, or no ldd).
    compiler_links_shared_libstdcxx: bool | None
    gpus: tuple[Gpu, ...]  # (name, (major, minor)) for each visible GPU
    arch_list_env: str | None  # $TORCH_CUDA_ARCH_LIST
    torch_arch_list: tuple[str, ...]  # torch.cuda.get_arch_list(): "sm_90", ...
    max_jobs: str | None
    cpu_count: int | None
    cusparse_header: str | None  # where cusparse.h was found (CUDA_HOME/include or CPATH)
    pip_cuda_include: str | None  # site-packages/nvidia/cu13/include, if installed
    extensions_root: str
    build_tag: str  # this torch's folder under extensions_root
    other_builds: tuple[str, ...]  # folders of extensions_root that are not build_tag
    lock_files: tuple[str, ...]  # `lock` files left in build folders
    # What `nvcc --list-gpu-arch` accepts, as "7.5", "8.0", ...; None: not asked (no nvcc).
    nvcc_arches: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Problem:
    """One thing that will break (error) or may break (warning) a build, and how to fix it."""

    severity: Literal["error", "warning"]
    what: str
    fix: str


def build_tag() -> str:
    """The folder name the chapters build into: torch2.11.0_cu130-py311 (see chapter 1)."""
    import torch

    v = sys.version_info
    return f"torch{torch.__version__}-py{v.major}{v.minor}".replace("+", "_")


def _run(command: list[str]) -> str | None:
    """stdout + stderr of a command that succeeded, or None (not found, failed, timed out)."""
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout + done.stderr if done.returncode == 0 else None


def _nvcc_version(nvcc: str | None) -> str | None:
    output = _run([nvcc, "--version"]) if nvcc else None
    match = re.search(r"release (\d+\.\d+)", output or "")
    return match.group(1) if match else None


def _nvcc_arches(nvcc: str | None) -> tuple[str, ...] | None:
    """The compute capabilities this nvcc compiles for: compute_75 -> "7.5" (nvcc 13 dropped
    7.0 and older)."""
    output = _run([nvcc, "--list-gpu-arch"]) if nvcc else None
    found = re.findall(r"compute_(\d+)(\d)\b", output or "")
    return tuple(f"{major}.{minor}" for major, minor in found) or None


def ninja_default_jobs(cpu_count: int | None) -> int:
    """How many compiles ninja runs at once when nothing says (ninja's GuessParallelism)."""
    cpus = cpu_count or 1
    return 2 if cpus <= 1 else 3 if cpus == 2 else cpus + 2


def _ninja_version() -> str | None:
    from torch.utils.cpp_extension import is_ninja_available

    if not is_ninja_available():
        return None
    output = _run(["ninja", "--version"])
    return output.strip() if output else None


def _compiler() -> tuple[str | None, str | None]:
    # torch compiles with $CXX when it is set, else with `c++`.
    command = shlex.split(os.environ.get("CXX") or "c++")
    path = shutil.which(command[0]) if command else None
    if path is None:
        return None, None
    output = _run([path, *command[1:], "--version"])
    return path, output.splitlines()[0].strip() if output else None


PROBE_CPP = """
#include <sstream>
#include <string>
std::string probe(long x) { std::ostringstream s; s << x; return s.str(); }
"""


def _links_shared_libstdcxx(compiler: str | None) -> bool | None:
    """Link a tiny shared library the way torch links an extension and ask ldd what it needs.

    A compiler that cannot find libstdc++.so links the static libstdc++.a into the library
    instead. The extension then brings a second copy of the C++ runtime into a process that
    already has one (torch's), and crashes the first time it formats a number through iostreams
    (seen on the course's GPU machine, whose $CXX was such a compiler).
    """
    if compiler is None or shutil.which("ldd") is None:
        return None
    command = shlex.split(os.environ.get("CXX") or "c++")
    with tempfile.TemporaryDirectory() as tmp:
        source, library = Path(tmp) / "probe.cpp", Path(tmp) / "probe.so"
        source.write_text(PROBE_CPP)
        if (
            _run([compiler, *command[1:], "-shared", "-fPIC", str(source), "-o", str(library)])
            is None
        ):
            return None
        needed = _run(["ldd", str(library)])
    return None if needed is None else "libstdc++" in needed


def _gpus() -> tuple[Gpu, ...]:
    import torch

    if torch.version.cuda is None:
        return ()
    try:
        if not torch.cuda.is_available():
            return ()
        return tuple(
            (torch.cuda.get_device_name(i), tuple(torch.cuda.get_device_capability(i)))
            for i in range(torch.cuda.device_count())
        )
    except Exception:  # a broken driver raises many kinds of errors; the doctor must still report
        return ()


def _torch_arch_list() -> tuple[str, ...]:
    import torch

    try:
        return tuple(torch.cuda.get_arch_list())
    except Exception:  # as in _gpus: a fact the doctor cannot read is left out, never fatal
        return ()


def _pip_cuda_include(torch_cuda: str | None) -> str | None:
    """site-packages/nvidia/cu13/include: the CUDA headers torch's pip wheels bring along."""
    if torch_cuda is None:
        return None
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    # `nvidia` is a namespace package (no __init__.py): its folders are its search locations.
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / f"cu{torch_cuda.split('.')[0]}" / "include"
        if candidate.is_dir():
            return str(candidate)
    return None


def _find_cusparse_header(cuda_home: str | None) -> str | None:
    folders = [str(Path(cuda_home) / "include")] if cuda_home else []
    folders += [d for d in os.environ.get("CPATH", "").split(os.pathsep) if d]
    for folder in folders:
        if (Path(folder) / "cusparse.h").is_file():
            return str(Path(folder) / "cusparse.h")
    return None


def _extension_builds(root: Path, tag: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(folders of root other than tag, lock files in any build folder)."""
    if not root.is_dir():
        return (), ()
    others = tuple(sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != tag))
    # <root>/<tag>/<name>/lock for the course's builds, <root>/<name>/lock for load() without a
    # build_directory.
    locks = sorted({*root.glob("*/lock"), *root.glob("*/*/lock")})
    return others, tuple(str(p) for p in locks if p.is_file())


def collect() -> Environment:
    """Read every fact about this machine; a fact that cannot be read becomes None."""
    import torch

    # Importing cpp_extension without a GPU logs "No CUDA runtime is found, using CUDA_HOME=...";
    # the report says the same more plainly.
    logger = logging.getLogger("torch.utils.cpp_extension")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        from torch.utils import cpp_extension
    finally:
        logger.setLevel(level)

    cuda_home = cpp_extension.CUDA_HOME
    # Builds run <CUDA_HOME>/bin/nvcc; PATH's nvcc is only what torch guesses CUDA_HOME from.
    nvcc = str(Path(cuda_home) / "bin" / "nvcc") if cuda_home else None
    if nvcc is None or not Path(nvcc).is_file():
        nvcc = shutil.which("nvcc")
    try:
        cxx11_abi: bool | None = bool(torch.compiled_with_cxx11_abi())
    except Exception:
        cxx11_abi = None
    compiler, compiler_version = _compiler()
    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or DEFAULT_EXTENSIONS_ROOT)
    tag = build_tag()
    other_builds, lock_files = _extension_builds(root, tag)
    return Environment(
        python_version=".".join(map(str, sys.version_info[:3])),
        python_executable=sys.executable,
        torch_version=torch.__version__,
        torch_cuda=torch.version.cuda,
        cxx11_abi=cxx11_abi,
        cuda_home_env=os.environ.get("CUDA_HOME") or None,
        cuda_home_resolved=cuda_home,
        cuda_runtime_header=bool(cuda_home)
        and (Path(cuda_home) / "include" / "cuda_runtime.h").is_file(),
        nvcc_path=nvcc,
        nvcc_version=_nvcc_version(nvcc),
        ninja_version=_ninja_version(),
        compiler=compiler,
        compiler_version=compiler_version,
        compiler_links_shared_libstdcxx=_links_shared_libstdcxx(compiler),
        gpus=_gpus(),
        arch_list_env=os.environ.get("TORCH_CUDA_ARCH_LIST") or None,
        torch_arch_list=_torch_arch_list(),
        max_jobs=os.environ.get("MAX_JOBS") or None,
        cpu_count=os.cpu_count(),
        cusparse_header=_find_cusparse_header(cuda_home),
        pip_cuda_include=_pip_cuda_include(torch.version.cuda),
        extensions_root=str(root),
        build_tag=tag,
        other_builds=other_builds,
        lock_files=lock_files,
        nvcc_arches=_nvcc_arches(nvcc),
    )


def parse_arch_list(arch_list: str) -> list[tuple[int, int, str, bool]] | None:
    """TORCH_CUDA_ARCH_LIST as torch reads it: "8.0 9.0+PTX" -> [(8, 0, "", False), (9, 0, "",
    True)]; "9.0a" -> [(9, 0, "a", False)]. None if an entry has a form torch rejects."""
    for name, arches in NAMED_ARCHES.items():
        arch_list = arch_list.replace(name, arches)
    entries = []
    for entry in re.split(r"[\s;]+", arch_list.strip()):
        match = ARCH_ENTRY.fullmatch(entry)
        if match is None:
            return None
        major, minor, suffix, ptx = match.groups()
        entries.append((int(major), int(minor), suffix, ptx is not None))
    return entries


def arch_coverage(arch_list: str, capability: tuple[int, int]) -> Literal["sass", "ptx", "none"]:
    """How a GPU of this compute capability runs kernels built for arch_list.

    "sass": machine code that runs on it (8.0 code runs on an 8.6 GPU too, but 9.0a code only on
    9.0); "ptx": only through PTX that the driver compiles at first launch; "none": "no
    kernel image is available for execution on the device".
    """
    coverage: Literal["sass", "ptx", "none"] = "none"
    for major, minor, suffix, ptx in parse_arch_list(arch_list) or []:
        same_major = major == capability[0] and minor <= capability[1]
        if (same_major and not suffix) or (major, minor) == capability:
            return "sass"
        if ptx and (major, minor) <= capability:
            coverage = "ptx"
    return coverage


def _version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def _diagnose_cuda(env: Environment) -> list[Problem]:
    problems = []
    torch_cuda = env.torch_cuda or ""
    if env.nvcc_path is None:
        problems.append(
            Problem(
                "error",
                f"nvcc not found: torch is built with CUDA {torch_cuda}, but neither "
                f"$CUDA_HOME/bin/nvcc nor an nvcc on PATH exists, so no .cu file can be compiled",
                f"install the CUDA {torch_cuda} toolkit (nvcc is enough), then "
                "`export CUDA_HOME=/usr/local/cuda` (the folder holding bin/nvcc)",
            )
        )
    else:
        if env.cuda_home_env is None:
            problems.append(
                Problem(
                    "warning",
                    f"CUDA_HOME is not set: torch guesses it from the nvcc on PATH "
                    f"({env.cuda_home_resolved})",
                    "set it explicitly: `export CUDA_HOME=/usr/local/cuda` (the folder holding "
                    "bin/nvcc and include/cuda_runtime.h)",
                )
            )
        if not env.cuda_runtime_header:
            problems.append(
                Problem(
                    "error",
                    f"torch's CUDA_HOME ({env.cuda_home_resolved}) is not a CUDA toolkit (no "
                    "include/cuda_runtime.h): CUDA builds fail to link with `cannot find "
                    "-lcudart` (an nvcc on PATH outside the toolkit misleads torch's guess)",
                    "`export CUDA_HOME=/usr/local/cuda` (the toolkit folder itself)",
                )
            )
        if env.nvcc_version is None:
            problems.append(
                Problem(
                    "warning",
                    f"could not read the version of {env.nvcc_path} (`nvcc --version` failed)",
                    f"run `{env.nvcc_path} --version` yourself; reinstall the toolkit if it fails",
                )
            )
        elif torch_cuda:
            nvcc_v, torch_v = _version_tuple(env.nvcc_version), _version_tuple(torch_cuda)
            if nvcc_v[0] != torch_v[0]:
                problems.append(
                    Problem(
                        "error",
                        f"nvcc is CUDA {env.nvcc_version} but torch is built with CUDA "
                        f"{torch_cuda}: torch refuses to build (the major versions differ)",
                        f"install the CUDA {torch_cuda} toolkit and point CUDA_HOME at it, or "
                        f"install a torch built for CUDA {nvcc_v[0]}.x",
                    )
                )
            elif nvcc_v != torch_v:
                problems.append(
                    Problem(
                        "warning",
                        f"nvcc is CUDA {env.nvcc_version}, torch is built with CUDA {torch_cuda}: "
                        "same major version, so builds work, and torch warns about it",
                        f"to silence it, use the CUDA {torch_cuda} toolkit",
                    )
                )

    # "native" asks the GPU, exactly like an unset list.
    arch_list = None if env.arch_list_env == "native" else env.arch_list_env
    if arch_list is not None and parse_arch_list(arch_list) is None:
        problems.append(
            Problem(
                "error",
                f"TORCH_CUDA_ARCH_LIST={arch_list!r} has an entry torch cannot read: builds fail "
                "with 'Unknown CUDA arch'",
                "use compute capabilities separated by ';' or spaces, e.g. "
                '`export TORCH_CUDA_ARCH_LIST="8.0;9.0+PTX"`',
            )
        )
    elif (
        arch_list is not None
        and env.nvcc_arches
        and (
            refused := [
                f"{major}.{minor}"
                for major, minor, _, _ in parse_arch_list(arch_list) or []
                if f"{major}.{minor}" not in env.nvcc_arches
            ]
        )
    ):
        problems.append(
            Problem(
                "error",
                f"TORCH_CUDA_ARCH_LIST={arch_list!r} asks for {', '.join(refused)}, which nvcc "
                f"{env.nvcc_version} does not compile for (it accepts {env.nvcc_arches[0]} to "
                f"{env.nvcc_arches[-1]}): builds fail with 'nvcc fatal : Unsupported gpu "
                "architecture'",
                f"drop {', '.join(refused)} from the list (an older CUDA toolkit still builds for "
                "it, with a torch built for that CUDA)",
            )
        )
    elif not env.gpus and arch_list is None:
        problems.append(
            Problem(
                "error",
                "no GPU is visible and TORCH_CUDA_ARCH_LIST is not set: torch asks the GPU which "
                "architecture to compile for, finds none, and the build fails with "
                "`IndexError: list index out of range`",
                "`export TORCH_CUDA_ARCH_LIST=9.0` for an H100, or the compute capability of the "
                "GPU the code will run on",
            )
        )
    elif arch_list is not None:
        for name, capability in env.gpus:
            arch = f"{capability[0]}.{capability[1]}"
            coverage = arch_coverage(arch_list, capability)
            if coverage == "none":
                problems.append(
                    Problem(
                        "error",
                        f"TORCH_CUDA_ARCH_LIST={arch_list!r} has no code for the {name} "
                        f"(compute capability {arch}): every kernel launch fails with 'no kernel "
                        "image is available for execution on the device'",
                        f"`export TORCH_CUDA_ARCH_LIST={arch}` (or add {arch} to the list), "
                        "then `make clean` and rebuild",
                    )
                )
            elif coverage == "ptx":
                problems.append(
                    Problem(
                        "warning",
                        f"TORCH_CUDA_ARCH_LIST={arch_list!r} reaches the {name} (compute "
                        f"capability {arch}) only through PTX: the driver compiles every kernel "
                        "at first launch, and timings include it",
                        f"add {arch}: `export TORCH_CUDA_ARCH_LIST={arch}`",
                    )
                )

    if env.cusparse_header is None:
        if env.pip_cuda_include:
            fix = f"`export CPATH={env.pip_cuda_include}` (the headers of torch's pip wheels)"
        else:
            fix = (
                "install the CUDA toolkit's cuBLAS/cuSPARSE headers, or `export CPATH=<site-"
                "packages>/nvidia/cu13/include` if torch's pip wheels brought them"
            )
        problems.append(
            Problem(
                "warning",
                "cusparse.h is in neither $CUDA_HOME/include nor CPATH: any extension that "
                "includes ATen/cuda/CUDAContext.h fails with 'cusparse.h: No such file' (an "
                "nvcc-only toolkit lacks the cuBLAS/cuSPARSE headers)",
                fix,
            )
        )
    return problems


def diagnose(env: Environment) -> list[Problem]:
    """Every problem a build would hit on this environment, with its fix. Pure: reads only env."""
    problems = []
    if env.torch_cuda is None:
        problems.append(
            Problem(
                "warning",
                f"torch {env.torch_version} is a CPU-only build: the CUDA parts of every "
                "chapter will be skipped (the C++ parts still build and run)",
                "for CUDA: `pip install -r requirements.txt` (on Linux x86-64 the pinned "
                "torch==2.11.0 from PyPI is the CUDA 13.0 build)",
            )
        )
    else:
        problems += _diagnose_cuda(env)

    if env.ninja_version is None:
        problems.append(
            Problem(
                "error",
                "ninja not found: torch's JIT load() needs it to build anything",
                "`pip install ninja`",
            )
        )
    if env.compiler is None:
        compiler = os.environ.get("CXX") or "c++"
        problems.append(
            Problem(
                "error",
                f"no C++ compiler: `{compiler}` is not on PATH",
                "install g++ (`sudo apt install g++`, or `conda install gxx`), or point $CXX at one",
            )
        )
    if env.compiler is not None and env.compiler_links_shared_libstdcxx is False:
        problems.append(
            Problem(
                "error",
                f"{env.compiler} links the C++ runtime (libstdc++) statically into shared "
                "libraries: an extension then carries a second copy of it next to torch's, and "
                "crashes (Segmentation fault) in iostream or locale code",
                "use the system compiler: `export CXX=c++` (or `unset CXX`), then `make clean`",
            )
        )
    if env.other_builds:
        names = ", ".join(env.other_builds)
        problems.append(
            Problem(
                "warning",
                f"{env.extensions_root} holds builds of another torch/python ({names}; this one "
                f"builds in {env.build_tag}): a module from there fails with 'undefined symbol'",
                "`make clean` removes every build",
            )
        )
    for lock in env.lock_files:
        problems.append(
            Problem(
                "warning",
                f"a build left its lock behind ({lock}): the next load() of it waits forever",
                f"if no build is running, `rm {lock}`",
            )
        )
    return problems


def _yes_no(flag: bool | None) -> str:
    return "unknown" if flag is None else ("yes" if flag else "no")


def _nvcc_line(env: Environment) -> str:
    if env.nvcc_path is None:
        return "not found"
    line = f"{env.nvcc_version or '(version unreadable)'} at {env.nvcc_path}"
    if env.torch_cuda and env.nvcc_version:
        same = _version_tuple(env.nvcc_version) == _version_tuple(env.torch_cuda)
        line += f"; matches torch: {_yes_no(same)} ({env.torch_cuda})"
    return line


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _verdict(env: Environment, problems: list[Problem]) -> str:
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors
    if errors:
        return f"Verdict: {_count(errors, 'error')}, {_count(warnings, 'warning')}: fix the errors before building."
    what = "C++ and CUDA" if env.torch_cuda else "C++ (no CUDA)"
    tail = f", {_count(warnings, 'warning')} above to read" if warnings else ""
    return f"Verdict: ready to build {what} extensions{tail}."


def _runtime_line(shared: bool | None) -> str:
    if shared is None:
        return "(not checked)"
    if shared:
        return "extensions load the shared libstdc++.so, like torch"
    return "STATIC libstdc++ linked into every extension (see the error below)"


def format_report(env: Environment, problems: list[Problem]) -> str:
    """The report `make doctor` prints: the facts, each problem with its fix, a verdict."""
    rows = [
        ("python", f"{env.python_version} ({env.python_executable})"),
        ("torch", f"{env.torch_version}, CUDA {env.torch_cuda or 'none (CPU-only build)'}"),
        ("C++11 ABI", _yes_no(env.cxx11_abi)),
        ("nvcc", _nvcc_line(env)),
        (
            "CUDA_HOME",
            f"env: {env.cuda_home_env or '(unset)'}; torch uses: "
            f"{env.cuda_home_resolved or '(none found)'}",
        ),
        ("ninja", env.ninja_version or "not found"),
        ("C++ compiler", f"{env.compiler_version} ({env.compiler})" if env.compiler else "none"),
        ("C++ runtime", _runtime_line(env.compiler_links_shared_libstdcxx)),
    ]
    if env.gpus:
        for i, (name, (major, minor)) in enumerate(env.gpus):
            rows.append(
                (
                    f"GPU {i}",
                    f"{name}, compute capability {major}.{minor}: "
                    f"use TORCH_CUDA_ARCH_LIST={major}.{minor}",
                )
            )
    else:
        rows.append(("GPU", "none visible"))
    torch_arches = " ".join(env.torch_arch_list) or "(torch lists them only with a GPU)"
    rows += [
        ("arch list", f"TORCH_CUDA_ARCH_LIST={env.arch_list_env or '(unset)'}"),
        ("torch's arches", torch_arches),
        (
            "CUDA headers",
            f"cusparse.h at {env.cusparse_header}"
            if env.cusparse_header
            else f"cusparse.h not found; pip's: {env.pip_cuda_include or '(none)'}",
        ),
    ]
    if env.max_jobs:
        rows.append(("MAX_JOBS", env.max_jobs))
    else:
        rows.append(
            (
                "MAX_JOBS",
                f"(unset): ninja runs {ninja_default_jobs(env.cpu_count)} compiles at once on "
                f"these {env.cpu_count or '?'} cores; CUDA compiles take 1-2 GB each, so on a small "
                "machine set MAX_JOBS=2",
            )
        )
    rows.append(("extensions", f"{env.extensions_root}/{env.build_tag}"))

    width = max(len(label) for label, _ in rows)
    lines = ["Build environment", *(f"  {label:<{width}}  {value}" for label, value in rows), ""]
    ordered = sorted(problems, key=lambda p: p.severity != "error")
    if ordered:
        lines.append("Problems")
        for problem in ordered:
            lines += [f"  {problem.severity.upper()}: {problem.what}", f"    fix: {problem.fix}"]
    else:
        lines.append("No problems found.")
    lines += ["", _verdict(env, problems)]
    return "\n".join(lines)


def cxx_fix() -> str:
    """ "c++" when $CXX links libstdc++ statically into shared libraries and `c++` does not (the
    course's GPU image): the fix `make tutorial`, `make test` and `make gpu-check` take for their
    run. Empty otherwise, or when $CXX is unset or already c++."""
    cxx = os.environ.get("CXX")
    if not cxx or cxx == "c++":
        return ""
    if _links_shared_libstdcxx(shutil.which(shlex.split(cxx)[0])) is not False:
        return ""
    os.environ["CXX"] = "c++"
    try:
        return "c++" if _links_shared_libstdcxx(shutil.which("c++")) else ""
    finally:
        os.environ["CXX"] = cxx


def main(argv: list[str] | None = None) -> int:
    """Print the report; 1 if any problem is an error, else 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cxx-fix",
        action="store_true",
        help="print c++ if $CXX links libstdc++ statically and c++ does not, else nothing",
    )
    if parser.parse_args(argv).cxx_fix:
        print(cxx_fix())
        return 0
    if importlib.util.find_spec("torch") is None:
        print(f"torch is not installed for {sys.executable}: run `make tutorial` (creates .venv)")
        return 1
    env = collect()
    problems = diagnose(env)
    print(format_report(env, problems))
    return int(any(p.severity == "error" for p in problems))


if __name__ == "__main__":
    sys.exit(main())
