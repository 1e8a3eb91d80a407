"""Tests for chapter 5's package as a user meets it: a CPU-only wheel built and installed
elsewhere, DDP under torchrun, compile_commands.json, the op scaffold, and the scripts a reader
runs (example_usage.py, benchmark.py, call_cost.py). The operators themselves are tested in
test_chapter5.py.

    python chapter5_extensions/test_package.py      # on its own
    pytest chapter5_extensions/test_package.py      # or under pytest
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import build_inplace
import build_utils

build_inplace.build_inplace()

HERE = Path(__file__).resolve().parent
HAS_CUDA = torch.cuda.is_available()
CAN_BUILD_CUDA = torch.version.cuda is not None and build_utils.CUDA_HOME is not None


# ---- the package as a user meets it ------------------------------------------------------------


@pytest.mark.slow(seconds=60)
def test_a_wheel_installs_and_imports_from_elsewhere(tmp_path):
    """Build a wheel, install it into an empty folder, import it from there in a new Python, and
    run an op. The wheel is built from the objects the in-place build left in build/ (pip wheel
    runs the same setup.py with the same build folder), so it only links; the CPU-only variant's
    sources are compiled by load_jit.py's test on a machine without a GPU."""
    env = {**os.environ, "MAX_JOBS": os.environ.get("MAX_JOBS", str(os.cpu_count()))}
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [
            *pip,
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            str(HERE),
            "-w",
            str(tmp_path / "dist"),
        ],
        check=True,
        env=env,
        cwd=HERE,
    )
    (wheel,) = (tmp_path / "dist").glob("custom_ops-0.1.0-cp310-abi3-*.whl")
    target = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True)
    script = (
        "import torch, custom_ops; "
        "print(custom_ops.__file__); print(custom_ops.built_with_cuda()); "
        "print(custom_ops.fused_bias_relu(torch.tensor([[-1.0, 2.0]]), torch.tensor([0.5, 0.5])).tolist())"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(target)},
    ).stdout.splitlines()
    assert out[0].startswith(str(target)) and out[2] == "[[0.0, 2.5]]"
    assert out[1] == str(CAN_BUILD_CUDA)


@pytest.mark.slow
def test_compile_commands_lists_every_source(import_own_script):
    compile_commands = import_own_script("examples/compile_commands")
    path = compile_commands.main([])
    entries = json.loads(path.read_text())
    files = {Path(e["file"]).name for e in entries}
    expected = {p.name for p in (HERE / "csrc").glob("*.cpp")}
    if CAN_BUILD_CUDA:
        expected |= {p.name for p in (HERE / "csrc" / "cuda").glob("*.cu")}
    assert expected <= files
    assert all("torch/include" in (e.get("command") or " ".join(e["arguments"])) for e in entries)


@pytest.mark.slow
def test_ddp_with_two_processes_matches_one_process():
    """torchrun --nproc_per_node=2 on the CPU (gloo): each model of custom layers (FusedBiasReLU,
    the LSTM layer) trained with DDP ends with the same weights as one process on the whole
    batch."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            str(HERE / "examples" / "ddp_train.py"),
            "--steps",
            "5",
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for model in ("FusedBiasReLU", "LSTM"):
        assert f"{model} model: DDP (2 processes) matches one process" in result.stdout


@pytest.mark.slow(seconds=100)
def test_scaffold_makes_an_op_that_builds_and_passes_opcheck(tmp_path, import_own_script):
    scaffold = import_own_script("examples/scaffold")
    files = scaffold.scaffold("scaled_copy", tmp_path)
    assert {f.name for f in files} >= {
        "scaled_copy.cpp",
        "scaled_copy.cu",
        "scaled_copy.py",
        "test_scaled_copy.py",
    }
    # Built from a fixed folder, each file rewritten only when the templates changed it: the op's
    # build (nvcc included) is then cached from one run of the suite to the next, as a learner's
    # own op would be.
    op_folder = HERE / "build" / "scaffold_test" / "scaled_copy"
    op_folder.mkdir(parents=True, exist_ok=True)
    for generated in files:
        kept = op_folder / generated.name
        if not kept.exists() or kept.read_text() != generated.read_text():
            kept.write_text(generated.read_text())
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(op_folder / "test_scaled_copy.py"),
        ],
        capture_output=True,
        text=True,
        cwd=op_folder,
        timeout=600,
        env={**os.environ, "TORCH_EXTENSIONS_DIR": str(HERE / "build" / "scaffold_test")},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def run_python(script: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """script in a new Python in this folder: this process has registered custom_ops already."""
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=HERE, timeout=timeout
    )


@pytest.mark.slow(seconds=90)
@pytest.mark.xdist_group("load_jit")  # one JIT build, reused by the next
def test_load_jit_builds_the_library_and_registers_its_operators():
    """load_jit.py in a new process: the JIT build (CPU-only without a GPU) registers every
    operator, and the package's Python half (custom_ops.LSTM, autograd) works on top of it."""
    result = run_python(
        "import runpy, torch; runpy.run_path('load_jit.py', run_name='__main__'); "
        "import custom_ops; "
        "x = torch.randn(2, 3, 4, requires_grad=True); "
        "custom_ops.LSTM(4, 5)(x)[0].sum().backward(); "
        "print('lstm backward ok', x.grad.shape)"
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "torch.ops.custom_ops.relu(x) = [0.0, 0.0, 2.0]" in result.stdout
    assert "registered by: " in result.stdout and "custom_ops_jit" in result.stdout
    assert "lstm backward ok torch.Size([2, 3, 4])" in result.stdout


@pytest.mark.xdist_group("load_jit")  # one JIT build, reused by the next
def test_load_jit_after_import_custom_ops_reuses_the_package_build():
    result = run_python(
        "import custom_ops, load_jit; "
        "assert load_jit.load_custom_ops() == custom_ops._C.__file__; "
        "print('reused', custom_ops._C.__file__)"
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "already registered by" in result.stdout and "reused" in result.stdout


@pytest.mark.slow(seconds=90)
@pytest.mark.xdist_group("load_jit")  # one JIT build, reused by the next
def test_loading_both_builds_in_one_process_fails_on_the_second_registration():
    """What load_jit.py avoids: the JIT build, then the package's own .so loaded directly. The
    error is thrown while the .so loads and ends the process (std::terminate: SIGABRT)."""
    (package_build,) = (HERE / "custom_ops").glob("_C*.so")
    result = run_python(
        "import load_jit, torch; load_jit.load_custom_ops(); "
        f"torch.ops.load_library({str(package_build)!r})"
    )
    assert result.returncode != 0
    assert "Only a single TORCH_LIBRARY can be used to register the namespace custom_ops" in (
        result.stdout + result.stderr
    )


# ---- the scripts a reader runs ------------------------------------------------------------------


def test_demo_lists_every_operator_the_library_defines(capsys, import_own_script):
    """demo.py asks the dispatcher, not `dir(torch.ops.custom_ops)` (which lists only the ops
    Python has looked up so far): every schema of csrc/ops.cpp, in a fresh process too."""
    defined = re.findall(r'm\.def\(\s*"(\w+)\(', (HERE / "csrc" / "ops.cpp").read_text())
    assert len(defined) >= 11
    assert import_own_script("demo").registered_ops("custom_ops") == sorted(defined)
    fresh = run_python(
        "import demo, custom_ops; print(' '.join(demo.registered_ops('custom_ops')))", timeout=120
    )
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert fresh.stdout.split()[-len(defined) :] == sorted(defined)


@pytest.mark.slow
def test_example_usage_runs(capsys, import_own_script):
    import_own_script("examples/example_usage").main()
    out = capsys.readouterr().out
    assert "gradients match plain PyTorch: True" in out
    assert (
        "compiled model matches eager (fullgraph=True, no graph break at the custom op): True"
        in out
    )


# ---- the classic README's examples, run as written ---------------------------------------------
# The three usage snippets of the "Chapter 5" README the package grew from (shared/seeds/003),
# verbatim but for their comments. They run on CUDA when there is a GPU; without one the device
# is swapped to the CPU, text for text, and nothing else changes.

CLASSIC_BASIC_USAGE = """
import torch
import custom_ops

batch_size = 128
features = 256

input_tensor = torch.randn(batch_size, features, device='cuda', requires_grad=True)
bias = torch.randn(features, device='cuda', requires_grad=True)
scale = 2.0

output = custom_ops.fused_op_forward(input_tensor, bias, scale)

loss = output.sum()
loss.backward()

print(f"Input gradient shape: {input_tensor.grad.shape}")
print(f"Bias gradient shape: {bias.grad.shape}")
"""

CLASSIC_IN_A_NETWORK = """
import torch
import torch.nn as nn
import custom_ops

class FusedOpLayer(nn.Module):
    def __init__(self, features, scale=1.0):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        self.scale = scale

    def forward(self, x):
        return custom_ops.fused_op_forward(x, self.bias, self.scale)

model = nn.Sequential(
    nn.Linear(512, 256),
    FusedOpLayer(256, scale=2.0),
    nn.Linear(256, 10)
).cuda()

optimizer = torch.optim.Adam(model.parameters(), lr=0.001)

for epoch in range(10):
    optimizer.zero_grad()
    output = model(torch.randn(32, 512, device='cuda'))
    loss = output.sum()
    loss.backward()
    optimizer.step()
"""

CLASSIC_PERFORMANCE = """
import torch
import custom_ops
import time

batch_size = 1024
features = 2048
scale = 2.0

input_tensor = torch.randn(batch_size, features, device='cuda')
bias = torch.randn(features, device='cuda')

for _ in range(10):
    _ = custom_ops.fused_op_forward(input_tensor, bias, scale)
    _ = torch.relu(input_tensor * scale + bias)

torch.cuda.synchronize()

num_iters = 100
start = time.time()
for _ in range(num_iters):
    _ = custom_ops.fused_op_forward(input_tensor, bias, scale)
torch.cuda.synchronize()
custom_time = (time.time() - start) / num_iters * 1000

start = time.time()
for _ in range(num_iters):
    _ = torch.relu(input_tensor * scale + bias)
torch.cuda.synchronize()
pytorch_time = (time.time() - start) / num_iters * 1000

print(f"Custom kernel: {custom_time:.3f} ms")
print(f"PyTorch ops:   {pytorch_time:.3f} ms")
print(f"Speedup:       {pytorch_time/custom_time:.2f}x")
"""


def run_classic(snippet: str, capsys) -> tuple[dict, str]:
    """exec() the snippet on CUDA, or with its device swapped to the CPU; -> (its names, stdout)."""
    if not HAS_CUDA:
        snippet = snippet.replace("device='cuda'", "device='cpu'").replace(".cuda()", ".cpu()")
        snippet = snippet.replace("torch.cuda.synchronize()", "None")
    namespace: dict = {}
    exec(compile(snippet, "classic README", "exec"), namespace)
    return namespace, capsys.readouterr().out


def test_classic_basic_usage_runs_as_written(capsys):
    _, out = run_classic(CLASSIC_BASIC_USAGE, capsys)
    assert "Input gradient shape: torch.Size([128, 256])" in out
    assert "Bias gradient shape: torch.Size([256])" in out


def test_classic_network_trains_with_adam_as_written(capsys):
    """Ten Adam steps move the custom layer's bias (it starts at zero, so a gradient reached it)."""
    names, _ = run_classic(CLASSIC_IN_A_NETWORK, capsys)
    layer = names["model"][1]
    assert isinstance(layer, names["FusedOpLayer"])
    assert layer.bias.abs().sum().item() > 0


def test_classic_performance_comparison_runs_as_written(capsys):
    _, out = run_classic(CLASSIC_PERFORMANCE, capsys)
    assert "Custom kernel:" in out and "Speedup:" in out


def test_classic_names_are_the_packages_own():
    import custom_ops

    assert custom_ops.fused_op_forward is custom_ops.fused_bias_relu
    assert custom_ops.FusedOpLayer is custom_ops.FusedBiasReLU
    x, bias = torch.randn(3, 4), torch.randn(4)
    torch.testing.assert_close(
        custom_ops.fused_op_forward(x, bias, 2.0), torch.relu(x * 2.0 + bias), rtol=0, atol=0
    )


@pytest.mark.skipif(HAS_CUDA, reason="checks the message a machine without a GPU prints")
def test_benchmark_says_it_needs_a_gpu(capsys, import_own_script):
    assert import_own_script("benchmarks/benchmark").main(["--quick"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out


@pytest.mark.slow(seconds=80)
def test_call_cost_runs_and_every_way_in_gives_relu(tmp_path, import_own_script):
    """call_cost.py builds call_cost.cpp, checks each way in against torch.relu, and writes its
    table (on the CPU here; the lesson's numbers come from a GPU)."""
    call_cost = import_own_script("benchmarks/call_cost")
    assert call_cost.main(["--quick", "--out", str(tmp_path)]) == 0
    (table,) = tmp_path.glob("call_cost_*.md")
    rows = [line for line in table.read_text().splitlines() if line.startswith("| ")]
    assert len(rows) == 2 + 8  # the header, its rule, and one row per way in
    with pytest.raises(RuntimeError, match="call_cost::relu: x must be a floating-point tensor"):
        torch.ops.call_cost.relu_cpp(torch.ones(3, dtype=torch.int32))


@pytest.mark.cuda
@pytest.mark.slow
def test_benchmark_quick_run_writes_its_table(tmp_path, import_own_script):
    benchmark = import_own_script("benchmarks/benchmark")
    assert benchmark.main(["--quick", "--no-compile", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "chapter5_cuda.md").read_text().count("|") > 20


@pytest.mark.slow
def test_profile_ops_shows_both_halves_and_writes_a_trace(tmp_path, capsys, import_own_script):
    """profile_ops.py profiles the cell loop and the layer (record_function) and writes a Chrome
    trace that names both."""
    assert (
        import_own_script("benchmarks/profile_ops").main(["--out", str(tmp_path), "--rows", "40"])
        == 0
    )
    table = capsys.readouterr().out
    assert "cell loop" in table and "layer" in table and "custom_ops::lstm" in table, table
    trace = json.loads((tmp_path / "profile_ops.json").read_text())
    names = {event.get("name") for event in trace["traceEvents"]}
    assert {"cell loop", "layer"} <= names


@pytest.mark.slow(seconds=180)
def test_export_and_aoti_package_run_in_a_new_process_with_our_library(
    device, tmp_path, capsys, import_own_script
):
    """export_aoti.py: the exported graph calls our op, the AOTInductor package runs in a new
    process with the library loaded (another batch size than exported, matching eager), and
    fails to load without it, naming the operator."""
    import_own_script("examples/export_aoti").main(device.type, tmp_path)
    out = capsys.readouterr().out
    assert "custom_ops.fused_bias_relu.default" in out
    assert "with our library loaded: ran (7, 64) and matched eager" in out
    assert "without it: failed: Could not find schema for custom_ops::fused_bias_relu" in out


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))
