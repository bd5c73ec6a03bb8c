/* CPU GEMMs (core/cpu/kernels.h): oneDNN matmul primitives, OpenBLAS where it is faster.
 *
 * oneDNN (Debian libdnnl 2.6) picks its AVX-512 / AVX512-BF16 / AMX kernels from the CPU at
 * run time; the Debian OpenBLAS runs here with its Haswell (AVX2) kernels. A primitive is
 * made for one shape (transposes, M, N, K, leading dimensions, batch strides, alpha, beta,
 * bias or not, operand dtype) the first time that shape is seen, and kept in a small cache
 * of the calling thread, with its memory objects and its scratchpad (user scratchpad mode):
 * the steady-state step creates no primitive and volt allocates nothing per call (oneDNN's
 * execute still builds its small argument map internally).
 *
 * Per-thread caches: a GEMM may run inside an OpenMP parallel region (one GEMM per thread
 * over a batch, the fused attention's rows), where oneDNN runs it on the calling thread.
 * Memory objects are re-pointed at every call, so they cannot be shared between threads.
 *
 * Packed B (volt__cpu_gemm_op.b_packed, bf16 only): given B in the blocked layout its
 * AVX512-BF16 kernel reads (BA16a64b2a, written by volt__cpu_pack_b_bf16 in cast.c), the
 * primitive skips the copy of B into that layout that it otherwise makes on every call. The
 * linears pack their B operands so (core/cpu/basic.c); the result is bit-for-bit the plain
 * one (tests/test_gemm.c). f32 is not packed: there the pack would be an extra pass over W
 * rather than a conversion done another way, and it was only measured in isolation (the
 * 2026-12-02 third-session entry of docs/BENCHMARKS.md).
 *
 * Determinism: a primitive's blocking depends only on its shape and the thread count, and
 * oneDNN's CPU matmul reduces K in a fixed order: the same inputs and threads give the
 * same bits run to run (tests/test_gemm.c checks it).
 *
 * VOLT_GEMM=openblas|onednn (environment, read once) forces one library for every f32
 * GEMM, whatever its size (benchmarks and tests compare them); VOLT_CPU_BF16=0 turns the native bf16 path off. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_version.h>
#include "core/cpu/kernels.h"
#include "volt/dtype.h"

#define CACHE_SLOTS 256   /* primitives per thread; least recently used is replaced */

typedef struct {
    int64_t batch, M, N, K, lda, ldb, ldc, sa, sb, sc;
    uint32_t alpha, beta;   /* bit patterns */
    uint8_t ta, tb, ab, bias, nested, bpack, pad_[2];
} gemm_key;

typedef struct {
    gemm_key k;
    uint64_t hash, last;    /* hash 0: empty slot */
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c, bias, scratch;
} gemm_entry;

typedef struct {
    gemm_entry e[CACHE_SLOTS];
    uint64_t clock;
    dnnl_stream_t stream;
} gemm_cache;

static _Thread_local gemm_cache *tl_cache;
static _Thread_local bool tl_cache_failed;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t g_engine;
static bool g_use_onednn, g_force_onednn, g_bf16_native;
static char g_name[96];

static void gemm_init(void) {
    const char *lib = getenv("VOLT_GEMM"), *bf = getenv("VOLT_CPU_BF16");
    bool want = !(lib && !strcmp(lib, "openblas"));
    g_use_onednn = want && dnnl_engine_create(&g_engine, dnnl_cpu, 0) == dnnl_success;
    g_force_onednn = g_use_onednn && lib && !strcmp(lib, "onednn");
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    g_bf16_native = g_use_onednn && !(bf && !strcmp(bf, "0")) &&
                    ((unsigned)isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) == (unsigned)dnnl_cpu_isa_avx512_core_bf16;
    const dnnl_version_t *v = dnnl_version();
    const char *isa_name = ((unsigned)isa & 0x3e7u) == 0x3e7u ? "amx" : ((unsigned)isa & 0xe7u) == 0xe7u ? "avx512_core_bf16"
                         : ((unsigned)isa & 0x27u) == 0x27u ? "avx512_core" : ((unsigned)isa & 0x7u) == 0x7u ? "avx2" : "sse41";
    if (g_use_onednn)
        snprintf(g_name, sizeof g_name, "oneDNN %d.%d.%d (%s)%s", v->major, v->minor, v->patch, isa_name,
                 g_bf16_native ? ", native bf16" : "");
    else
        snprintf(g_name, sizeof g_name, "OpenBLAS %s", openblas_get_config());
}

bool volt__cpu_bf16_native(void) {
    pthread_once(&g_once, gemm_init);
    return g_bf16_native;
}

const char *volt__cpu_gemm_library(void) {
    pthread_once(&g_once, gemm_init);
    return g_name;
}

/* ---- reference paths: OpenBLAS for f32, a plain loop for bf16 (only if oneDNN fails) ---- */
static inline float bf_at(const uint16_t *p, int64_t i) {
    uint32_t u = (uint32_t)p[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void gemm_one(const volt__cpu_gemm_op *g, int64_t z) {
    float *C = g->C + z * g->sc;
    if (g->bias || g->K == 0) {   /* C = beta C + alpha bias, then the product with beta 1 */
        for (int64_t i = 0; i < g->M; i++)
            for (int64_t j = 0; j < g->N; j++) {
                float c = g->beta == 0.f ? 0.f : g->beta * C[i * g->ldc + j];
                C[i * g->ldc + j] = g->bias ? c + g->alpha * g->bias[j] : c;
            }
    }
    if (g->K == 0) return;
    float beta = g->bias ? 1.f : g->beta;
    if (g->ab == VOLT_F32) {
        const float *A = (const float *)g->A + z * g->sa, *B = (const float *)g->B + z * g->sb;
        cblas_sgemm(CblasRowMajor, g->ta == 'T' ? CblasTrans : CblasNoTrans, g->tb == 'T' ? CblasTrans : CblasNoTrans,
                    (blasint)g->M, (blasint)g->N, (blasint)g->K, g->alpha, A, (blasint)g->lda, B, (blasint)g->ldb,
                    beta, C, (blasint)g->ldc);
        return;
    }
    const uint16_t *A = (const uint16_t *)g->A + z * g->sa, *B = (const uint16_t *)g->B + z * g->sb;
    for (int64_t i = 0; i < g->M; i++)
        for (int64_t j = 0; j < g->N; j++) {
            float acc = 0.f;
            for (int64_t k = 0; k < g->K; k++)
                acc += bf_at(A, g->ta == 'T' ? k * g->lda + i : i * g->lda + k) *
                       bf_at(B, g->b_packed ? volt__cpu_packed_at(k, j, g->K) : g->tb == 'T' ? j * g->ldb + k : k * g->ldb + j);
            float *c = &C[i * g->ldc + j];
            *c = g->alpha * acc + (beta == 0.f ? 0.f : beta * *c);
        }
}

/* A batch of small GEMMs (attention scores: B*H of T x T x dh) runs one GEMM per thread,
 * each single-threaded (the OpenMP build of OpenBLAS does that inside a parallel region),
 * instead of threading each small GEMM. Not with the pthreads build, whose one thread pool
 * would serialise the calls. Every GEMM writes its own slice: results do not depend on
 * the schedule. */
static bool batch_parallel(const volt__cpu_gemm_op *g) {
    if (g->batch < 2 || g->M * g->N * g->K > ((int64_t)1 << 23) || omp_get_max_threads() < 2 || omp_in_parallel())
        return false;
    return !(openblas_get_parallel() == 1 && openblas_get_num_threads() > 1);
}

static void gemm_fallback(const volt__cpu_gemm_op *g) {
    if (g->batch == 1) { gemm_one(g, 0); return; }
    #pragma omp parallel for schedule(static) if (batch_parallel(g))
    for (int64_t z = 0; z < g->batch; z++) gemm_one(g, z);
}

/* ---- oneDNN ------------------------------------------------------------------------------ */
static uint64_t key_hash(const gemm_key *k) {
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h ? h : 1;
}

static void entry_release(gemm_entry *e) {
    if (e->prim) dnnl_primitive_destroy(e->prim);
    dnnl_memory_t *m[] = {&e->a, &e->b, &e->c, &e->bias, &e->scratch};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (*m[i]) dnnl_memory_destroy(*m[i]);
    memset(e, 0, sizeof *e);
}

/* Operand (rows x cols per batch) with leading dimension ld, transposed or not. */
static dnnl_status_t operand_md(dnnl_memory_desc_t *md, int64_t batch, int64_t rows, int64_t cols, bool trans,
                                int64_t ld, int64_t sbatch, dnnl_data_type_t dt) {
    dnnl_dims_t dims = {batch, rows, cols}, st = {sbatch, trans ? 1 : ld, trans ? ld : 1};
    if (batch == 1) {   /* 2-D: oneDNN's 2-D kernels */
        dnnl_dims_t d2 = {rows, cols}, s2 = {st[1], st[2]};
        return dnnl_memory_desc_init_by_strides(md, 2, d2, dt, s2);
    }
    if (sbatch == 0) st[0] = 0;
    return dnnl_memory_desc_init_by_strides(md, 3, dims, dt, st);
}

static bool entry_make(gemm_entry *e, const gemm_key *k) {
    const dnnl_data_type_t dt = k->ab == VOLT_BF16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t a_md, b_md, c_md, bias_md;
    dnnl_dims_t kn = {k->K, k->N};
    if (operand_md(&a_md, k->batch, k->M, k->K, k->ta, k->lda, k->sa, dt) ||
        (k->bpack ? dnnl_memory_desc_init_by_tag(&b_md, 2, kn, dnnl_bf16, dnnl_BA16a64b2a)   /* packed B */
                  : operand_md(&b_md, k->batch, k->K, k->N, k->tb, k->ldb, k->sb, dt)) ||
        operand_md(&c_md, k->batch, k->M, k->N, false, k->ldc, k->sc, dnnl_f32))
        return false;
    if (k->bias) {
        dnnl_dims_t d3 = {1, 1, k->N}, s3 = {k->N, k->N, 1};
        dnnl_dims_t d2 = {1, k->N}, s2 = {k->N, 1};
        if (k->batch == 1 ? dnnl_memory_desc_init_by_strides(&bias_md, 2, d2, dnnl_f32, s2)
                          : dnnl_memory_desc_init_by_strides(&bias_md, 3, d3, dnnl_f32, s3))
            return false;
    }
    dnnl_matmul_desc_t d;
    if (dnnl_matmul_desc_init(&d, &a_md, &b_md, k->bias ? &bias_md : NULL, &c_md)) return false;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    float alpha, beta;
    memcpy(&alpha, &k->alpha, 4);
    memcpy(&beta, &k->beta, 4);
    bool ok = dnnl_primitive_attr_create(&attr) == dnnl_success &&
              dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
              (alpha == 1.f || dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha) == dnnl_success);
    if (ok && beta != 0.f)
        ok = dnnl_post_ops_create(&po) == dnnl_success && dnnl_post_ops_append_sum(po, beta) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&pd, &d, attr, g_engine, NULL) == dnnl_success &&
         dnnl_primitive_create(&e->prim, pd) == dnnl_success;
    if (ok) {
        const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        ok = dnnl_memory_create(&e->a, &a_md, g_engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&e->b, &b_md, g_engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&e->c, &c_md, g_engine, DNNL_MEMORY_NONE) == dnnl_success &&
             (!k->bias || dnnl_memory_create(&e->bias, &bias_md, g_engine, DNNL_MEMORY_NONE) == dnnl_success) &&
             (!sp || dnnl_memory_desc_get_size(sp) == 0 ||
              dnnl_memory_create(&e->scratch, sp, g_engine, DNNL_MEMORY_ALLOCATE) == dnnl_success);
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (!ok) entry_release(e);
    return ok;
}

static gemm_entry *cache_get(const gemm_key *k) {
    if (!tl_cache) {
        if (tl_cache_failed) return NULL;
        gemm_cache *c = calloc(1, sizeof *c);
        if (!c || dnnl_stream_create(&c->stream, g_engine, dnnl_stream_default_flags)) {
            free(c);
            tl_cache_failed = true;
            return NULL;
        }
        tl_cache = c;
    }
    gemm_cache *c = tl_cache;
    uint64_t h = key_hash(k);
    size_t i0 = (size_t)(h % CACHE_SLOTS), victim = i0;
    for (size_t p = 0; p < CACHE_SLOTS; p++) {   /* open addressing, probe the whole table */
        gemm_entry *e = &c->e[(i0 + p) % CACHE_SLOTS];
        if (e->hash == h && !memcmp(&e->k, k, sizeof *k)) { e->last = ++c->clock; return e; }
        if (e->hash == 0) { victim = (i0 + p) % CACHE_SLOTS; break; }
        if (e->last < c->e[victim].last) victim = (i0 + p) % CACHE_SLOTS;
    }
    gemm_entry *e = &c->e[victim];
    if (e->hash) entry_release(e);
    if (!entry_make(e, k)) return NULL;
    e->k = *k;
    e->hash = h;
    e->last = ++c->clock;
    return e;
}

/* Which library runs an f32 GEMM. oneDNN from about a million multiply-adds up (2-9x
 * OpenBLAS's Haswell kernels at DistilBERT's shapes, bench/bench_gemm.c and
 * docs/BENCHMARKS.md); OpenBLAS below, where the primitive call costs more than the
 * product (64^3: OpenBLAS 2.3x faster), and when oneDNN is off. bf16 always oneDNN. */
#define ONEDNN_MIN_MACS ((int64_t)1 << 20)
static bool onednn_for(const volt__cpu_gemm_op *g) {
    if (!g_use_onednn) return false;
    if (g->ab == VOLT_BF16 || g_force_onednn) return true;
    return g->M * g->N * g->K * g->batch >= ONEDNN_MIN_MACS;
}

static void make_key(gemm_key *kp, const volt__cpu_gemm_op *g) {
    gemm_key k;
    memset(&k, 0, sizeof k);
    k.batch = g->batch; k.M = g->M; k.N = g->N; k.K = g->K;
    k.lda = g->lda; k.ldb = g->ldb; k.ldc = g->ldc;
    if (g->batch > 1) { k.sa = g->sa; k.sb = g->sb; k.sc = g->sc; }
    memcpy(&k.alpha, &g->alpha, 4);
    memcpy(&k.beta, &g->beta, 4);
    k.ta = (uint8_t)(g->ta == 'T'); k.tb = (uint8_t)(g->tb == 'T');
    k.ab = (uint8_t)g->ab; k.bias = g->bias != NULL; k.nested = (uint8_t)(omp_in_parallel() != 0);
    k.bpack = (uint8_t)g->b_packed;
    if (k.bpack) k.ldb = k.tb = 0;   /* the packed layout has neither */
    *kp = k;
}

/* A packed-B primitive for g's shape, made on first use (docs/BENCHMARKS.md, 2026-12-02
 * third session, for what packing saves). */
bool volt__cpu_gemm_packs_b(const volt__cpu_gemm_op *g) {
    pthread_once(&g_once, gemm_init);
    if (g->ab != VOLT_BF16 || !g_bf16_native || g->batch != 1 || g->M == 0 || g->N == 0 || g->K == 0) return false;
    volt__cpu_gemm_op p = *g;
    p.b_packed = true;
    gemm_key k;
    make_key(&k, &p);
    return cache_get(&k) != NULL;   /* made once, then found */
}

void volt__cpu_gemm_ex(const volt__cpu_gemm_op *g) {
    if (g->M == 0 || g->N == 0 || g->batch == 0) return;
    pthread_once(&g_once, gemm_init);
    if (g->K == 0 || !onednn_for(g)) { gemm_fallback(g); return; }
    gemm_key k;
    make_key(&k, g);
    gemm_entry *e = cache_get(&k);
    if (!e) { gemm_fallback(g); return; }
    dnnl_exec_arg_t args[5] = {
        {DNNL_ARG_SRC, e->a}, {DNNL_ARG_WEIGHTS, e->b}, {DNNL_ARG_DST, e->c}};
    int nargs = 3;
    dnnl_memory_set_data_handle(e->a, (void *)(uintptr_t)g->A);
    dnnl_memory_set_data_handle(e->b, (void *)(uintptr_t)g->B);
    dnnl_memory_set_data_handle(e->c, g->C);
    if (e->bias) {
        dnnl_memory_set_data_handle(e->bias, (void *)(uintptr_t)g->bias);
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, e->bias};
    }
    if (e->scratch) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, e->scratch};
    if (dnnl_primitive_execute(e->prim, tl_cache->stream, nargs, args) != dnnl_success ||
        dnnl_stream_wait(tl_cache->stream) != dnnl_success)
        gemm_fallback(g);   /* not expected: the primitive was made for these descriptors */
}

void volt__cpu_gemm(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                   float *C, int64_t ldc) {
    volt__cpu_gemm_op g = {.ta = ta, .tb = tb, .batch = 1, .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta,
                          .ab = VOLT_F32, .A = A, .lda = lda, .B = B, .ldb = ldb, .C = C, .ldc = ldc};
    volt__cpu_gemm_ex(&g);
}

void volt__cpu_gemm_bf16(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha,
                        const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb, float beta,
                        float *C, int64_t ldc) {
    volt__cpu_gemm_op g = {.ta = ta, .tb = tb, .batch = 1, .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta,
                          .ab = VOLT_BF16, .A = A, .lda = lda, .B = B, .ldb = ldb, .C = C, .ldc = ldc};
    volt__cpu_gemm_ex(&g);
}
