#!/usr/bin/env python3
"""The PyTorch Lightning peer of volt's GPU bench (bench/gpu/run.sh).

transformers' DistilBertForSequenceClassification, randomly initialised from
DistilBertConfig() (distilbert-base-uncased's shape: 6 layers, dim 768, 12 heads, vocab
30522; num_labels 2; HF's dropouts 0.1 / attention 0.1 / classifier 0.2; nothing is
downloaded), trained by a lightning Trainer with torch.optim.Adam(lr=5e-5) on batches of
12 x 512 tokens with a realistic padding tail (row b keeps T/2 + (7919 b mod T/2) + 1
tokens, the rest [PAD] = 0 with attention mask 0: bench/bench_distilbert.c's `tail` rows).

For each precision asked (32-true, 16-mixed, bf16-mixed, bf16-mixed+compile: the model
wrapped in torch.compile) it prints ms per training step (median of the timed steps after
the warm-up ones; the clock starts in the module's on_before_batch_transfer hook, after a
device synchronize, and stops in a callback's on_train_batch_end after another, so the
host-to-device copy of the batch, forward, backward, Adam step and zero_grad are inside:
Lightning 2.x moves the batch to the device before on_train_batch_start, so a clock started
there would miss the copy),
samples/s, MFU (FLOP_PER_STEP / step time / PEAK_TFLOPS), peak device memory
(torch.cuda.max_memory_allocated over the training steps), the validation forward time per
batch, and the projected seed job: 3 epochs x 2,916 training steps + 3 validation passes of
VAL_SAMPLES samples (default 15,008: the 50,000 IMDB reviews less the 34,992 trained on;
an assumption, say so when quoting it) at batch 12. One RESULT line per precision for
run.sh to collect.

    python3 bench/gpu/peer_lightning.py [--steps N] [--warmup N] [--val-steps N]
                                        [--precisions 32-true,16-mixed,...] [--tiny --cpu]
--tiny --cpu: a 2-layer dim-32 model on the CPU, for checking the script without a GPU."""
import argparse
import os
import statistics
import sys
import time

try:
    import torch
except ImportError:   # main() says so in a RESULT line
    torch = None

FLOP_PER_STEP = float(os.environ.get("FLOP_PER_STEP", "1.76e12"))   # issue 11: 12 x 512 DistilBERT step
PEAK_TFLOPS = float(os.environ.get("PEAK_TFLOPS", "790"))           # H200 bf16 dense, measured
TRAIN_STEPS, EPOCHS = 2916, 3
VAL_SAMPLES = int(os.environ.get("VAL_SAMPLES", "15008"))


def batches(vocab, B, T, n, seed=0):
    """n identical-shape batches: ids uniform in [1, vocab), padding tail, labels b % 2."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (n * B, T), generator=g)
    mask = torch.ones(n * B, T, dtype=torch.long)
    for r in range(n * B):
        b = r % B
        keep = T // 2 + (7919 * b) % max(T // 2, 1) + 1 if T >= 2 else T
        ids[r, keep:] = 0
        mask[r, keep:] = 0
    labels = torch.tensor([r % B % 2 for r in range(n * B)])
    return torch.utils.data.TensorDataset(ids, mask, labels)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--compile-warmup", type=int, default=8)
    ap.add_argument("--val-steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=12)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--precisions", default="32-true,16-mixed,bf16-mixed,bf16-mixed+compile")
    ap.add_argument("--tiny", action="store_true", help="2 layers, dim 32: a smoke check")
    ap.add_argument("--cpu", action="store_true", help="run on the CPU (smoke check)")
    a = ap.parse_args()

    if torch is None:
        print("RESULT peer: skipped (torch missing)", flush=True)
        return 3
    try:
        import lightning as L
        from transformers import DistilBertConfig, DistilBertForSequenceClassification
    except ImportError as e:   # bench/gpu/run.sh checks first; a direct call gets the same line
        print(f"RESULT peer: skipped ({e.name or e} missing)", flush=True)
        return 3

    on_gpu = not a.cpu
    if on_gpu and not torch.cuda.is_available():
        print(f"RESULT peer: skipped (torch {torch.__version__} sees no CUDA device)", flush=True)
        return 3
    cfg = DistilBertConfig(num_labels=2)
    if a.tiny:
        cfg = DistilBertConfig(num_labels=2, n_layers=2, dim=32, hidden_dim=64, n_heads=4, vocab_size=97,
                               max_position_embeddings=max(16, a.seq))
    dev_name = torch.cuda.get_device_name(0) if on_gpu else "cpu"
    print(f"peer: torch {torch.__version__}, lightning {L.__version__}, transformers "
          f"{__import__('transformers').__version__}, device {dev_name}; DistilBERT n_layers {cfg.n_layers} "
          f"dim {cfg.dim}, batch {a.batch} x {a.seq} (padding tail), Adam lr 5e-5", flush=True)

    class Timer(L.Callback):
        def __init__(self):
            self.train, self.val = [], []
            self._t = 0.0

        def _start(self):
            if on_gpu:
                torch.cuda.synchronize()
            self._t = time.perf_counter()

        def _end(self, out):
            if on_gpu:
                torch.cuda.synchronize()
            out.append(time.perf_counter() - self._t)

        # started by Module.on_before_batch_transfer (before the batch's copy to the device)
        def on_train_batch_end(self, *args):
            self._end(self.train)

        def on_validation_batch_end(self, *args):
            self._end(self.val)

    class Module(L.LightningModule):
        def __init__(self, compile_model, timer):
            super().__init__()
            torch.manual_seed(0)
            self.model = DistilBertForSequenceClassification(cfg)
            self.compile_model = compile_model
            self.compiled = False
            self.timer = [timer]   # a list: not an attribute Lightning treats as a submodule or hparam

        def on_before_batch_transfer(self, batch, dataloader_idx):
            self.timer[0]._start()
            return batch

        def configure_model(self):   # called by fit and again by validate: compile once
            if self.compile_model and not self.compiled:
                self.model = torch.compile(self.model)
                self.compiled = True

        def training_step(self, batch, i):
            ids, mask, y = batch
            return self.model(input_ids=ids, attention_mask=mask, labels=y).loss

        def validation_step(self, batch, i):
            ids, mask, y = batch
            return self.model(input_ids=ids, attention_mask=mask, labels=y).loss

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=5e-5)

    rows = []
    for prec_arg in a.precisions.split(","):
        compile_model = prec_arg.endswith("+compile")
        prec = prec_arg.replace("+compile", "")
        warm = a.compile_warmup if compile_model else a.warmup
        n = warm + a.steps
        data = batches(cfg.vocab_size, a.batch, a.seq, n)
        vdata = batches(cfg.vocab_size, a.batch, a.seq, a.val_steps + 2, seed=1)
        loader = torch.utils.data.DataLoader(data, batch_size=a.batch, shuffle=False, pin_memory=on_gpu)
        vloader = torch.utils.data.DataLoader(vdata, batch_size=a.batch, shuffle=False, pin_memory=on_gpu)
        timer = Timer()
        trainer = L.Trainer(accelerator="gpu" if on_gpu else "cpu", devices=1, precision=prec, max_steps=n,
                            max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                            enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
                            callbacks=[timer])
        module = Module(compile_model, timer)
        if on_gpu:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        trainer.fit(module, train_dataloaders=loader)
        fit_s = time.perf_counter() - t0
        peak = torch.cuda.max_memory_allocated() / 2**20 if on_gpu else float("nan")
        vtrainer = L.Trainer(accelerator="gpu" if on_gpu else "cpu", devices=1, precision=prec, logger=False,
                             enable_progress_bar=False, enable_model_summary=False, callbacks=[timer])
        vtrainer.validate(module, dataloaders=vloader, verbose=False)
        timed = timer.train[warm:] or timer.train
        ms = statistics.median(timed) * 1e3
        vms = statistics.median(timer.val[2:] or timer.val) * 1e3   # the first two warm up (compile)
        sps = a.batch / (ms / 1e3)
        mfu = FLOP_PER_STEP / (ms / 1e3) / (PEAK_TFLOPS * 1e12) * 100
        val_batches = (VAL_SAMPLES + a.batch - 1) // a.batch
        job_s = EPOCHS * (TRAIN_STEPS * ms + val_batches * vms) / 1e3
        rows.append((prec_arg, ms, min(timed) * 1e3, sps, mfu, peak, vms, job_s, fit_s))
        print(f"RESULT peer {prec_arg} ms_per_step={ms:.3f} samples_per_s={sps:.1f} mfu_pct={mfu:.1f} "
              f"peak_mib={peak:.0f} val_ms_per_batch={vms:.3f} job_s={job_s:.1f} fit_wall_s={fit_s:.1f}", flush=True)
        del trainer, vtrainer, module
    print(f"| {'peer precision':<26} | {'ms/step':>8} | {'min ms':>8} | {'samples/s':>9} | {'MFU %':>6} | "
          f"{'peak MiB':>8} | {'val ms':>7} | {'3-epoch job s':>13} |")
    print("|" + "|".join("-" * w for w in (28, 10, 10, 11, 8, 10, 9, 15)) + "|")
    for r in rows:
        print(f"| {r[0]:<26} | {r[1]:8.2f} | {r[2]:8.2f} | {r[3]:9.1f} | {r[4]:6.1f} | {r[5]:8.0f} | {r[6]:7.2f} | "
              f"{r[7]:13.1f} |")
    print(f"MFU against {PEAK_TFLOPS:g} TFLOP/s at {FLOP_PER_STEP:.3g} FLOP per step; job = {EPOCHS} x "
          f"({TRAIN_STEPS} steps + {VAL_SAMPLES} validation samples at batch {a.batch})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
