/* NCCL on one GPU and the projected multi-GPU scaling of the seed step (issue 12).
 *
 * Measured: the "nccl" comm at world size 1 (one process, one GPU) all-reducing the
 * DistilBERT grad buckets ddp reduces — one per parameter unit, the model's own unit sizes —
 * in f32 and bf16: time per call (device-synchronized around ITERS calls) and bytes/s. At
 * world size 1 NCCL moves nothing between GPUs, so this measures its per-call cost and the
 * local copy, not a link.
 * Projected (says so on every line): ddp / zero2 / fsdp at N = 2, 4, 8 GPUs from the measured
 * single-GPU step time STEP_MS (bench/gpu/run.sh passes volt's best row), the measured per-call
 * cost, and an assumed bus bandwidth LINK_GBPS (default 450 GB/s: NVLink 4 all-reduce bus
 * bandwidth of nccl-tests on H100/H200 SXM nodes; a PCIe machine is far lower). Ring
 * collectives move 2(N-1)/N of the bytes per GPU for an all-reduce and (N-1)/N for a
 * reduce-scatter or an all-gather. The model:
 *   ddp:   buckets are all-reduced as backward produces them, in reverse unit order, so all
 *          but the last bucket (the embeddings, reduced last) overlap the rest of backward
 *          (BWD_FRAC of the step, default 0.6); exposed = max(last bucket, all - backward).
 *   zero2: the same reduce-scatter volume overlapped the same way (half the bytes), plus the
 *          all-gather of the updated parameters after the optimizer step, one per unit,
 *          launched at the step and each waited at its unit's first use in the next forward
 *          (strategies/parallel/zero.c): the first unit's gather (the embeddings, the
 *          largest) is exposed, the others travel under forward (1 - BWD_FRAC of the step)
 *          and only what outlasts it shows: exposed = first + max(0, rest - forward).
 *   fsdp:  all-gather of every unit in forward and again in backward, prefetched one unit
 *          ahead (the first unit of each pass exposed), reduce-scatter overlapped as ddp's.
 * Efficiency = T1 / TN per added GPU's share (T1 / TN, as a data-parallel job with a fixed
 * per-GPU batch scales throughput by N T1 / TN). T1 is each strategy's own one-GPU step: ddp
 * compiles (STEP_MS, the compiled step), zero2 and fsdp do not (their pages are mapped and
 * unmapped inside the step, docs/NCCL.md): STEP_MS_EAGER, the eager step (default STEP_MS).
 *   usage: bench_nccl [iters]   env STEP_MS (default 6.5), STEP_MS_EAGER (STEP_MS), LINK_GBPS
 *                               (450), BWD_FRAC (0.6), PRESET (distilbert-base)
 * Needs a cuda + NCCL build and a GPU; else it says why and exits 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "volt/volt.h"
#include "volt/distilbert.h"
#include "core/internal.h"
#ifdef VOLT_HAVE_NCCL
#include "strategies/comm/comm.h"
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double env_d(const char *name, double dflt) {
    const char *e = getenv(name);
    return e && *e ? atof(e) : dflt;
}

#ifdef VOLT_HAVE_NCCL
enum { MAXU = 64 };

int main(int argc, char **argv) {
    const int iters = argc > 1 ? atoi(argv[1]) : 20;
    const double step_ms = env_d("STEP_MS", 6.5), link = env_d("LINK_GBPS", 450), bwd_frac = env_d("BWD_FRAC", 0.6);
    const double eager_ms = env_d("STEP_MS_EAGER", step_ms);
    const char *preset = getenv("PRESET") && *getenv("PRESET") ? getenv("PRESET") : "distilbert-base";
    if (iters < 1 || !(step_ms > 0) || !(eager_ms > 0) || !(link > 0) || !(bwd_frac > 0 && bwd_frac < 1)) {
        fprintf(stderr, "usage: bench_nccl [iters >= 1]; STEP_MS > 0, STEP_MS_EAGER > 0, LINK_GBPS > 0, 0 < BWD_FRAC < 1\n");
        return 2;
    }
    char err[768] = "";
    volt_device *dev = NULL;
    if (volt__device_get("cuda", 0, &dev, err, sizeof err) < 0) { fprintf(stderr, "bench_nccl: %s\n", err); return 2; }
    /* the buckets: the parameter units of the model, as ddp reduces them */
    volt_distilbert_config c;
    volt_distilbert_config_init(&c);
    if (volt_distilbert_preset(&c, preset)) { fprintf(stderr, "bench_nccl: unknown preset '%s'\n", preset); return 2; }
    void *m;
    volt_params_config pc;
    volt_params_config_init(&pc);
    pc.accelerator = "cuda";
    volt_params *ps;
    if (volt_distilbert_create(&c, &m) || volt_params_create(&pc, &ps)) return 1;
    if (volt_distilbert_ops.setup(m, ps) || volt_params_finalize(ps)) { fprintf(stderr, "%s\n", volt_params_errmsg(ps)); return 1; }
    int nu = volt_params_unit_count(ps);
    if (nu > MAXU) nu = MAXU;
    int64_t un[MAXU], total = 0, largest = 0;
    for (int i = 0; i < nu; i++) {
        un[i] = volt_unit_numel(volt_params_unit_at(ps, i));
        total += un[i];
        if (un[i] > largest) largest = un[i];
    }
    volt_comm_config cc;
    volt__comm_config_init(&cc);
    cc.timeout_s = 60;
    volt_comm *comm = NULL;
    if (volt__comm_create_for(dev, &cc, &comm, err, sizeof err) < 0) { fprintf(stderr, "bench_nccl: %s\n", err); return 1; }
    void *buf = volt__dev_alloc(dev, (size_t)largest * 4);
    if (!buf) { fprintf(stderr, "bench_nccl: out of device memory\n"); return 1; }
    volt__dev_memset(dev, buf, 0, (size_t)largest * 4);
    printf("bench_nccl: comm %s, world %d, preset %s: %d units (buckets), %lld parameters; %d calls per bucket\n",
           comm->ops->name, comm->world, preset, nu, (long long)total, iters);
    printf("| dtype | bucket | MiB | us per all_reduce | GB/s (local, world 1) |\n|---|---|---:|---:|---:|\n");
    double call_us[2] = { 0, 0 }, total_s[2] = { 0, 0 };   /* per dtype: smallest call, time of all buckets */
    const volt_comm_dtype dts[2] = { VOLT_COMM_F32, VOLT_COMM_BF16 };
    const char *dname[2] = { "f32", "bf16" };
    for (int k = 0; k < 2; k++) {
        call_us[k] = 1e30;
        for (int i = 0; i < nu; i++) {
            const size_t bytes = (size_t)un[i] * volt__comm_dtype_size(dts[k]);
            for (int w = 0; w < 3; w++)
                if (volt__comm_all_reduce(comm, buf, buf, (size_t)un[i], dts[k], VOLT_COMM_AVG, "warm-up") < 0) goto fail;
            dev->be->synchronize(dev);
            const double t0 = now();
            for (int r = 0; r < iters; r++)
                if (volt__comm_all_reduce(comm, buf, buf, (size_t)un[i], dts[k], VOLT_COMM_AVG, "bench") < 0) goto fail;
            dev->be->synchronize(dev);
            const double per = (now() - t0) / iters;
            total_s[k] += per;
            if (per * 1e6 < call_us[k]) call_us[k] = per * 1e6;
            printf("| %s | %s | %.1f | %.1f | %.1f |\n", dname[k], volt_unit_name(volt_params_unit_at(ps, i)),
                   bytes / 1048576.0, per * 1e6, bytes / per / 1e9);
        }
        printf("RESULT nccl world1 %s all_reduce_all_buckets_ms=%.3f min_call_us=%.1f\n", dname[k], total_s[k] * 1e3,
               call_us[k]);
    }
    /* the projection (f32 grads: ddp's default reduce dtype) */
    printf("\nprojected scaling (NOT measured on several GPUs): one-GPU step %.3f ms compiled (STEP_MS: ddp), %.3f ms "
           "eager (STEP_MS_EAGER: zero2, fsdp, which do not compile), bus bandwidth %.0f GB/s assumed (LINK_GBPS), "
           "per-call cost %.1f us measured, backward %.0f%% of the step (BWD_FRAC)\n",
           step_ms, eager_ms, link, call_us[0], bwd_frac * 100);
    printf("| strategy | N | comm ms | exposed ms | step ms | efficiency |\n|---|---:|---:|---:|---:|---:|\n");
    const double G = (double)total * 4, last = (double)un[0] * 4;   /* the embeddings: unit 0, reduced last */
    const double lat = call_us[0] * 1e-3 * nu;
    for (int n = 2; n <= 8; n *= 2) {
        const double ar = 2.0 * (n - 1) / n / (link * 1e9) * 1e3, rs = (double)(n - 1) / n / (link * 1e9) * 1e3;   /* ms/byte */
        struct { const char *name; double t1, comm, exposed; } row[3];
        /* ddp: all-reduce of every bucket; all but the last hide behind the rest of backward */
        row[0].name = "ddp";
        row[0].t1 = step_ms;
        row[0].comm = G * ar + lat;
        const double bwd0 = step_ms * bwd_frac;
        row[0].exposed = row[0].comm - bwd0 > last * ar ? row[0].comm - bwd0 : last * ar;
        /* zero2: reduce-scatter overlapped as ddp's; the all-gather of the updated params
         * overlaps the next forward, the first unit's (the embeddings') exposed */
        row[1].name = "zero2";
        row[1].t1 = eager_ms;
        const double bwd = eager_ms * bwd_frac, fwd = eager_ms - bwd;
        const double rs_ms = G * rs + lat, ag_ms = G * rs + lat;
        const double ag_first = last * rs + call_us[0] * 1e-3, ag_rest = ag_ms - ag_first;
        row[1].comm = rs_ms + ag_ms;
        row[1].exposed = (rs_ms - bwd > last * rs ? rs_ms - bwd : last * rs) + ag_first + (ag_rest > fwd ? ag_rest - fwd : 0);
        /* fsdp: all-gather in forward and in backward (prefetched: the first unit of each pass
         * exposed), reduce-scatter as zero2's; compute hides the rest when it is longer */
        row[2].name = "fsdp";
        row[2].t1 = eager_ms;
        const double ag2 = 2 * (G * rs + lat), first = 2 * last * rs;
        row[2].comm = ag2 + rs_ms;
        const double hidden = eager_ms - first;
        row[2].exposed = first + (ag2 + rs_ms - first > hidden ? ag2 + rs_ms - first - hidden : 0) + last * rs;
        for (int r = 0; r < 3; r++) {
            const double tn = row[r].t1 + row[r].exposed;
            printf("| %s | %d | %.3f | %.3f | %.3f | %.3f |\n", row[r].name, n, row[r].comm, row[r].exposed, tn, row[r].t1 / tn);
            printf("RESULT nccl projected %s n=%d step_ms=%.3f efficiency=%.3f (assumed %.0f GB/s)\n", row[r].name, n, tn,
                   row[r].t1 / tn, link);
        }
    }
    volt__dev_free(dev, buf);
    volt__comm_destroy(comm);
    volt_params_destroy(ps);
    volt_distilbert_destroy(m);
    return 0;
fail:
    fprintf(stderr, "bench_nccl: all_reduce: %s\n", volt__comm_errmsg(comm));
    return 1;
}
#else
int main(void) {
    (void)now;
    (void)env_d;
    fprintf(stderr, "bench_nccl: volt was built without NCCL (needs the cuda backend and nccl.h)\n");
    return 2;
}
#endif
