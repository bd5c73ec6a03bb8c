#!/usr/bin/env python3
"""PyTorch's attention at the seed's shape: the reference for volt's fused attention kernel
(core/cuda/attention_*.cu), run by scripts/device-check.sh's profile stage beside volt's per-op
profile of the same step (the profile's attention rows are one layer's forward / backward;
these are too).

Shape: batch 12, 12 heads, 512 tokens, head dim 64 (distilbert-base at the seed's batch), the
padding tail of bench/gpu/peer_lightning.py (row b keeps T/2 + (7919 b mod T/2) + 1 keys: an
additive -inf mask on the rest), attention dropout 0.1 as in training. For each dtype it times
torch.nn.functional.scaled_dot_product_attention forward, and forward + backward, with CUDA
events (median of the timed iterations after warm-up), under each SDPA backend that accepts the
inputs:
  default    what PyTorch picks (with a mask: memory-efficient or cuDNN)
  efficient  the memory-efficient kernel (masks and dropout)
  cudnn      cuDNN's fused attention, where the build has it
  flash      FlashAttention-2: no mask, so it attends to every key (a lower bound: it does
             the unmasked work)
and the unfused composition softmax(q k^T / 8 + mask) dropout v (what transformers' eager
DistilBERT runs). One line each:
  RESULT attn peer: dtype=bf16 backend=efficient fwd_ms=... fwdbwd_ms=... tflops=...
tflops counts forward + backward as 3.5 x the forward's two GEMMs on the visible keys
(FlashAttention-2's convention).

    python3 bench/gpu/peer_attention.py [--iters N] [--dtypes bf16,fp16,fp32] [--cpu --tiny]
--cpu --tiny: a 2 x 2 x 64 x 16 problem on the CPU, to check the script without a GPU."""
import argparse
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None


def tail_keep(b, T):
    return T // 2 + (7919 * b) % (T // 2) + 1


def make(B, H, T, D, dtype, dev):
    g = torch.Generator(device="cpu").manual_seed(0)
    q, k, v, dout = (torch.randn(B, H, T, D, generator=g).to(dev, dtype) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)
    mask = torch.zeros(B, 1, 1, T, dtype=dtype)
    for b in range(B):
        mask[b, 0, 0, min(tail_keep(b, T), T):] = float("-inf")
    return q, k, v, dout, mask.to(dev)


def timer(dev):
    if dev == "cuda":
        def run(fn, iters, warm):
            for _ in range(warm):
                fn()
            torch.cuda.synchronize()
            ts = []
            for _ in range(iters):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                ts.append(a.elapsed_time(b))
            return statistics.median(ts)
    else:
        def run(fn, iters, warm):
            for _ in range(warm):
                fn()
            ts = []
            for _ in range(iters):
                t0 = time.perf_counter()
                fn()
                ts.append((time.perf_counter() - t0) * 1e3)
            return statistics.median(ts)
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--dtypes", default="bf16,fp16,fp32")
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    if torch is None:
        print("RESULT attn peer: torch is not importable here: no reference")
        return 0
    dev = "cpu" if a.cpu else "cuda"
    if dev == "cuda" and not torch.cuda.is_available():
        print("RESULT attn peer: no CUDA device visible to torch: no reference")
        return 0
    B, H, T, D = (2, 2, 64, 16) if a.tiny else (12, 12, 512, 64)
    visible = sum(min(tail_keep(b, T), T) for b in range(B))   # keys per query, summed over rows
    flop_fwd = 2 * 2 * H * T * visible * D                     # q k^T and P v on the visible keys
    run = timer(dev)
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backends = [("efficient", SDPBackend.EFFICIENT_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                    ("flash", SDPBackend.FLASH_ATTENTION)]
    except ImportError:
        sdpa_kernel, backends = None, []
    print(f"# torch {torch.__version__}, {dev}"
          f"{' ' + torch.cuda.get_device_name() if dev == 'cuda' else ''}: B={B} H={H} T={T} D={D}, "
          f"padding tail ({visible / (B * T):.3f} of the keys visible), dropout 0.1, median of {a.iters}")
    for name in a.dtypes.split(","):
        if name not in dtypes:
            print(f"RESULT attn peer: unknown dtype {name}")
            continue
        q, k, v, dout, mask = make(B, H, T, D, dtypes[name], dev)

        def sdpa(use_mask=True):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask if use_mask else None, dropout_p=0.1)

        def unfused():
            s = (q @ k.transpose(-1, -2)) * (D ** -0.5) + mask
            return F.dropout(torch.softmax(s.float(), dim=-1).to(q.dtype), 0.1) @ v

        rows = [("default", None, sdpa, True)] + [(n, b, sdpa, n != "flash") for n, b in backends] \
            if hasattr(F, "scaled_dot_product_attention") else []   # torch >= 2.0
        rows.append(("unfused", None, unfused, True))
        for bname, backend, fn, masked in rows:
            def fwd():
                with torch.no_grad():
                    fn(masked) if fn is sdpa else fn()

            def fwdbwd():
                o = fn(masked) if fn is sdpa else fn()
                o.backward(dout)
                q.grad = k.grad = v.grad = None
            try:
                if backend is not None:
                    with sdpa_kernel(backend):
                        f_ms, fb_ms = run(fwd, a.iters, a.warmup), run(fwdbwd, a.iters, a.warmup)
                else:
                    f_ms, fb_ms = run(fwd, a.iters, a.warmup), run(fwdbwd, a.iters, a.warmup)
            except (RuntimeError, NotImplementedError) as e:   # the backend refuses these inputs
                msg = str(e).strip().splitlines()[0][:120] if str(e).strip() else type(e).__name__
                print(f"RESULT attn peer: dtype={name} backend={bname} refused: {msg}")
                continue
            fl = flop_fwd if masked else 2 * 2 * B * H * T * T * D
            print(f"RESULT attn peer: dtype={name} backend={bname} fwd_ms={f_ms:.3f} fwdbwd_ms={fb_ms:.3f} "
                  f"tflops={3.5 * fl / (fb_ms * 1e-3) / 1e12:.1f}{'' if masked else ' (no mask: every key)'}")
        del q, k, v, dout, mask
    return 0


if __name__ == "__main__":
    sys.exit(main())
