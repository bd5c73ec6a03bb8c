/* bench_attention: volt_attention forward and forward+backward at DistilBERT sizes
 * (B=8, H=12, D=64, T=128 and 512), with and without a padding mask and causal.
 *
 * Peer, measured in the same run: "gemm floor" = the same GEMMs attention needs (2 in
 * forward: q k^T and P v; 5 more in backward: recompute q k^T, P^T dO, dO v^T, dS k,
 * dS^T q), on the full (T, T) blocks, parallel over (b, h) like volt, with no softmax,
 * masking or bookkeeping. ratio = volt / floor (1.0 = attention costs only its GEMMs;
 * below 1 when masking lets volt skip keys).
 *
 *   bench_attention [iters]      (threads: OMP_NUM_THREADS)
 *
 *   bench_attention seed [iters] the seed's shape: B=12, H=12, T=512, D=64, a padding tail
 *     (row b keeps T - b T / (2 B) keys, as bench_distilbert's PAD=tail), forward +
 *     backward of volt_attention_dropout at p = 0.1 and p = 0 and of the unfused
 *     composition dropout(softmax(scale q k^T + bias), 0.1) v, with each one's arena peak;
 *     prints the attention FLOPs (6 GEMMs on the visible keys: 2 forward, 4 backward) for
 *     bench/run_seed_shape.sh, which sets them against a DistilBERT step.
 *
 *   bench_attention profile [steps] the attention share of a distilbert-base training step
 *     (HF dropouts, 12 x 512, the same padding tail, AdamW), in one process: after each step
 *     one volt_attention_dropout fwd + bwd at the step's attention shape (B=12 H=12 T=512
 *     D=64, p 0.1) is timed, so both see the same machine load; prints 6 x attention / step
 *     (wall and process CPU time) against the attention FLOP share of the step. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "volt/volt.h"
#include "volt/distilbert.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_now(void) {   /* CPU time of the process: all threads */
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    return t[n / 2];
}

/* The GEMMs of one attention forward (+ backward) on full blocks. */
static void gemm_floor(int64_t BH, int64_t T, int64_t D, const float *q, const float *k, const float *v,
                       const float *g, float *o, float *dq, float *dk, float *dv, float *scratch, bool bwd) {
    #pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < BH; bh++) {
        float *S = scratch + (size_t)omp_get_thread_num() * 2 * T * T, *dP = S + T * T;
        const float *qb = q + bh * T * D, *kb = k + bh * T * D, *vb = v + bh * T * D, *gb = g + bh * T * D;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, 0.125f, qb, D, kb, D, 0.f, S, T);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, 1.f, S, T, vb, D, 0.f, o + bh * T * D, D);
        if (!bwd) continue;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, 0.125f, qb, D, kb, D, 0.f, S, T);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, 1.f, S, T, gb, D, 1.f, dv + bh * T * D, D);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, 1.f, gb, D, vb, D, 0.f, dP, T);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, 0.125f, dP, T, kb, D, 1.f, dq + bh * T * D, D);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, 0.125f, dP, T, qb, D, 1.f, dk + bh * T * D, D);
    }
}

typedef struct run_cfg { int64_t T; bool mask, causal; } run_cfg;

/* ---- the seed's shape ------------------------------------------------------------------ */
typedef enum { SEED_FUSED, SEED_FUSED_P0, SEED_UNFUSED } seed_kind;

/* HF's attention in public ops (what volt_attention_dropout replaces): bias (B*H, T, T) */
static volt_tensor *unfused(volt_step *s, volt_tensor *q, volt_tensor *k, volt_tensor *v, volt_tensor *bias,
                            int64_t B, int64_t H, int64_t T, int64_t D, float p) {
    volt_tensor *q3 = volt_reshape(s, volt_scale(s, q, 0.125f), VOLT_SHAPE(B * H, T, D));
    volt_tensor *kt = volt_reshape(s, volt_transpose(s, k, 2, 3), VOLT_SHAPE(B * H, D, T));
    volt_tensor *probs = volt_dropout(s, volt_softmax(s, volt_add(s, volt_matmul(s, q3, kt), bias)), p);
    return volt_reshape(s, volt_matmul(s, probs, volt_reshape(s, v, VOLT_SHAPE(B * H, T, D))), VOLT_SHAPE(B, H, T, D));
}

static int seed_shape(int iters) {
    const int64_t B = 12, H = 12, T = 512, D = 64, N = B * H * T * D;
    float *q = malloc(sizeof(float) * (size_t)N), *k = malloc(sizeof(float) * (size_t)N),
          *v = malloc(sizeof(float) * (size_t)N), *g = malloc(sizeof(float) * (size_t)N);
    uint8_t *mask = malloc((size_t)(B * T));
    if (!q || !k || !v || !g || !mask) return 1;
    for (int64_t t = 0; t < N; t++) {
        q[t] = (float)((t * 2654435761u) % 1000) / 500.f - 1.f;
        k[t] = (float)((t * 40503u + 7) % 1000) / 500.f - 1.f;
        v[t] = (float)((t * 9973u + 3) % 1000) / 500.f - 1.f;
        g[t] = (float)((t * 7919u + 1) % 1000) / 500.f - 1.f;
    }
    double keys = 0;   /* sum over rows b of T * (visible keys of b) */
    for (int64_t b = 0; b < B; b++) {
        int64_t L = T - b * T / (2 * B);
        for (int64_t j = 0; j < T; j++) mask[b * T + j] = j < L;
        keys += (double)T * (double)L;
    }
    double gflop = 6 * 2 * (double)H * (double)D * keys / 1e9;
    printf("attention at the seed's shape: B=%lld H=%lld T=%lld D=%lld, padding tail (row b keeps T - b T / (2 B) keys), "
           "%d threads, median of %d after 1 warm-up\n", (long long)B, (long long)H, (long long)T, (long long)D,
           omp_get_max_threads(), iters);
    printf("attention FLOPs (6 GEMMs on visible keys) %.2f GFLOP per call\n", gflop);
    printf("| %-34s | %12s | %12s | %12s | %10s |\n", "impl", "fwd+bwd ms", "CPU ms", "GFLOP/s", "arena MiB");
    printf("|------------------------------------|--------------|--------------|--------------|------------|\n");
    const char *names[3] = { "volt_attention_dropout p 0.1", "volt_attention_dropout p 0", "unfused softmax+dropout p 0.1" };
    double fused_ms = 0, fused_cpu = 0;
    for (int kind = 0; kind < 3; kind++) {
        volt_step_config cfg;
        volt_step_config_init(&cfg);
        cfg.arena_bytes = (size_t)64 << 20;
        cfg.seed = 42;
        volt_step *s;
        if (volt_step_create(&cfg, &s) != VOLT_OK) return 1;
        double t[16], tc[16];
        int n = kind == SEED_UNFUSED ? 1 : (iters < 16 ? iters : 16);
        for (int it = -1; it < n; it++) {
            volt_step_begin(s, true, 3);
            volt_tensor *tq = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), q));
            volt_tensor *tk = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), k));
            volt_tensor *tv = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), v));
            volt_tensor *tm = volt_tensor_wrap(s, VOLT_U8, VOLT_SHAPE(B, T), mask);
            volt_tensor *bias = NULL;
            if (kind == SEED_UNFUSED) {   /* built before the clock starts, as the model did once per step */
                bias = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(B * H, T, T));
                if (!bias) return 1;
                float *d = bias->data;
                for (int64_t r = 0; r < B * H * T; r++)
                    for (int64_t j = 0; j < T; j++) d[r * T + j] = mask[r / (H * T) * T + j] ? 0.f : -1e30f;
            }
            double t0 = now(), c0 = cpu_now();
            volt_tensor *o = kind == SEED_UNFUSED ? unfused(s, tq, tk, tv, bias, B, H, T, D, 0.1f)
                                                  : volt_attention_dropout(s, tq, tk, tv, tm, false,
                                                                           kind == SEED_FUSED ? 0.1f : 0.f);
            if (!o || volt_step_backward_grad(s, o, g) != VOLT_OK) {
                fprintf(stderr, "attention failed: %s\n", volt_step_errmsg(s));
                return 1;
            }
            double t1 = now(), c1 = cpu_now();
            volt_step_end(s);
            if (it >= 0) {
                t[it] = 1e3 * (t1 - t0);
                tc[it] = 1e3 * (c1 - c0);
            }
        }
        double ms = median(t, n), cms = median(tc, n);
        if (kind == SEED_FUSED) {
            fused_ms = ms;
            fused_cpu = cms;
        }
        printf("| %-34s | %12.1f | %12.1f | %12.1f | %10.0f |\n", names[kind], ms, cms, gflop / ms * 1e3,
               (double)volt_step_arena_peak(s) / 1048576.0);
        volt_step_destroy(s);
    }
    printf("RESULT attention fwd_bwd_ms=%.3f cpu_ms=%.3f gflop=%.4f\n", fused_ms, fused_cpu, gflop);
    free(q); free(k); free(v); free(g); free(mask);
    return 0;
}

/* ---- attention inside a DistilBERT step ------------------------------------------------ */
static int profile(int steps) {
    const int64_t B = 12, T = 512, H = 12, Dh = 64, N = B * H * T * Dh, D = 768, F = 3072;
    volt_distilbert_config c;
    volt_distilbert_config_init(&c);   /* HF dropouts */
    volt_distilbert_preset(&c, "distilbert-base");
    void *m;
    volt_params_config pc;
    volt_params_config_init(&pc);
    volt_params *ps;
    if (volt_distilbert_create(&c, &m) || volt_params_create(&pc, &ps)) return 1;
    if (volt_distilbert_ops.setup(m, ps) || volt_params_finalize(ps) || volt_distilbert_ops.init_weights(m, ps)) return 1;
    volt_optimizer_config oc;
    volt_optimizer_config_init(&oc);
    oc.kind = VOLT_OPTIM_ADAMW;
    oc.lr = 5e-5f;
    oc.weight_decay = 0.01f;
    volt_optimizer *opt;
    if (volt_optimizer_create(&oc, ps, &opt)) return 1;
    volt_step_config sc;
    volt_step_config_init(&sc);
    sc.params = ps;
    sc.seed = 42;
    volt_step *s, *sa;
    if (volt_step_create(&sc, &s)) return 1;
    sc.params = NULL;
    if (volt_step_create(&sc, &sa)) return 1;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(B * T)), *mask = malloc(sizeof(int32_t) * (size_t)(B * T));
    int64_t *y = malloc(sizeof(int64_t) * (size_t)B);
    float *q = malloc(sizeof(float) * (size_t)N), *k = malloc(sizeof(float) * (size_t)N),
          *v = malloc(sizeof(float) * (size_t)N), *g = malloc(sizeof(float) * (size_t)N);
    if (!ids || !mask || !y || !q || !k || !v || !g) return 1;
    double keys = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t L = T - b * T / (2 * B);   /* bench_distilbert's PAD=tail */
        for (int64_t j = 0; j < T; j++) {
            ids[b * T + j] = j < L ? 1 + (int32_t)((b * T + j) * 7919 % 30000) : 0;
            mask[b * T + j] = j < L;
        }
        keys += (double)T * (double)L;
        y[b] = b % 2;
    }
    for (int64_t t = 0; t < N; t++) {
        q[t] = (float)((t * 2654435761u) % 1000) / 500.f - 1.f;
        k[t] = (float)((t * 40503u + 7) % 1000) / 500.f - 1.f;
        v[t] = (float)((t * 9973u + 3) % 1000) / 500.f - 1.f;
        g[t] = (float)((t * 7919u + 1) % 1000) / 500.f - 1.f;
    }
    double att_gflop = 6 * 2 * (double)H * (double)Dh * keys / 1e9;
    double lin_gflop = 6 * 3 * 2 * (double)(B * T) * (double)(4 * D * D + 2 * D * F) / 1e9;
    double share = 6 * att_gflop / (6 * att_gflop + lin_gflop);
    double st = 0, sc_ = 0, at = 0, ac = 0;
    int n = 0;
    for (int it = -1; it < steps; it++) {
        double t0 = now(), c0 = cpu_now();
        volt_step_begin(s, true, (uint64_t)(it + 1));
        volt_tensor *lg = volt_distilbert_forward(m, s, volt_tensor_wrap(s, VOLT_I32, VOLT_SHAPE(B, T), ids),
                                                  volt_tensor_wrap(s, VOLT_I32, VOLT_SHAPE(B, T), mask));
        volt_tensor *loss = volt_cross_entropy(s, lg, volt_tensor_wrap(s, VOLT_I64, VOLT_SHAPE(B), y));
        if (!loss || volt_step_backward(s, loss)) { fprintf(stderr, "%s\n", volt_step_errmsg(s)); return 1; }
        volt_step_end(s);
        if (volt_optimizer_step(opt)) return 1;
        volt_params_zero_grad(ps);
        double t1 = now(), c1 = cpu_now();
        volt_step_begin(sa, true, 3);
        volt_tensor *tq = volt_tensor_requires_grad(sa, volt_tensor_wrap(sa, VOLT_F32, VOLT_SHAPE(B, H, T, Dh), q));
        volt_tensor *tk = volt_tensor_requires_grad(sa, volt_tensor_wrap(sa, VOLT_F32, VOLT_SHAPE(B, H, T, Dh), k));
        volt_tensor *tv = volt_tensor_requires_grad(sa, volt_tensor_wrap(sa, VOLT_F32, VOLT_SHAPE(B, H, T, Dh), v));
        volt_tensor *o = volt_attention_dropout(sa, tq, tk, tv, volt_tensor_wrap(sa, VOLT_I32, VOLT_SHAPE(B, T), mask),
                                                false, 0.1f);
        if (!o || volt_step_backward_grad(sa, o, g)) { fprintf(stderr, "%s\n", volt_step_errmsg(sa)); return 1; }
        volt_step_end(sa);
        double t2 = now(), c2 = cpu_now();
        printf("step %d: %.1f ms (CPU %.1f); attention fwd+bwd %.1f ms (CPU %.1f)%s\n", it, 1e3 * (t1 - t0),
               1e3 * (c1 - c0), 1e3 * (t2 - t1), 1e3 * (c2 - c1), it < 0 ? " (warm-up)" : "");
        if (it >= 0) {
            st += t1 - t0; sc_ += c1 - c0; at += t2 - t1; ac += c2 - c1; n++;
        }
    }
    printf("distilbert-base step, 12 x 512 with a padding tail, HF dropouts, %d threads, mean of %d after 1 warm-up: "
           "%.1f ms (CPU %.1f); arena peak %.0f MiB\n", omp_get_max_threads(), n, 1e3 * st / n, 1e3 * sc_ / n,
           (double)volt_step_arena_peak(s) / 1048576.0);
    printf("attention (volt_attention_dropout p 0.1) fwd+bwd per layer: %.1f ms (CPU %.1f), %.1f GFLOP/s\n", 1e3 * at / n,
           1e3 * ac / n, att_gflop / (at / n));
    printf("6 layers of attention: %.1f%% of the step (CPU %.1f%%); FLOP share %.1f%% (%.0f of %.0f GFLOP); "
           "time share / FLOP share %.2f (CPU %.2f)\n", 100 * 6 * at / st, 100 * 6 * ac / sc_, 100 * share,
           6 * att_gflop, 6 * att_gflop + lin_gflop, (6 * at / st) / share, (6 * ac / sc_) / share);
    volt_step_destroy(s); volt_step_destroy(sa); volt_optimizer_destroy(opt); volt_params_destroy(ps);
    volt_distilbert_destroy(m);
    free(ids); free(mask); free(y); free(q); free(k); free(v); free(g);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "profile")) return profile(argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 2);
    if (argc > 1 && !strcmp(argv[1], "seed")) return seed_shape(argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 3);
    int iters = argc > 1 ? atoi(argv[1]) : 10;
    if (iters < 1) iters = 1;
    const int64_t B = 8, H = 12, D = 64;
    run_cfg runs[] = { { 128, false, false }, { 128, true, false }, { 128, false, true },
                       { 512, false, false }, { 512, true, false }, { 512, false, true } };
    volt_step_config cfg;
    volt_step_config_init(&cfg);
    cfg.arena_bytes = (size_t)256 << 20;
    volt_step *s;
    if (volt_step_create(&cfg, &s) != VOLT_OK) { fprintf(stderr, "step_create failed\n"); return 1; }
    printf("volt_attention, B=%lld H=%lld D=%lld, %d threads, median of %d\n", (long long)B, (long long)H,
           (long long)D, omp_get_max_threads(), iters);
    printf("%-5s %-6s %-7s | %10s %10s | %10s %10s | %8s %8s\n", "T", "mask", "causal", "fwd ms", "fwd+bwd ms",
           "floor fwd", "floor f+b", "ratio f", "ratio fb");
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        int64_t T = runs[r].T, N = B * H * T * D;
        float *q = malloc(sizeof(float) * (size_t)N), *k = malloc(sizeof(float) * (size_t)N),
              *v = malloc(sizeof(float) * (size_t)N), *g = malloc(sizeof(float) * (size_t)N);
        float *o = malloc(sizeof(float) * (size_t)N), *dq = calloc((size_t)N, sizeof(float)),
              *dk = calloc((size_t)N, sizeof(float)), *dv = calloc((size_t)N, sizeof(float));
        float *scratch = malloc(sizeof(float) * 2 * (size_t)(T * T) * (size_t)omp_get_max_threads());
        for (int64_t t = 0; t < N; t++) {
            q[t] = (float)((t * 2654435761u) % 1000) / 500.f - 1.f;
            k[t] = (float)((t * 40503u + 7) % 1000) / 500.f - 1.f;
            v[t] = (float)((t * 9973u + 3) % 1000) / 500.f - 1.f;
            g[t] = (float)((t * 7919u + 1) % 1000) / 500.f - 1.f;
        }
        /* padding as in a real batch: sequence b keeps T - 12*b tokens */
        static uint8_t mask[8 * 512];   /* (B, T) */
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < T; j++) mask[b * T + j] = j < T - 12 * b * (T / 128);
        double tf[64], tfb[64], pf[64], pfb[64];
        if (iters > 64) iters = 64;
        for (int it = -2; it < iters; it++) {
            for (int bwd = 0; bwd < 2; bwd++) {
                volt_step_begin(s, true, 0);
                volt_tensor *tq = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), q);
                volt_tensor *tk = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), k);
                volt_tensor *tv = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), v);
                volt_tensor *tm = runs[r].mask ? volt_tensor_wrap(s, VOLT_U8, VOLT_SHAPE(B, T), mask) : NULL;
                volt_tensor_requires_grad(s, tq);
                volt_tensor_requires_grad(s, tk);
                volt_tensor_requires_grad(s, tv);
                double t0 = now();
                volt_tensor *out = volt_attention(s, tq, tk, tv, tm, runs[r].causal);
                if (!out || (bwd && volt_step_backward_grad(s, out, g) != VOLT_OK)) {
                    fprintf(stderr, "attention failed: %s\n", volt_step_errmsg(s));
                    return 1;
                }
                double t1 = now();
                volt_step_end(s);
                if (it >= 0) (bwd ? tfb : tf)[it] = 1e3 * (t1 - t0);
                t0 = now();
                gemm_floor(B * H, T, D, q, k, v, g, o, dq, dk, dv, scratch, bwd);
                t1 = now();
                if (it >= 0) (bwd ? pfb : pf)[it] = 1e3 * (t1 - t0);
            }
        }
        double mf = median(tf, iters), mfb = median(tfb, iters), fl = median(pf, iters), flb = median(pfb, iters);
        printf("%-5lld %-6s %-7s | %10.2f %10.2f | %10.2f %10.2f | %8.2f %8.2f\n", (long long)T,
               runs[r].mask ? "pad" : "-", runs[r].causal ? "yes" : "-", mf, mfb, fl, flb, mf / fl, mfb / flb);
        free(q); free(k); free(v); free(g); free(o); free(dq); free(dk); free(dv); free(scratch);
    }
    printf("arena peak %.1f MiB\n", (double)volt_step_arena_peak(s) / (1 << 20));
    volt_step_destroy(s);
    return 0;
}
