"""The ABI audit: which symbols a built extension imports from outside itself, and whether any of
them is a C++ symbol of ATen, c10 or torch, whose mangled name and layout change between releases.
A library that imports only the stable C shim loads in every torch that keeps the shim.

    python chapter5_extensions/stable/abi_audit.py custom_ops_stable/_C.abi3.so   # prints, exits 1 on a violation
    python chapter5_extensions/stable/abi_audit.py --fixture   # builds a .so that calls at::ones and audits it

Allowed: the stable C shim (aoti_torch_*, torch_* C functions), Python's C API (Py*), the CUDA
runtime (cuda*, __cuda*), and the C/C++ runtime (libc, libstdc++'s std:: and ABI, libgcc).
Forbidden: every other mangled C++ name, in particular at::, c10::, torch:: and caffe2::.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

# Unmangled (C) names by where they come from. An unmangled name can only be a C function, and
# libtorch's C functions are the shim.
C_NAME_KINDS = [
    ("stable C shim", re.compile(r"^(aoti_torch_|torch_)")),
    ("Python C API", re.compile(r"^_?Py")),
    ("CUDA runtime", re.compile(r"^_{0,2}cuda")),
]
# Demangled C++ names the C++ runtime provides (libstdc++, libsupc++, libgcc).
CXX_RUNTIME = re.compile(
    r"^((typeinfo|typeinfo name|vtable|VTT|construction vtable) for )?"
    r"(std::|__cxxabiv1::|__gnu_cxx::|operator new|operator delete)"
)
# A torch C++ name anywhere in the demangled symbol, e.g. at::ones(...), typeinfo for c10::Error,
# or a std:: template instantiated on a c10 type.
TORCH_CXX = re.compile(r"(?<![\w:])(at|c10|torch|caffe2)::")


@dataclass
class Audit:
    path: Path
    allowed: dict[str, list[str]] = field(default_factory=dict)
    forbidden: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.forbidden

    def report(self) -> str:
        lines = [f"{self.path}: {sum(map(len, self.allowed.values()))} undefined symbols allowed"]
        for kind, names in sorted(self.allowed.items()):
            lines.append(f"  {kind}: {len(names)}")
        if self.forbidden:
            lines.append(f"  FORBIDDEN (not in the stable ABI): {len(self.forbidden)}")
            lines += [f"    {name}" for name in self.forbidden[:20]]
        return "\n".join(lines)


def undefined_symbols(path: Path) -> list[tuple[str, str]]:
    """(raw name without its @version, demangled name) of each symbol the .so imports."""
    raw = subprocess.run(
        ["nm", "-D", "--undefined-only", "--format=posix", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    names = [line.split()[0].split("@")[0] for line in raw if line.strip()]
    demangled = subprocess.run(
        ["c++filt"], input="\n".join(names), check=True, capture_output=True, text=True
    ).stdout.split("\n")
    return list(zip(names, demangled, strict=False))


def audit(path: Path) -> Audit:
    result = Audit(Path(path))
    for name, demangled in undefined_symbols(Path(path)):
        if name.startswith("_Z"):
            if TORCH_CXX.search(demangled) or not CXX_RUNTIME.match(demangled):
                result.forbidden.append(demangled)
            else:
                result.allowed.setdefault("C++ runtime", []).append(name)
            continue
        kind = next((k for k, pattern in C_NAME_KINDS if pattern.match(name)), "C runtime")
        result.allowed.setdefault(kind, []).append(name)
    return result


FIXTURE_SOURCE = """\
// Not stable: calls ATen's C++ API, whose symbols change with every torch release.
#include <ATen/ops/ones.h>
at::Tensor make_ones() { return at::ones({2, 3}); }
"""


def build_fixture(folder: Path) -> Path:
    """A tiny .so that uses an unstable symbol (at::ones), compiled with torch's headers."""
    from torch.utils.cpp_extension import include_paths

    source = folder / "unstable_fixture.cpp"
    source.write_text(FIXTURE_SOURCE)
    library = folder / "unstable_fixture.so"
    includes = [f"-I{p}" for p in include_paths()]
    subprocess.run(
        [
            "c++",
            "-std=c++17",
            "-shared",
            "-fPIC",
            "-O0",
            *includes,
            str(source),
            "-o",
            str(library),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return library


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("libraries", nargs="*", type=Path, help=".so files to audit")
    parser.add_argument("--fixture", action="store_true", help="also audit the at::ones fixture")
    args = parser.parse_args()
    libraries = list(args.libraries)
    if not libraries and not args.fixture:
        libraries = sorted((Path(__file__).parent / "custom_ops_stable").glob("_C*.so"))
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        if args.fixture:
            fixture = audit(build_fixture(Path(tmp)))
            print(fixture.report())
            print("fixture:", "caught" if not fixture.ok else "NOT CAUGHT (the audit is broken)")
            failed |= fixture.ok
        for library in libraries:
            result = audit(library)
            print(result.report())
            failed |= not result.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
