"""Host cost of custom_ops.LSTM's autograd on a GPU, Python formula (register_autograd) against C++
(csrc/autograd.cpp's LstmLayer): one forward and backward against cuDNN's nn.LSTM, timed in turns
with the course's GPU timer. Run once per build, each build a checkout of its own (see
lstm_autograd_ab.md):

    python docs/perf/h100/lstm_autograd_ab.py path/to/chapter5_extensions
"""

import sys

chapter = sys.argv[1]
sys.path.insert(0, chapter)
sys.path.insert(0, chapter + "/benchmarks")
import build_inplace  # noqa: E402

build_inplace.build_inplace()
import torch  # noqa: E402
from benchmark_lstm import fwd_bwd  # noqa: E402  (the layer benchmark's forward and backward)

import custom_ops  # noqa: E402
from gpu_timer import Timer  # noqa: E402

print("custom_ops from", custom_ops.__file__)
timer = Timer()
for T, B, H, dtype in [
    (64, 8, 512, torch.float16),
    (128, 32, 256, torch.float16),
    (64, 64, 1024, torch.float16),
    (64, 8, 512, torch.float32),
    (16, 4, 64, torch.float32),
]:
    torch.manual_seed(0)
    cudnn = torch.nn.LSTM(H, H, device="cuda", dtype=dtype)
    ours = custom_ops.LSTM(H, H, device="cuda", dtype=dtype)
    ours.load_state_dict(cudnn.state_dict())
    x = torch.randn(T, B, H, device="cuda", dtype=dtype, requires_grad=True)
    grad_y = torch.randn_like(x)
    fns = {
        name: fwd_bwd(lambda x, m=model: m(x)[0], x, [x, *model.parameters()], grad_y)
        for name, model in (("ours", ours), ("cuDNN", cudnn))
    }
    for fn in fns.values():
        fn()
    result = timer.measure_in_turns(fns, rounds=3, runs=10, loop=10)
    print(
        f"T={T} B={B} H={H} {str(dtype)[6:]:8s} fwd+bwd: "
        + "; ".join(
            f"{name} host {r['host_ms']:.3f} loop {r['loop_ms']:.3f} gpu {r['gpu_ms']:.3f}"
            for name, r in result.items()
        ),
        flush=True,
    )
