"""Write chapter5_extensions/compile_commands.json, so that an editor's C++ language server
(clangd, VS Code's C/C++ extension) knows torch's include paths and the build's flags: go to
definition into ATen, no red squiggles under at::Tensor.

    python chapter5_extensions/examples/compile_commands.py     # builds first if needed

The build already describes every compile command in build/objects/build.ninja (torch builds
through ninja; the file is the last build's, which build_inplace() below makes the default one);
`ninja -t compdb` turns that file into the JSON the tools read.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

CHAPTER = Path(__file__).resolve().parents[1]  # the package and its build/
sys.path.insert(0, str(CHAPTER))

import build_inplace  # noqa: E402


def main(argv: list[str] | None = None) -> Path:
    build_inplace.build_inplace()  # the variant setup.py builds by default, CUDA where nvcc is
    build_dir = CHAPTER / "build" / "objects"
    if not (build_dir / "build.ninja").exists():
        raise RuntimeError("no build.ninja in chapter5_extensions/build/objects")
    ninja = shutil.which("ninja") or str(Path(sys.executable).parent / "ninja")
    out = subprocess.run(
        [ninja, "-C", str(build_dir), "-t", "compdb"], check=True, capture_output=True, text=True
    ).stdout
    entries = [e for e in json.loads(out) if Path(e["file"]).suffix in (".cpp", ".cu")]
    path = CHAPTER / "compile_commands.json"
    path.write_text(json.dumps(entries, indent=2) + "\n")
    print(f"{path}: {len(entries)} sources, from {build_dir.relative_to(CHAPTER)}/build.ninja")
    return path


if __name__ == "__main__":
    main(sys.argv[1:])
