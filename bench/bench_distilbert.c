/* One DistilBERT training step (forward, cross-entropy, backward, AdamW step, zero_grad)
 * at batch B x T tokens, timed with the step API directly (no trainer, no data loader):
 * the volt side of bench/run_distilbert.sh, whose peer is bench/peer_distilbert.py (the
 * same model in PyTorch). Inputs: ids uniform in [1, vocab) (seeded, no padding), the
 * attention mask all ones, labels b % 2. Prints ms/step as the median of `steps` steps
 * after `warmup` steps, tokens/s, and the median CPU time of the process per step (all
 * threads: steadier than wall time on a shared machine, with OMP_WAIT_POLICY=passive).
 *   usage: bench_distilbert [preset steps warmup dropout B T precision pad accelerator]
 *     preset  distilbert-base | small | tiny                    (default distilbert-base)
 *     dropout hf: HF's defaults 0.1 / attention 0.1 / classifier 0.2 (attention dropout inside
 *             the fused kernel); off: all three 0               (default hf)
 *     precision 32-true (default) | bf16-mixed: the step's GEMM compute dtype bf16, f32
 *             parameters and AdamW (what the trainer's bf16-mixed plugin sets) | 16-mixed:
 *             f16 GEMMs and the trainer's grad scaler (precision/: the loss times the scale,
 *             the grads unscaled with the inf/NaN check, the step skipped on inf/NaN, the
 *             scale updated; under COMPILE=1 the skip is decided on the device)
 *     pad     none (default) | tail: a realistic padding tail, row b keeps
 *             T/2 + (7919 b mod T/2) + 1 tokens, the rest is [PAD] (id 0) with attention
 *             mask 0, as a batch of padded texts (bench/peer_distilbert.py: the same rows)
 *     accelerator cpu (default) | cuda | auto: where the parameters and the step live; on a
 *             GPU every step ends with a device synchronize, so ms/step is the whole step
 *             (bench/gpu/run.sh)
 *   VAL_STEPS=N (environment, default 10; 0: none): N validation batches (forward + loss, no
 *             grad, eval mode) timed after the training steps: val_ms_per_batch in the RESULT line
 *   COMPILE=1 (environment; a backend with graph capture, warmup >= 2): the second warm-up
 *             step is captured as a CUDA graph and the timed steps replay it (docs/CUDA.md)
 *   defaults: 5 steps after 2 warm-ups (the second runs in the arena regrown to the
 *   step's peak: its first touch), B = 8, T = 128. Threads: OMP_NUM_THREADS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "volt/volt.h"
#include "volt/distilbert.h"
#include "volt/precision.h"
#include "core/cpu/kernels.h"   /* volt__cpu_gemm_library: which GEMM library runs */
#include "core/internal.h"      /* volt__device_get: the synchronize of a GPU step */
#include "precision/precision.h"  /* 16-mixed: the trainer's grad scaler */
#ifdef VOLT_HAVE_CUDA
#include "core/cuda/memstat.h"  /* the device memory high-water */
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double cpu_now(void) {   /* CPU time of the process: all threads */
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* 16-mixed after a graph launch: the scaler's state read once; a step the graph skipped
 * (inf/NaN) takes the optimizer's step count back, as the trainer does (trainer/compile.c) */
static int amp_after_launch(volt_precision *amp, volt_optimizer *opt) {
    bool skip = false;
    if (!amp) return 0;
    amp->ops->read_back(amp, &skip);
    if (skip) volt_optimizer_set_step_count(opt, volt_optimizer_step_count(opt) - 1);
    return skip;
}

int main(int argc, char **argv) {
    const char *preset = argc > 1 ? argv[1] : "distilbert-base";
    int steps = argc > 2 ? atoi(argv[2]) : 5, warmup = argc > 3 ? atoi(argv[3]) : 2;
    const char *drop = argc > 4 ? argv[4] : "hf";
    int B = argc > 5 ? atoi(argv[5]) : 8, T = argc > 6 ? atoi(argv[6]) : 128;
    const char *prec = argc > 7 ? argv[7] : "32-true", *pad = argc > 8 ? argv[8] : "none";
    const char *acc = argc > 9 ? argv[9] : "cpu";
    bool bf16 = !strcmp(prec, "bf16-mixed"), f16 = !strcmp(prec, "16-mixed"), tail = !strcmp(pad, "tail");
    if (steps < 1 || steps > 1000 || warmup < 0 || B < 1 || T < 1 || (strcmp(drop, "hf") && strcmp(drop, "off")) ||
        (!bf16 && !f16 && strcmp(prec, "32-true")) || (!tail && strcmp(pad, "none"))) {
        fprintf(stderr, "usage: bench_distilbert [preset steps warmup hf|off B T 32-true|bf16-mixed|16-mixed none|tail "
                        "cpu|cuda|auto]\n");
        return 2;
    }
    volt_distilbert_config c;
    volt_distilbert_config_init(&c);
    if (volt_distilbert_preset(&c, preset)) { fprintf(stderr, "unknown preset '%s'\n", preset); return 2; }
    if (!strcmp(drop, "off")) c.dropout = c.attention_dropout = c.seq_classif_dropout = 0.f;
    void *m;
    volt_params_config pc;
    volt_params_config_init(&pc);
    pc.accelerator = acc;
    volt_device *dev = NULL;   /* to synchronize after each step (asynchronous backends) */
    char derr[256];
    if (volt__device_get(acc, 0, &dev, derr, sizeof derr) < 0) { fprintf(stderr, "%s\n", derr); return 2; }
    volt_params *ps;
    if (volt_distilbert_create(&c, &m) || volt_params_create(&pc, &ps)) return 1;
    if (volt_distilbert_ops.setup(m, ps) || volt_params_finalize(ps) || volt_distilbert_ops.init_weights(m, ps)) {
        fprintf(stderr, "%s\n", volt_params_errmsg(ps));
        return 1;
    }
    volt_optimizer_config oc;   /* the HF Trainer's optimizer */
    volt_optimizer_config_init(&oc);
    oc.kind = VOLT_OPTIM_ADAMW;
    oc.lr = 5e-5f;
    oc.weight_decay = 0.01f;
    volt_optimizer *opt;
    if (volt_optimizer_create(&oc, ps, &opt)) return 1;
    volt_step_config sc;
    volt_step_config_init(&sc);
    sc.params = ps;
    sc.backend = acc;
    volt_step *s;
    if (volt_step_create(&sc, &s)) return 1;
    if (bf16 && volt_step_set_compute_dtype(s, VOLT_BF16)) return 1;
    volt_precision *amp = NULL;   /* 16-mixed: the trainer's defaults (scale 2^16, growth 2 every 2000) */
    if (f16) {
        const volt_precision_config apc = { .name = "16-mixed", .init_scale = 65536.f, .growth_factor = 2.f,
                                            .backoff_factor = 0.5f, .growth_interval = 2000 };
        char perr[256];
        if (volt__precision_create(&apc, &amp, perr, sizeof perr) < 0) { fprintf(stderr, "%s\n", perr); return 1; }
        if (volt_step_set_compute_dtype(s, VOLT_F16)) return 1;
    }
    int64_t skipped = 0;

    int32_t *ids = malloc(sizeof(int32_t) * (size_t)B * T), *mask = malloc(sizeof(int32_t) * (size_t)B * T);
    int64_t *y = malloc(sizeof(int64_t) * (size_t)B);
    double *t = malloc(sizeof(double) * (size_t)steps), *tc = malloc(sizeof(double) * (size_t)steps);
    if (!ids || !mask || !y || !t || !tc) return 1;
    uint64_t r = 88172645463325252ull;   /* xorshift64 */
    for (int i = 0; i < B * T; i++) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        ids[i] = 1 + (int32_t)(r % (uint64_t)(c.vocab_size - 1));
        mask[i] = 1;
    }
    int64_t real = (int64_t)B * T;
    if (tail && T >= 2)
        for (int b = 0; b < B; b++) {
            int len = T / 2 + (int)((7919LL * b) % (T / 2)) + 1;
            for (int j = len; j < T; j++) { ids[b * T + j] = 0; mask[b * T + j] = 0; real--; }
        }
    for (int b = 0; b < B; b++) y[b] = b % 2;
    /* PAD=tail (bench/run_seed_shape.sh; the peer reads it too): row b keeps its first
     * T - b T / (2 B) tokens, then padding (id 0, mask 0), as a batch of real texts has */
    const char *pad_env = getenv("PAD");
    bool pad_tail = pad_env && !strcmp(pad_env, "tail");
    if (pad_tail)
        for (int b = 0; b < B; b++)
            for (int j = T - b * T / (2 * B); j < T; j++) {
                if (mask[b * T + j]) real--;
                ids[b * T + j] = mask[b * T + j] = 0;
            }

    /* COMPILE=1 (backends with graph capture: cuda): the first warm-up step runs eagerly, the
     * second is captured (forward, backward, optimizer step, zero grads) and every later step
     * replays the graph: the host writes the RNG offset and the optimizer's scalars, the
     * launch re-issues the batch's three H2D copies (from the graph's snapshot of ids/mask/y,
     * which do not change here: the trainer copies a batch to fixed device buffers instead;
     * docs/CUDA.md, "compile") */
    const char *cenv = getenv("COMPILE");
    const bool compile = cenv && *cenv && strcmp(cenv, "0");
    if (compile && (!volt__dev_has_graphs(dev) || warmup < 2)) {
        fprintf(stderr, "COMPILE=1 needs a backend with graph capture ('%s' has %s) and warmup >= 2\n", dev->be->name,
                volt__dev_has_graphs(dev) ? "it" : "none");
        return 2;
    }
    volt_device_graph *graph = NULL;
    char gerr[512] = "";
    double loss0 = 0;
    for (int it = -warmup; it < steps; it++) {
        double t0 = now(), c0 = cpu_now();
        if (graph) {   /* replay: the host half of a step, then one launch */
            s->rng_offset = (uint64_t)(it + warmup);
            volt__optimizer_advance(opt);
            if (dev->be->graph_launch(dev, graph, gerr, sizeof gerr) || volt_step_check(s)) {
                fprintf(stderr, "replay: %s%s\n", gerr, volt_step_errmsg(s));
                return 1;
            }
            skipped += amp_after_launch(amp, opt);
            dev->be->synchronize(dev);
            if (it >= 0) { t[it] = now() - t0; tc[it] = cpu_now() - c0; }
            continue;
        }
        const bool capturing = compile && it == -warmup + 1;
        if (capturing && volt__dev_graph_begin(dev, gerr, sizeof gerr)) { fprintf(stderr, "capture: %s\n", gerr); return 1; }
        volt_step_begin(s, true, (uint64_t)(it + warmup));
        /* the batch is copied to the step's device, as the trainer's transfer does */
        volt_tensor *lg = volt_distilbert_forward(m, s, volt_tensor_from_host(s, VOLT_I32, VOLT_SHAPE(B, T), ids),
                                                  volt_tensor_from_host(s, VOLT_I32, VOLT_SHAPE(B, T), mask));
        volt_tensor *loss = volt_cross_entropy(s, lg, volt_tensor_from_host(s, VOLT_I64, VOLT_SHAPE(B), y));
        if (!loss || volt_step_backward(s, amp ? amp->ops->scale_loss(amp, s, loss) : loss)) {
            fprintf(stderr, "%s\n", volt_step_errmsg(s));
            return 1;
        }
        if (it == -warmup) loss0 = volt_tensor_item(loss);
        if (!capturing) volt_step_end(s);
        /* 16-mixed: unscale + inf/NaN check, the step unless found (on the device when captured) */
        bool found = false;
        if (amp) amp->ops->unscale_grads(amp, ps, capturing ? NULL : &found);
        if (!found && volt__optimizer_step_unless(opt, amp && capturing ? amp->ops->skip_flag(amp) : NULL)) {
            fprintf(stderr, "%s\n", volt_optimizer_errmsg(opt));
            return 1;
        }
        volt_params_clear_grad(ps);   /* torch: optimizer.zero_grad() = set_to_none */
        if (amp && capturing) amp->ops->update_on_device(amp);
        else if (amp) { skipped += found; amp->ops->update(amp, found); }
        if (capturing) {
            if (volt__dev_graph_end(dev, &graph, gerr, sizeof gerr) || dev->be->graph_launch(dev, graph, gerr, sizeof gerr)) {
                fprintf(stderr, "capture: %s\n", gerr);
                return 1;
            }
            volt_step_end(s);   /* after the launch: its index checks read the error word */
            if (volt_step_status(s) < 0) { fprintf(stderr, "%s\n", volt_step_errmsg(s)); return 1; }
            skipped += amp_after_launch(amp, opt);
        }
        if (dev->be->synchronize) dev->be->synchronize(dev);
        if (it >= 0) {
            t[it] = now() - t0;
            tc[it] = cpu_now() - c0;
        }
    }
    /* the device memory high-water of everything so far (model, optimizer, training steps;
     * torch.cuda.max_memory_allocated over the peer's fit); -1: not a cuda device */
    double dev_peak_mib = -1;
#ifdef VOLT_HAVE_CUDA
    uint64_t dev_peak = 0;
    if (!strcmp(dev->be->name, "cuda") && volt__cuda_mem_peak(dev, &dev_peak, false) == VOLT_OK)
        dev_peak_mib = (double)dev_peak / 1048576.0;
#endif
    /* validation batches (VAL_STEPS, default 10, after 2 warm-ups): forward and the loss, no
     * grad, eval mode (dropout off), eager even under COMPILE=1, as the trainer's validation
     * loop runs them; the peer's validation_step does the same (bench/gpu/peer_lightning.py) */
    const char *venv = getenv("VAL_STEPS");
    const int vsteps = venv && *venv ? atoi(venv) : 10;
    double *tv = vsteps > 0 ? malloc(sizeof(double) * (size_t)vsteps) : NULL;
    if (vsteps > 0 && !tv) return 1;
    for (int it = vsteps > 0 ? -2 : 0; it < vsteps; it++) {
        double t0 = now();
        volt_step_begin(s, false, 0);
        volt_tensor *lg = volt_distilbert_forward(m, s, volt_tensor_from_host(s, VOLT_I32, VOLT_SHAPE(B, T), ids),
                                                  volt_tensor_from_host(s, VOLT_I32, VOLT_SHAPE(B, T), mask));
        volt_tensor *loss = volt_cross_entropy(s, lg, volt_tensor_from_host(s, VOLT_I64, VOLT_SHAPE(B), y));
        if (!loss) { fprintf(stderr, "validation: %s\n", volt_step_errmsg(s)); return 1; }
        volt_step_end(s);
        if (volt_step_status(s) < 0) { fprintf(stderr, "validation: %s\n", volt_step_errmsg(s)); return 1; }
        if (dev->be->synchronize) dev->be->synchronize(dev);
        if (it >= 0) tv[it] = now() - t0;
    }
    double vmed = 0;
    if (vsteps > 0) {
        qsort(tv, (size_t)vsteps, sizeof(double), cmp);
        vmed = tv[vsteps / 2];
    }
    qsort(t, (size_t)steps, sizeof(double), cmp);
    qsort(tc, (size_t)steps, sizeof(double), cmp);
    double med = t[steps / 2], cmed = tc[steps / 2];
    printf("volt DistilBERT training step, preset %s (%lld params), batch %d x %d (%lld real tokens), dropout %s, "
           "%s, AdamW, on %s; median of %d after %d warm-up; first loss %.4f; arena peak %.0f MiB; GEMM %s\n",
           preset, (long long)volt_params_numel(ps), B, T, (long long)real, drop, prec, volt_step_device(s), steps,
           warmup, loss0, (double)volt_step_arena_peak(s) / 1048576.0,
           strcmp(volt_step_device(s), "cuda") ? volt__cpu_gemm_library() : "cuBLASLt");
    printf("| %-6s | %10s | %10s | %10s | %10s | %12s |\n", "impl", "ms/step", "min ms", "max ms", "tokens/s",
           "CPU ms/step");
    if (compile) printf("compile: CUDA graph replay after %d eager and 1 captured warm-up step\n", warmup - 1);
    printf("|--------|------------|------------|------------|------------|--------------|\n");
    printf("| %-6s | %10.1f | %10.1f | %10.1f | %10.0f | %12.1f |\n", "volt", med * 1e3, t[0] * 1e3, t[steps - 1] * 1e3,
           (double)B * T / med, cmed * 1e3);
    if (pad_tail) printf("padding: PAD=tail (row b keeps T - b T / (2 B) tokens)\n");
    if (vsteps > 0) printf("validation: %.3f ms per batch of %d (median of %d, eager, no grad)\n", vmed * 1e3, B, vsteps);
    if (amp) printf("16-mixed: %lld of %d steps skipped by the grad scaler (inf/NaN), scale now %g\n", (long long)skipped,
                    warmup + steps, (double)amp->scaler.scale);
    if (dev_peak_mib >= 0) printf("device memory high-water over the training steps: %.1f MiB\n", dev_peak_mib);
    printf("RESULT volt%s %s ms_per_step=%.3f cpu_ms_per_step=%.3f samples_per_s=%.1f arena_peak_mib=%.1f params=%lld "
           "device=%s val_ms_per_batch=%.3f device_peak_mib=%.1f step_held_mib=%.1f\n", compile ? "-compile" : "", preset,
           med * 1e3, cmed * 1e3, B / med, (double)volt_step_arena_peak(s) / 1048576.0, (long long)volt_params_numel(ps),
           volt_step_device(s), vmed * 1e3, dev_peak_mib, (double)volt_step_mem_held(s) / 1048576.0);
    if (graph) dev->be->graph_destroy(dev, graph);
    volt_step_destroy(s);
    volt__precision_destroy(amp);
    volt_optimizer_destroy(opt);
    volt_params_destroy(ps);
    volt_distilbert_destroy(m);
    free(ids); free(mask); free(y); free(t); free(tc); free(tv);
    return 0;
}
