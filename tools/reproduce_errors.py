"""Trigger the build and load failures of docs/troubleshooting.md for real, and capture them.

    python tools/reproduce_errors.py --all                   # every case -> docs/errors/<case>.txt
    python tools/reproduce_errors.py --case ninja_missing    # one case (--list names them all)

Each case writes a tiny source into /tmp/reproduce_errors/<case>, breaks the environment in one
way, builds and imports in a subprocess, and keeps what a learner sees: the error lines verbatim,
long tracebacks and compiler command lines shortened where marked "[...]", paths inside the
repository made relative. Nothing in the repository is touched but docs/errors/. `no_kernel_image`,
`invalid_configuration` and `different_devices` need a GPU; without one each says so and leaves its
file alone.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ERRORS_DIR = REPO / "docs" / "errors"
WORK_ROOT = Path("/tmp/reproduce_errors")
PYTHON = sys.executable
PYTHON_BIN = Path(sys.executable).parent
RUN_TIMEOUT_S = 300
# Shortening: a traceback keeps its first frame (the user's line) and its last frames (where it
# failed); a line longer than this (a compiler command) keeps its start and its end.
KEEP_LAST_FRAMES = 2
LONG_LINE = 240

ADD_ONE_CU = """\
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

__global__ void add_one_kernel(float* x, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

void add_one_(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat && x.is_contiguous(),
              "add_one_: x must be a contiguous float32 CUDA tensor");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t n = x.numel();
  const int threads = 256;
  const auto blocks = static_cast<unsigned>((n + threads - 1) / threads);
  add_one_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add_one_", &add_one_); }
"""

# load() of a .cu file: what every CUDA case builds.
BUILD_ADD_ONE = """\
from torch.utils.cpp_extension import load

add_one = load(name="add_one", sources=["add_one.cu"], build_directory="build")
"""

SETUP_ADD_ONE = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="add_one",
    ext_modules=[CUDAExtension("add_one", ["add_one.cu"])],
    cmdclass={"build_ext": BuildExtension},
)
"""

# The banner of a real CUDA 12.4 nvcc; the fake prints it and does nothing else.
FAKE_NVCC_12_4 = """\
#!/bin/sh
cat <<'BANNER'
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2024 NVIDIA Corporation
Built on Thu_Mar_28_02:18:24_PDT_2024
Cuda compilation tools, release 12.4, V12.4.131
Build cuda_12.4.r12.4/compiler.34097967_0
BANNER
"""

# pybind11 alone compiles in seconds (torch/extension.h takes ~20 s); load() adds the include path.
UNDEFINED_SYMBOL_CPP = """\
#include <pybind11/pybind11.h>

namespace course {
double scale(double x, int times);  // declared, so this compiles; defined nowhere, so no code
}

double scale_twice(double x) { return course::scale(x, 2); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale_twice", &scale_twice); }
"""

# A kernel with no includes: nvcc compiles it in seconds, and load() still links the CUDA runtime.
EMPTY_KERNEL_CU = "__global__ void do_nothing() {}\n"

HELLO_CPP = """\
#include <pybind11/pybind11.h>

int answer() { return 42; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("answer", &answer); }
"""

BUILD_HELLO = """\
from torch.utils.cpp_extension import load

hello = load(name="hello", sources=["hello.cpp"], build_directory="build")
print("hello.answer() =", hello.answer())
"""

HEAVY_CPP = """\
#include <torch/extension.h>

torch::Tensor twice(torch::Tensor x) { return x * 2; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("twice", &twice); }
"""

BUILD_HEAVY = """\
from torch.utils.cpp_extension import load

heavy = load(name="heavy", sources=["heavy.cpp"], build_directory="build")
"""

GREET_H = 'inline const char* punctuation() { return "!"; }\n'

GREET_CPP = """\
#include <pybind11/pybind11.h>
#include <string>
#include "greet.h"

std::string greet() { return std::string("version 1") + punctuation(); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("greet", &greet); }
"""

# One Python process playing a notebook's kernel: each "[n]" is a cell.
NOTEBOOK = """\
import importlib
import pathlib
import time

from torch.utils.cpp_extension import load


def cell(n, text):
    print(f"[{n}] {text}")


def load_greet():
    start = time.perf_counter()
    module = load(name="greet", sources=["greet.cpp"], build_directory="build")
    print(f"    load() took {time.perf_counter() - start:.1f} s")
    return module


cell(1, "greet = load(name='greet', sources=['greet.cpp'], build_directory='build')")
greet = load_greet()
print(f"    -> module {greet.__name__}, greet.greet() = {greet.greet()!r}")

cell(2, "edit greet.cpp ('version 1' -> 'version 2'), run the load() cell again")
source = pathlib.Path("greet.cpp")
source.write_text(source.read_text().replace("version 1", "version 2"))
new_greet = load_greet()
print(f"    -> module {new_greet.__name__}, greet() = {new_greet.greet()!r}")
print(f"    the old module object still runs the old code: greet.greet() = {greet.greet()!r}")

cell(3, "importlib.reload(greet)")
try:
    importlib.reload(greet)
except ImportError as error:
    print(f"    {type(error).__name__}: {error}")

cell(4, "edit only greet.h ('!' -> '?'), run the load() cell again")
pathlib.Path("greet.h").write_text('inline const char* punctuation() { return "?"; }\\n')
after_header_edit = load_greet()
print(f"    -> module {after_header_edit.__name__}, greet() = {after_header_edit.greet()!r}")
"""

FRESH_KERNEL = """\
from torch.utils.cpp_extension import load

greet = load(name="greet", sources=["greet.cpp"], build_directory="build")
print(f"    -> module {greet.__name__}, greet.greet() = {greet.greet()!r}")
"""


@dataclass(frozen=True)
class Run:
    """One subprocess: what it printed (stdout and stderr interleaved) and how it ended."""

    output: str
    returncode: int | None  # None: still running at the timeout (then interrupted)
    seconds: float


def run(
    command: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout_s: float = RUN_TIMEOUT_S,
    interrupt_after_s: float | None = None,
) -> Run:
    """Run command; with interrupt_after_s, send it Ctrl-C (SIGINT) then, as a user would."""
    start = time.perf_counter()
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=interrupt_after_s or timeout_s)
        return Run(output, process.returncode, time.perf_counter() - start)
    except subprocess.TimeoutExpired:
        if interrupt_after_s is None:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            return Run(output + f"\n[killed after {timeout_s:.0f} s]", None, timeout_s)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=30)
    return Run(output, None, time.perf_counter() - start)


def is_caret_line(line: str) -> bool:
    """Python 3.11's ^^^^ markers under a traceback's code line."""
    stripped = line.strip()
    return bool(stripped) and set(stripped) <= {"^", "~"}


def shorten_tracebacks(lines: list[str]) -> list[str]:
    """Keep each traceback's first frame and last KEEP_LAST_FRAMES frames; cut the middle."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        header = re.match(r"^(\s*)Traceback \(most recent call last\):", lines[i])
        if header is None:
            out.append(lines[i])
            i += 1
            continue
        indent = header.group(1)
        out.append(lines[i])
        i += 1
        frames: list[list[str]] = []
        while i < len(lines) and lines[i].startswith(indent + "  "):
            if lines[i].startswith(indent + '  File "'):
                frames.append([])
            if frames and not is_caret_line(lines[i]):
                frames[-1].append(lines[i])
            i += 1
        cut = len(frames) - 1 - KEEP_LAST_FRAMES
        if cut > 1:
            frames = [
                frames[0],
                [f"{indent}  [... {cut} frames cut ...]"],
                *frames[-KEEP_LAST_FRAMES:],
            ]
        out += [line for frame in frames for line in frame]
    return out


def shorten_line(line: str) -> str:
    if len(line) <= LONG_LINE:
        return line
    cut = len(line) - 150 - 70
    return f"{line[:150]} [... {cut} characters cut ...] {line[-70:]}"


def tidy(text: str, drop: tuple[str, ...] = ()) -> str:
    """The output as a learner reads it, shortened: see the module docstring."""
    text = text.replace(f"{REPO}/", "")
    lines = [line.rstrip() for line in text.splitlines()]
    # Every run on a machine without a GPU starts with torch's warning "No CUDA runtime is
    # found, using CUDA_HOME=..."; the cases about CUDA_HOME keep it (drop=()), the others not.
    lines = [line for line in lines if not any(re.search(p, line) for p in drop)]
    return "\n".join(shorten_line(line) for line in shorten_tracebacks(lines)).strip("\n")


NO_CUDA_RUNTIME = (r"No CUDA runtime is found",)


def workdir(case: str) -> Path:
    """An empty folder for the case, outside the repository, with an empty build/ in it (load()
    does not create its build_directory: case build_dir_missing)."""
    folder = WORK_ROOT / case
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "build").mkdir(parents=True)
    return folder


def write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).write_text(text)


def default_cuda_home() -> str | None:
    """CUDA_HOME as the Makefile sets it: the environment's, else /usr/local/cuda if it has nvcc."""
    if os.environ.get("CUDA_HOME"):
        return os.environ["CUDA_HOME"]
    return "/usr/local/cuda" if Path("/usr/local/cuda/bin/nvcc").is_file() else None


def gpu_capability() -> tuple[str, tuple[int, int]] | None:
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name(0), tuple(torch.cuda.get_device_capability(0))


def base_env(folder: Path) -> dict[str, str]:
    """A working build environment (the Makefile's), each case then breaks one thing in it."""
    env = dict(os.environ)
    # torch runs `ninja` from PATH; the venv's is next to this Python.
    env["PATH"] = f"{PYTHON_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["TORCH_EXTENSIONS_DIR"] = str(folder / "torch_extensions")
    env["PYTHONUNBUFFERED"] = "1"  # keep print() and tracebacks in the order they happened
    cuda_home = default_cuda_home()
    if cuda_home:
        env["CUDA_HOME"] = cuda_home
    if "TORCH_CUDA_ARCH_LIST" not in env and gpu_capability() is None:
        env["TORCH_CUDA_ARCH_LIST"] = "9.0"
    return env


def path_without(program: str, path: str) -> str:
    """PATH without the folders that hold program."""
    folders = [d for d in path.split(os.pathsep) if d and not (Path(d) / program).exists()]
    return os.pathsep.join(folders)


def shown(run_: Run, command: str, drop: tuple[str, ...] = NO_CUDA_RUNTIME) -> str:
    """The capture of one run: the command as a user would type it, then what it printed."""
    status = "still waiting" if run_.returncode is None else f"exit status {run_.returncode}"
    return f"$ {command}\n{tidy(run_.output, drop)}\n[{status}, {run_.seconds:.0f} s]"


# ---------------------------------------------------------------------------------------------
# The cases. Each returns (how it was triggered, the capture), or raises Skip.


class Skip(Exception):
    """This machine cannot reproduce the case; the message says why."""


def cuda_home_unset() -> tuple[str, str]:
    folder = workdir("cuda_home_unset")
    write(folder, {"add_one.cu": ADD_ONE_CU, "build.py": BUILD_ADD_ONE})
    env = base_env(folder)
    env.pop("CUDA_HOME", None)
    env.pop("CUDA_PATH", None)
    env["PATH"] = path_without("nvcc", env["PATH"])
    command = [PYTHON, "build.py"]
    how = "CUDA_HOME unset and no nvcc on PATH"
    # With neither, torch still tries /usr/local/cuda: hide /usr/local in a private mount
    # namespace (root only) so that the toolkit is really absent, as on a machine without one.
    if Path("/usr/local/cuda").exists():
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            raise Skip("/usr/local/cuda exists and cannot be hidden (needs root and unshare)")
        if Path(PYTHON).resolve().is_relative_to("/usr/local"):
            raise Skip("this Python lives in /usr/local, which the case hides")
        command = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            'mount -t tmpfs tmpfs /usr/local && exec "$@"',
            "sh",
            *command,
        ]
        how += "; /usr/local (and so /usr/local/cuda) hidden by an empty tmpfs (unshare --mount)"
    first = run(command, folder, env)

    # The other face of it: CUDA_HOME names a toolkit that is not there (a version uninstalled).
    env["CUDA_HOME"] = str(folder / "cuda-12.4")
    second = run([PYTHON, "build.py"], folder, env)
    how += f"\n# then CUDA_HOME set to a folder that does not exist ({env['CUDA_HOME']})"
    capture = "\n\n".join(
        [
            shown(first, "env -u CUDA_HOME python build.py    # no toolkit, no nvcc on PATH", ()),
            shown(second, f"CUDA_HOME={env['CUDA_HOME']} python build.py", ()),
        ]
    )
    return how, capture


def nvcc_version_mismatch() -> tuple[str, str]:
    folder = workdir("nvcc_version_mismatch")
    fake_cuda = folder / "fake_cuda_12.4"
    (fake_cuda / "bin").mkdir(parents=True)
    write(fake_cuda / "bin", {"nvcc": FAKE_NVCC_12_4})
    (fake_cuda / "bin" / "nvcc").chmod(0o755)
    (folder / "add_one").mkdir()
    write(folder / "add_one", {"add_one.cu": ADD_ONE_CU, "setup.py": SETUP_ADD_ONE})
    env = base_env(folder)
    env["CUDA_HOME"] = str(fake_cuda)
    pip = [PYTHON, "-m", "pip", "install", "--disable-pip-version-check", "--no-build-isolation"]
    target = ["--no-deps", "--target", str(folder / "installed")]
    result = run([*pip, *target, "./add_one"], folder, env)
    # pip's own index settings ("Looking in indexes: ...") are this machine's, not the error's.
    drop = (*NO_CUDA_RUNTIME, r"^Looking in (indexes|links):")
    how = (
        f"CUDA_HOME={fake_cuda}: its bin/nvcc is a shell script that prints the\n"
        "# `nvcc --version` banner of CUDA 12.4 (this machine has CUDA 13.0 only); torch is built "
        "with 13.0"
    )
    command = f"CUDA_HOME={fake_cuda} pip install --no-build-isolation ./add_one"
    return how, shown(result, command, drop)


def undefined_symbol() -> tuple[str, str]:
    folder = workdir("undefined_symbol")
    build = """\
from torch.utils.cpp_extension import load

scaling = load(name="scaling", sources=["scaling.cpp"], build_directory="build")
"""
    write(folder, {"scaling.cpp": UNDEFINED_SYMBOL_CPP, "build.py": build})
    env = base_env(folder)
    result = run([PYTHON, "build.py"], folder, env)
    capture = [shown(result, "python build.py")]
    symbol = re.search(r"undefined symbol: (\S+)", result.output)
    if symbol is None:
        raise RuntimeError(f"no 'undefined symbol' in the output:\n{result.output}")
    library = folder / "build" / "scaling.so"
    for command in (["nm", "-D", "--undefined-only", str(library)], ["c++filt", symbol.group(1)]):
        if shutil.which(command[0]) is None:
            continue
        lines = run(command, folder, env).output.splitlines()
        if command[0] == "nm":  # the extension's own symbols, not libc's or Python's
            lines = [line for line in lines if "course" in line or "scale" in line]
        capture.append(f"$ {' '.join(command)}\n" + "\n".join(lines))
    how = "scaling.cpp declares course::scale(double, int), calls it, and defines it nowhere"
    return how, "\n\n".join(capture)


ABI_CPP = """\
#include <torch/extension.h>

// TORCH_CHECK's message is a std::string, passed to a function inside libtorch.
int64_t positive(int64_t x) {
  TORCH_CHECK(x > 0, "positive: x must be > 0, got ", x);
  return x;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("positive", &positive); }
"""


def abi_mismatch() -> tuple[str, str]:
    """An extension compiled with the other std::string ABI than its torch: the symbol it asks
    libtorch for has a name libtorch does not have. Another torch (or a prebuilt .so from
    elsewhere) fails the same way."""
    folder = workdir("abi_mismatch")
    build = """\
from torch.utils.cpp_extension import load

positive = load(name="positive", sources=["positive.cpp"], build_directory="build",
                extra_cflags=["-D_GLIBCXX_USE_CXX11_ABI=0"])
"""
    write(folder, {"positive.cpp": ABI_CPP, "build.py": build})
    env = base_env(folder)
    result = run([PYTHON, "build.py"], folder, env)
    capture = [shown(result, "python build.py")]
    symbol = re.search(r"undefined symbol: (\S+)", result.output)
    if symbol is None:
        raise RuntimeError(f"no 'undefined symbol' in the output:\n{result.output}")
    if shutil.which("c++filt"):
        demangled = run(["c++filt", symbol.group(1)], folder, env).output.strip()
        capture.append(f"$ c++filt {symbol.group(1)}\n{demangled}")
    how = (
        "positive.cpp built with -D_GLIBCXX_USE_CXX11_ABI=0, against a torch built with the "
        "new ABI (=1)"
    )
    return how, "\n\n".join(capture)


def ninja_missing() -> tuple[str, str]:
    folder = workdir("ninja_missing")
    write(folder, {"hello.cpp": HELLO_CPP, "build.py": BUILD_HELLO})
    env = base_env(folder)
    # The compiler stays reachable; every folder with a ninja in it (the venv's bin, and
    # /usr/bin where a system ninja is installed) goes.
    tools = folder / "bin"
    tools.mkdir()
    for program in ("c++", "cc", "g++", "gcc"):
        found = shutil.which(program, path=env["PATH"])
        if found:
            (tools / program).symlink_to(found)
    env["PATH"] = os.pathsep.join([str(tools), path_without("ninja", env["PATH"])])
    result = run([PYTHON, "build.py"], folder, env)
    how = "PATH has the compiler but no ninja (like .venv/bin/python run outside the venv)"
    return how, shown(result, ".venv/bin/python build.py    # PATH without .venv/bin")


def nvcc_outside_toolkit() -> tuple[str, str]:
    folder = workdir("nvcc_outside_toolkit")
    cuda_home = default_cuda_home()
    if cuda_home is None:
        raise Skip("no CUDA toolkit to call")
    build = BUILD_HELLO.replace('sources=["hello.cpp"]', 'sources=["hello.cpp", "kernel.cu"]')
    write(folder, {"hello.cpp": HELLO_CPP, "kernel.cu": EMPTY_KERNEL_CU, "build.py": build})
    # An nvcc that works but lives outside the toolkit: a script that runs the real one, as
    # /usr/local/bin/nvcc does on some machines. torch takes the folder above it for CUDA_HOME.
    tools = folder / "elsewhere" / "bin"
    tools.mkdir(parents=True)
    write(tools, {"nvcc": f'#!/bin/sh\nexec {cuda_home}/bin/nvcc "$@"\n'})
    (tools / "nvcc").chmod(0o755)
    env = base_env(folder)
    env.pop("CUDA_HOME", None)
    env.pop("CUDA_PATH", None)
    env["PATH"] = os.pathsep.join([str(tools), path_without("nvcc", env["PATH"])])
    result = run([PYTHON, "build.py"], folder, env)
    how = f"CUDA_HOME unset; the only nvcc on PATH is {tools}/nvcc, a script running the real one"
    return how, shown(result, "env -u CUDA_HOME python build.py", ())


def build_dir_missing() -> tuple[str, str]:
    folder = workdir("build_dir_missing")
    write(folder, {"hello.cpp": HELLO_CPP, "build.py": BUILD_HELLO})
    (folder / "build").rmdir()
    result = run([PYTHON, "build.py"], folder, base_env(folder))
    return "load(build_directory='build') where build/ does not exist yet", shown(
        result, "python build.py    # no build/ folder yet"
    )


def stale_lock() -> tuple[str, str]:
    folder = workdir("stale_lock")
    write(folder, {"hello.cpp": HELLO_CPP, "build.py": BUILD_HELLO})
    env = base_env(folder)
    lock = folder / "build" / "lock"
    # A build killed while it compiles, as by a notebook kernel restarted mid-build or a closed
    # terminal: load() holds build/lock while it builds, and only a clean exit removes it.
    start = time.perf_counter()
    process = subprocess.Popen(
        [PYTHON, "build.py"],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    while not lock.exists() and process.poll() is None and time.perf_counter() - start < 120:
        time.sleep(0.05)
    time.sleep(0.5)  # into the compile
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    killed_after = time.perf_counter() - start
    left = sorted(p.name for p in (folder / "build").iterdir())
    capture = [
        f"$ python build.py    # killed (SIGKILL) {killed_after:.1f} s into the build\n"
        f"$ ls build\n{'  '.join(left)}"
    ]
    if "lock" not in left:
        raise RuntimeError("the killed build left no lock file behind")
    waiting = 20
    waited = run([PYTHON, "build.py"], folder, env, interrupt_after_s=waiting)
    capture.append(
        shown(waited, f"python build.py    # no output for {waiting} s, then Ctrl-C (SIGINT)")
    )
    lock.unlink()
    fixed = run([PYTHON, "build.py"], folder, env)
    capture.append(shown(fixed, "rm build/lock && python build.py"))
    how = "a build killed mid-compile, then the same load() again"
    return how, "\n\n".join(capture)


def arch_list_unset() -> tuple[str, str]:
    if gpu_capability() is not None:
        raise Skip("a GPU is visible: torch asks it for the arch, so this error cannot happen")
    folder = workdir("arch_list_unset")
    write(folder, {"add_one.cu": ADD_ONE_CU, "build.py": BUILD_ADD_ONE})
    env = base_env(folder)
    env.pop("TORCH_CUDA_ARCH_LIST", None)
    if "CUDA_HOME" not in env:
        raise Skip("no CUDA toolkit (CUDA_HOME) to build with")
    result = run([PYTHON, "build.py"], folder, env)
    how = "no GPU, TORCH_CUDA_ARCH_LIST unset, a .cu file built with load()"
    return how, shown(result, "env -u TORCH_CUDA_ARCH_LIST python build.py    # no GPU here")


def no_kernel_image() -> tuple[str, str]:
    gpu = gpu_capability()
    if gpu is None:
        raise Skip(
            "no GPU: run it on a GPU machine (python tools/reproduce_errors.py --case "
            "no_kernel_image); docs/errors/no_kernel_image.txt is left as it is"
        )
    name, (major, _) = gpu
    # SASS runs only on GPUs of its own major version: 8.0 code cannot run on a 9.0 (H100), and
    # no "+PTX" means no portable code for the driver to compile instead.
    arch = "8.0" if major != 8 else "9.0"
    folder = workdir("no_kernel_image")
    runner = BUILD_ADD_ONE + (
        "import torch\n\n"
        'x = torch.zeros(4, device="cuda")\n'
        "add_one.add_one_(x)\n"
        "torch.cuda.synchronize()\n"
        "print(x)\n"
    )
    write(folder, {"add_one.cu": ADD_ONE_CU, "run.py": runner})
    env = base_env(folder)
    env["TORCH_CUDA_ARCH_LIST"] = arch
    if "CUDA_HOME" not in env:
        raise Skip("no CUDA toolkit (CUDA_HOME) to build with")
    result = run([PYTHON, "run.py"], folder, env)
    how = f"built with TORCH_CUDA_ARCH_LIST={arch} (no +PTX), run on the {name}"
    return how, shown(result, f"TORCH_CUDA_ARCH_LIST={arch} python run.py")


def compile_oom() -> tuple[str, str]:
    folder = workdir("compile_oom")
    write(folder, {"heavy.cpp": HEAVY_CPP, "build.py": BUILD_HEAVY})
    env = base_env(folder)
    compiler = shutil.which("c++", path=env["PATH"])
    if compiler is None:
        raise Skip("no c++ compiler on PATH")
    limit_mib = 512
    # The limit goes on the compiler alone (Python with torch maps more address space than
    # that): a `c++` first on PATH that lowers its own limit, then runs the real one.
    tools = folder / "bin"
    tools.mkdir()
    write(tools, {"c++": f'#!/bin/sh\nulimit -v {limit_mib * 1024}\nexec {compiler} "$@"\n'})
    (tools / "c++").chmod(0o755)
    env["PATH"] = f"{tools}{os.pathsep}{env['PATH']}"
    # One job at a time (torch passes MAX_JOBS to ninja as -j): the total stays what one
    # compile needs, and here even one is too many.
    env["MAX_JOBS"] = "1"
    result = run([PYTHON, "build.py"], folder, env)
    how = (
        f"every c++ process limited to {limit_mib} MiB of address space (ulimit -v); "
        "heavy.cpp includes torch/extension.h\n# (which needs ~1.4 GB to compile with g++ 12)"
    )
    return how, shown(
        result, f"MAX_JOBS=1 python build.py    # compiler limited to {limit_mib} MiB"
    )


def stale_module() -> tuple[str, str]:
    folder = workdir("stale_module")
    write(
        folder,
        {
            "greet.h": GREET_H,
            "greet.cpp": GREET_CPP,
            "notebook.py": NOTEBOOK,
            "fresh_kernel.py": FRESH_KERNEL,
        },
    )
    env = base_env(folder)
    notebook = run([PYTHON, "notebook.py"], folder, env)
    fresh = run([PYTHON, "fresh_kernel.py"], folder, env)
    listing = "  ".join(sorted(p.name for p in (folder / "build").glob("*.so")))
    capture = "\n\n".join(
        [
            shown(notebook, "python notebook.py    # one process, as one Jupyter kernel"),
            shown(fresh, "python fresh_kernel.py    # a new process: a restarted kernel"),
            f"$ ls build/*.so\n{listing}",
        ]
    )
    return "one Python process loads greet.cpp, the sources change, it loads again", capture


def extension_h_missing() -> tuple[str, str]:
    folder = workdir("extension_h_missing")
    write(folder, {"heavy.cpp": HEAVY_CPP})
    env = base_env(folder)
    compiler = shutil.which("c++", path=env["PATH"])
    if compiler is None:
        raise Skip("no c++ compiler on PATH")
    # What a first try outside torch's build helpers looks like: the compiler alone, which knows
    # nothing of the headers inside torch's wheel.
    result = run(["c++", "-std=c++17", "-fPIC", "-c", "heavy.cpp"], folder, env)
    return "heavy.cpp compiled by c++ directly, without load(), setup.py or CMake", shown(
        result, "c++ -std=c++17 -fPIC -c heavy.cpp"
    )


def unsupported_arch() -> tuple[str, str]:
    folder = workdir("unsupported_arch")
    build = BUILD_HELLO.replace('sources=["hello.cpp"]', 'sources=["hello.cpp", "kernel.cu"]')
    write(folder, {"hello.cpp": HELLO_CPP, "kernel.cu": EMPTY_KERNEL_CU, "build.py": build})
    env = base_env(folder)
    if "CUDA_HOME" not in env:
        raise Skip("no CUDA toolkit (CUDA_HOME) to build with")
    # 7.0 (V100) is the newest architecture that CUDA 13 dropped: a list written for an older
    # toolkit, or copied from an older README, names it.
    env["TORCH_CUDA_ARCH_LIST"] = "7.0"
    result = run([PYTHON, "build.py"], folder, env)
    how = "TORCH_CUDA_ARCH_LIST=7.0 (V100) with nvcc 13, which no longer compiles for it"
    return how, shown(result, "TORCH_CUDA_ARCH_LIST=7.0 python build.py")


def invalid_configuration() -> tuple[str, str]:
    gpu = gpu_capability()
    if gpu is None:
        raise Skip("no GPU: run it on a GPU machine (--case invalid_configuration)")
    folder = workdir("invalid_configuration")
    # The block size becomes an argument, so that one build shows both mistakes: a grid of zero
    # blocks (an empty tensor, n = 0, reaching a launch) and a block of more than 1024 threads.
    source = ADD_ONE_CU.replace(
        "void add_one_(torch::Tensor x) {", "void add_one_(torch::Tensor x, int64_t threads) {"
    )
    source = source.replace("  const int threads = 256;\n", "")
    runner = BUILD_ADD_ONE + (
        "import torch\n\n"
        "for n, threads in [(0, 256), (4096, 2048)]:\n"
        "    try:\n"
        '        add_one.add_one_(torch.zeros(n, device="cuda"), threads)\n'
        "    except RuntimeError as error:\n"
        '        print(f"n = {n}, {threads} threads a block: {type(error).__name__}: {error}")\n'
    )
    write(folder, {"add_one.cu": source, "run.py": runner})
    env = base_env(folder)
    if "CUDA_HOME" not in env:
        raise Skip("no CUDA toolkit (CUDA_HOME) to build with")
    result = run([PYTHON, "run.py"], folder, env)
    how = (
        f"add_one.cu launched on an empty tensor (0 blocks), then with 2048 threads a block (the "
        f"limit is 1024), on the {gpu[0]}"
    )
    return how, shown(result, "python run.py")


def different_devices() -> tuple[str, str]:
    if gpu_capability() is None:
        raise Skip("no GPU: run it on a GPU machine (--case different_devices)")
    folder = workdir("different_devices")
    runner = (
        "import sys\n\nimport torch\n\n"
        f"sys.path.insert(0, {str(REPO / 'chapter5_extensions')!r})\n"
        "import custom_ops  # chapter 5's package, built in place\n\n"
        'x = torch.randn(8, 4, device="cuda")\n'
        "bias = torch.randn(4)  # forgotten on the CPU\n"
        "try:\n"
        "    torch.nn.functional.linear(x, torch.randn(4, 4))\n"
        "except RuntimeError as error:\n"
        '    print(f"PyTorch\'s linear: {error}")\n'
        "custom_ops.fused_bias_relu(x, bias, 1.0)\n"
    )
    write(folder, {"run.py": runner})
    result = run([PYTHON, "run.py"], folder, base_env(folder))
    how = "a CUDA activation with a CPU weight (PyTorch's linear), then a CPU bias (custom_ops)"
    return how, shown(result, "python run.py")


CASES: dict[str, Callable[[], tuple[str, str]]] = {
    "cuda_home_unset": cuda_home_unset,
    "nvcc_outside_toolkit": nvcc_outside_toolkit,
    "nvcc_version_mismatch": nvcc_version_mismatch,
    "undefined_symbol": undefined_symbol,
    "abi_mismatch": abi_mismatch,
    "ninja_missing": ninja_missing,
    "build_dir_missing": build_dir_missing,
    "stale_lock": stale_lock,
    "arch_list_unset": arch_list_unset,
    "no_kernel_image": no_kernel_image,
    "compile_oom": compile_oom,
    "stale_module": stale_module,
    "extension_h_missing": extension_h_missing,
    "unsupported_arch": unsupported_arch,
    "invalid_configuration": invalid_configuration,
    "different_devices": different_devices,
}


def machine_line() -> str:
    """`# captured <date> on <machine>, torch <v>, nvcc <v>, <GPU or no GPU>`."""
    import torch

    cuda_home = default_cuda_home()
    banner = ""
    if cuda_home:
        nvcc = subprocess.run(
            [str(Path(cuda_home) / "bin" / "nvcc"), "--version"], capture_output=True, text=True
        )
        banner = nvcc.stdout
    release = re.search(r"release (\d+\.\d+)", banner)
    gpu = gpu_capability()
    device = f"{gpu[0]} ({gpu[1][0]}.{gpu[1][1]})" if gpu else "no GPU"
    return (
        f"# captured {datetime.date.today().isoformat()} on {platform.machine()}, "
        f"torch {torch.__version__}, nvcc {release.group(1) if release else 'none'}, {device}"
    )


def capture_case(name: str, header: str) -> bool:
    """Run one case and write docs/errors/<name>.txt; False if it was skipped."""
    print(f"--- {name}", flush=True)
    start = time.perf_counter()
    try:
        how, capture = CASES[name]()
    except Skip as skip:
        print(f"    skipped: {skip}")
        return False
    ERRORS_DIR.mkdir(parents=True, exist_ok=True)
    text = f"{header}\n# how: {how}\n\n{capture}\n"
    (ERRORS_DIR / f"{name}.txt").write_text(text)
    print(text)
    print(f"    wrote docs/errors/{name}.txt ({time.perf_counter() - start:.0f} s)")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--case", choices=sorted(CASES), action="append", help="one case")
    group.add_argument("--all", action="store_true", help="every case")
    group.add_argument("--list", action="store_true", help="print the case names")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(CASES))
        return 0
    start = time.perf_counter()
    header = machine_line()
    names = list(CASES) if args.all else args.case
    skipped = [name for name in names if not capture_case(name, header)]
    print(f"\n{len(names) - len(skipped)} captured, {len(skipped)} skipped", end="")
    print(f" ({', '.join(skipped)})" if skipped else "", end="")
    print(f", {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
