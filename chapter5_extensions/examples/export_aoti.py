"""torch.export and AOTInductor with the course's ops: a small model that calls custom_ops is
exported to a graph, compiled ahead of time into one .pt2 file, and run from that file in a new
Python process that has none of the model's Python code (chapter 5, part3_shipping.md, "Export
and AOTInductor: running the ops without Python").

    .venv/bin/python chapter5_extensions/examples/export_aoti.py                  # CPU
    .venv/bin/python chapter5_extensions/examples/export_aoti.py --device cuda    # on a GPU

What the loading process needs: torch, and our operators registered, since the compiled code
calls custom_ops::fused_bias_relu through the dispatcher by name. Loading the library
(torch.ops.load_library on custom_ops/_C*.so) is enough; the Python package (fake kernels,
autograd formulas) served the export and is not needed to run. Without the library, loading the
file fails and names the missing operator; the script shows both.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

CHAPTER = Path(__file__).resolve().parents[1]  # the package and its build/


class Model(torch.nn.Module):
    """Linear, our fused bias+ReLU, Linear: the custom op sits between two ATen ops."""

    def __init__(self, features: int = 64, hidden: int = 256) -> None:
        super().__init__()
        import custom_ops

        self.up = torch.nn.Linear(features, hidden, bias=False)
        self.act = custom_ops.FusedBiasReLU(hidden, scale=0.5)
        self.down = torch.nn.Linear(hidden, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))


# Run in a new process: load the package file, with or without our library, and call it.
LOADER = """
import sys, torch
package, library, inputs, expected = sys.argv[1:5]
if library != "-":
    torch.ops.load_library(library)
try:
    model = torch._inductor.aoti_load_package(package)
    y = model(torch.load(inputs))
except Exception as error:
    print("failed:", str(error).strip().splitlines()[0][:200])
    sys.exit(1)
torch.testing.assert_close(y, torch.load(expected))
print("ran", tuple(y.shape), "and matched eager")
"""


def start_loader(package: Path, library: str, inputs: Path, expected: Path) -> subprocess.Popen:
    args = [sys.executable, "-c", LOADER, str(package), library, str(inputs), str(expected)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def loader_result(process: subprocess.Popen) -> tuple[int, str]:
    """The loader's exit status and the last line it printed (its error, if it printed none)."""
    stdout, stderr = process.communicate()
    said = stdout.strip().splitlines() or ["(nothing)", stderr[-2000:]]
    return process.returncode, said[-1]


def main(device: str, out: Path) -> None:
    sys.path.insert(0, str(CHAPTER))
    import build_inplace

    build_inplace.build_inplace()
    import custom_ops

    torch.manual_seed(0)
    model = Model().to(device).eval()
    torch.nn.init.normal_(model.act.bias)  # a bias that is not zero, so that it is checked
    x = torch.randn(32, 64, device=device)

    # 1. Export: a graph of ATen ops and ours, with the batch size left symbolic. Our fake kernel
    # is what lets export trace the op without running it.
    batch = torch.export.Dim("batch", min=1)
    exported = torch.export.export(model, (x,), dynamic_shapes={"x": {0: batch}})
    calls = [n.target for n in exported.graph.nodes if n.op == "call_function"]
    print("exported graph calls:", ", ".join(str(c) for c in calls))
    assert torch.ops.custom_ops.fused_bias_relu.default in calls

    # 2. AOTInductor: the graph compiled to C++ (and CUDA kernels on a GPU) in one .pt2 file.
    start = time.perf_counter()
    package = torch._inductor.aoti_compile_and_package(
        exported, package_path=str(out / "model.pt2")
    )
    print(f"compiled {Path(package).name} in {time.perf_counter() - start:.1f} s")

    # 3. Run it in new processes, on another batch size than the one exported with.
    x7 = torch.randn(7, 64, device=device)
    with torch.no_grad():
        expected = model(x7)
    torch.save(x7, out / "inputs.pt")
    torch.save(expected, out / "expected.pt")
    (library,) = (CHAPTER / "custom_ops").glob("_C*.so")
    cases = {"with our library loaded": str(library), "without it": "-"}
    # The two processes are independent (each spends most of its time importing torch): at once.
    loaders = {
        what: start_loader(Path(package), lib, out / "inputs.pt", out / "expected.pt")
        for what, lib in cases.items()
    }
    for what, process in loaders.items():
        code, last = loader_result(process)
        print(f"new process, {what}: {last}")
        assert (code == 0) == (cases[what] != "-"), last
    del custom_ops


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--out", type=Path, help="where the .pt2 goes (default: a temp folder)")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda needs a GPU: torch.cuda.is_available() is False")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        main(args.device, args.out)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(args.device, Path(tmp))
