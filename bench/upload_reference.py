#!/usr/bin/env python3
"""The weight-upload reference for kiln-bench's load times: how long PyTorch takes to copy N bytes
of ordinary (pageable) host memory to the GPU, as `model.to("cuda")` does.

Usage (on the GPU machine, whose python3 has torch): python3 bench/upload_reference.py SIZE_MB [...]
Prints, per size, the median of 7 copies (after one warm-up) of a fresh float32 tensor, timed
with torch.cuda.synchronize() around `.to("cuda")`. A program, not a test: nothing is asserted.
"""
import statistics
import sys
import time

import torch


def main():
    torch.cuda.init()
    torch.empty(1, device="cuda")  # the context exists before anything is timed
    for arg in sys.argv[1:]:
        n = int(float(arg) * 1e6) // 4
        host = torch.randn(n)
        host.to("cuda")
        times = []
        for _ in range(7):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            host.to("cuda")
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        ms = statistics.median(times) * 1e3
        print("upload %8.1f MB: %7.2f ms (%.1f GB/s, pageable, torch %s)" % (n * 4 / 1e6, ms, n * 4 / ms / 1e6,
                                                                            torch.__version__))


if __name__ == "__main__":
    main()
