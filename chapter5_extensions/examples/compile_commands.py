"""Write chapter5_extensions/compile_commands.json, so that an editor's C++ language server
(clangd, VS Code's C/C++ extension) knows torch's include paths and the build's flags: go to
definition into ATen, no red squiggles under at::Tensor.

    python chapter5_extensions/examples/compile_commands.py     # builds first if needed

The build already describes every compile command in build/<cuda|cpu>/temp.*/build.ninja (torch
builds through ninja); `ninja -t compdb` turns that file into the JSON the tools read.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

CHAPTER = Path(__file__).resolve().parents[1]  # the package and its build/
sys.path.insert(0, str(CHAPTER))

import build_inplace  # noqa: E402
import build_utils  # noqa: E402


def main(argv: list[str] | None = None) -> Path:
    build_inplace.build_inplace()
    # The variant setup.py builds by default (its use_cuda()): build/cuda or build/cpu.
    with_cuda = os.environ.get("USE_CUDA", "1" if build_utils.can_build_cuda() else "0") == "1"
    variant = "cuda" if with_cuda else "cpu"
    ninja_files = sorted((CHAPTER / "build" / variant).glob("temp.*/build.ninja"))
    if not ninja_files:
        raise RuntimeError(f"no build.ninja under chapter5_extensions/build/{variant}")
    ninja = shutil.which("ninja") or str(Path(sys.executable).parent / "ninja")
    build_dir = ninja_files[-1].parent
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
