"""Scaffold a new custom_ops operator: its C++ schema and CPU kernel, its CUDA kernel, its Python
wrapper with fake kernel and autograd, and a test, from the files in templates/.

    python chapter5_extensions/examples/scaffold.py my_op [--dest DIR]     # DIR defaults to ./my_op

The new op computes y = x * alpha, so that it builds and passes its tests from the first minute;
replace that with your operation in all four files (the test's reference first). To ship it in
the package, move my_op.cpp to csrc/, my_op.cu to csrc/cuda/, my_op.py to custom_ops/ and import
it in custom_ops/__init__.py: setup.py compiles whatever csrc/ holds.
"""

from __future__ import annotations

import argparse
import keyword
import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent / "templates"
OUTPUTS = {
    "op.cpp.in": "{name}.cpp",
    "op.cu.in": "{name}.cu",
    "op.py.in": "{name}.py",
    "test_op.py.in": "test_{name}.py",
}


def scaffold(name: str, dest: Path) -> list[Path]:
    """Write the four files for operator `name` into dest; return their paths."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or keyword.iskeyword(name):
        raise ValueError(f"scaffold: {name!r} is not a valid op name (lowercase, digits, _)")
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for template, output in OUTPUTS.items():
        path = dest / output.format(name=name)
        if path.exists():
            raise FileExistsError(f"scaffold: {path} exists; not overwriting it")
        path.write_text((TEMPLATES / template).read_text().format(name=name))
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="the operator's name, e.g. scaled_gelu")
    parser.add_argument("--dest", type=Path, help="where to write the files (default: ./NAME)")
    args = parser.parse_args(argv)
    for path in scaffold(args.name, args.dest or Path(args.name)):
        print(f"wrote {path}")
    print(f"next: cd {args.dest or args.name} && pytest test_{args.name}.py")


if __name__ == "__main__":
    main()
