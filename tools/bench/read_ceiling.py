# Device read bandwidth, the ceiling of a decode step: PyTorch's x.sum() over fp16 buffers of the
# given sizes (MB), median of 50 CUDA-event timings. Usage: python3 read_ceiling.py 67.1 536.9
import sys, torch
for mb in map(float, sys.argv[1:]):
    x = torch.randn(int(mb * 1e6 / 2), device="cuda", dtype=torch.float16)
    for _ in range(5): x.sum()
    torch.cuda.synchronize(); ts = []
    for _ in range(50):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); x.sum(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort(); t = ts[len(ts) // 2] * 1e-3
    print(f"torch sum over {mb:.1f} MB: {t*1e6:.1f} us, {mb*1e6/t/1e9:.0f} GB/s")
