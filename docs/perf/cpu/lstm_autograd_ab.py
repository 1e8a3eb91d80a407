"""Host cost of custom_ops.lstm's autograd formula, Python (register_autograd) against C++
(csrc/autograd.cpp's LstmLayer): one forward and backward on the CPU at sizes where the kernels
are nearly free, so that what is timed is the call's overhead. Run once per build, each build a
checkout of its own (see lstm_autograd_ab.md):

    USE_CUDA=0 python docs/perf/cpu/lstm_autograd_ab.py path/to/chapter5_extensions
"""

import statistics
import sys
import time

chapter = sys.argv[1]
sys.path.insert(0, chapter)
import build_inplace  # noqa: E402

build_inplace.build_inplace()
import torch  # noqa: E402

import custom_ops  # noqa: E402

torch.set_num_threads(1)
print("custom_ops from", custom_ops.__file__)
for T, B, H in ((1, 1, 8), (16, 4, 64)):
    g = torch.Generator().manual_seed(0)
    shapes = [(T, B, H), (B, H), (B, H), (4 * H, H), (4 * H, H), (4 * H,), (4 * H,)]
    args = [torch.randn(s, generator=g).requires_grad_() for s in shapes]

    def call(args=args):
        y = custom_ops.lstm(*args)[0]
        torch.autograd.grad(y.sum(), args)

    for _ in range(200):
        call()
    runs = []
    for _ in range(15):
        start = time.perf_counter()
        for _ in range(200):
            call()
        runs.append((time.perf_counter() - start) / 200 * 1e6)
    print(
        f"T={T} B={B} H={H}: fwd+bwd {statistics.median(runs):.1f} us a call (median of 15 x 200)"
    )
