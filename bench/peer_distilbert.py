#!/usr/bin/python3
"""The PyTorch side of bench/run_distilbert.sh: one DistilBertForSequenceClassification
training step (forward, cross-entropy, backward, AdamW step, zero_grad(set_to_none=True))
in fp32, timed like bench/bench_distilbert.c (median of `steps` after `warmup`; wall time,
and process CPU time of all threads).

The model is tests/fixtures/make_distilbert_fixture.py's (imported, not copied): a
line-by-line plain-PyTorch mirror of HF transformers' modeling_distilbert.py, so volt and
this peer run the same layers, dims and dropouts. Inputs as the volt bench: ids uniform
in [1, vocab) (no padding), an all-ones attention mask, labels b % 2.

Run with Debian's python3 and python3-torch (apt-get install -y python3-torch), not a
pyenv python; threads: torch.set_num_threads(OMP_NUM_THREADS, default 2):
    /usr/bin/python3 bench/peer_distilbert.py [preset steps warmup hf|off B T 32-true|bf16-mixed none|tail]

bf16-mixed: the step under torch.autocast("cpu", dtype=torch.bfloat16) (Lightning's
bf16-mixed on CPU: linear/matmul in bf16 through oneDNN (mkldnn), f32 weights and AdamW).
tail: row b keeps T/2 + (7919 b mod T/2) + 1 tokens, the rest is padding (id 0, mask 0),
as bench_distilbert's."""
import importlib.util
import os
import statistics
import sys
import time

import torch

PRESETS = {   # volt_distilbert_preset
    "distilbert-base": dict(vocab_size=30522, max_position_embeddings=512, dim=768, n_layers=6, n_heads=12,
                            hidden_dim=3072),
    "small": dict(vocab_size=30522, max_position_embeddings=512, dim=128, n_layers=2, n_heads=2, hidden_dim=512),
    "tiny": dict(vocab_size=97, max_position_embeddings=16, dim=32, n_layers=2, n_heads=4, hidden_dim=64),
}


def load_fixture_module():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "tests", "fixtures", "make_distilbert_fixture.py")
    spec = importlib.util.spec_from_file_location("make_distilbert_fixture", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def mapped_blas():
    """The OpenBLAS shared object this process has mapped (the OpenMP or pthreads build)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line}
    except OSError:
        return "?"
    return ", ".join(sorted(libs)) or "?"


def gemm_library(prec):
    """f32 GEMMs: the BLAS PyTorch has mapped (Debian's torch: addmm through BLAS); bf16
    (autocast): oneDNN (mkldnn, Debian's libdnnl.so.2, the library volt uses)."""
    blas = f"BLAS {mapped_blas()}"
    if prec == "bf16-mixed":
        return f"oneDNN {torch.backends.mkldnn.is_available() and 'libdnnl.so.2'} for bf16 linear/matmul, {blas} for f32"
    return blas


def main():
    a = sys.argv[1:]
    preset = a[0] if len(a) > 0 else "distilbert-base"
    steps = int(a[1]) if len(a) > 1 else 5
    warmup = int(a[2]) if len(a) > 2 else 2
    drop = a[3] if len(a) > 3 else "hf"
    B = int(a[4]) if len(a) > 4 else 8
    T = int(a[5]) if len(a) > 5 else 128
    prec = a[6] if len(a) > 6 else "32-true"
    pad = a[7] if len(a) > 7 else "none"
    if (preset not in PRESETS or drop not in ("hf", "off") or steps < 1 or warmup < 0
            or prec not in ("32-true", "bf16-mixed") or pad not in ("none", "tail")):
        sys.exit("usage: peer_distilbert.py [preset steps warmup hf|off B T 32-true|bf16-mixed none|tail]")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    torch.manual_seed(0)
    fx = load_fixture_module()
    p = 0.0 if drop == "off" else None
    cfg = fx.Config(**PRESETS[preset], num_labels=2, pad_token_id=0,
                    dropout=0.1 if p is None else p, attention_dropout=0.1 if p is None else p,
                    seq_classif_dropout=0.2 if p is None else p)
    model = fx.DistilBertForSequenceClassification(cfg)
    with torch.no_grad():   # HF's _init_weights
        for name, prm in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name:
                prm.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                prm.zero_()
            else:
                prm.normal_(0.0, 0.02)
        model.distilbert.embeddings.word_embeddings.weight[0].zero_()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, cfg.vocab_size, (B, T), generator=g, dtype=torch.int64)
    mask = torch.ones(B, T, dtype=torch.int64)
    if pad == "tail" and T >= 2:
        for b in range(B):
            n = T // 2 + (7919 * b) % (T // 2) + 1
            ids[b, n:] = 0
            mask[b, n:] = 0
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bf16-mixed")
    labels = torch.arange(B, dtype=torch.int64) % 2
    pad_tail = os.environ.get("PAD") == "tail"   # as bench_distilbert.c: row b keeps T - b T / (2 B) tokens
    if pad_tail:
        for b in range(B):
            keep = T - b * T // (2 * B)
            ids[b, keep:] = 0
            mask[b, keep:] = 0

    times, cpu, loss0 = [], [], None
    for it in range(warmup + steps):
        t0, c0 = time.perf_counter(), time.process_time()
        with autocast:
            loss, _ = model(ids, mask, labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        if loss0 is None:
            loss0 = loss.item()
        if it >= warmup:
            times.append(dt)
            cpu.append(dc)
    med, cmed = statistics.median(times), statistics.median(cpu)
    nparams = sum(q.numel() for q in model.parameters())
    print(f"PyTorch {torch.__version__} DistilBERT training step, preset {preset} ({nparams} params), batch {B} x {T}, "
          f"dropout {drop}, {prec}, AdamW, {torch.get_num_threads()} threads; median of {steps} after {warmup} warm-up; "
          f"first loss {loss0:.4f}; GEMM {gemm_library(prec)}")
    print(f"| {'impl':<6} | {'ms/step':>10} | {'min ms':>10} | {'max ms':>10} | {'tokens/s':>10} | {'CPU ms/step':>12} |")
    print("|--------|------------|------------|------------|------------|--------------|")
    print(f"| {'torch':<6} | {med * 1e3:10.1f} | {min(times) * 1e3:10.1f} | {max(times) * 1e3:10.1f} | "
          f"{B * T / med:10.0f} | {cmed * 1e3:12.1f} |")
    if pad_tail:
        print("padding: PAD=tail (row b keeps T - b T / (2 B) tokens)")
    print(f"RESULT torch {preset} ms_per_step={med * 1e3:.3f} cpu_ms_per_step={cmed * 1e3:.3f}")


if __name__ == "__main__":
    main()
