#!/usr/bin/env python3
"""PyTorch's FlashAttention-2 backward (scaled_dot_product_attention, flash backend), fp16, timed
with CUDA events (median of 20 after 5 warm-up runs), for the lab's comparisons on the GPU machine:

    python3 tools/lab/pytorch_flash_backward.py N[,N...] D[,D...]

For each N and D: B = 16384 / N, H = 2048 / D (FlashAttention's grid), not causal and causal.
FLOPs as FlashAttention counts them: 2.5 x the forward's 4 B H N^2 D, halved when causal.
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

for N in (int(n) for n in sys.argv[1].split(",")):
    for D in (int(d) for d in sys.argv[2].split(",")):
        for causal in (False, True):
            B, H = 16384 // N, 2048 // D
            q = torch.randn(B, H, N, D, device="cuda", dtype=torch.float16, requires_grad=True)
            k = torch.randn_like(q, requires_grad=True)
            v = torch.randn_like(q, requires_grad=True)
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                g = torch.randn_like(o)
                times = []
                for _ in range(25):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    o.backward(g, retain_graph=True)
                    end.record()
                    torch.cuda.synchronize()
                    times.append(start.elapsed_time(end))
            times = sorted(times[5:])
            ms = times[len(times) // 2]
            flops = 2.5 * 4 * B * H * N * N * D * (0.5 if causal else 1)
            print(f"pytorch flash bwd N={N} D={D} causal={causal}: {ms:.3f} ms {flops / ms / 1e9:.1f} TFLOP/s")
