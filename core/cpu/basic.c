/* CPU kernels: matmul, linear, elementwise add/mul/scale/relu, sum/mean, mse,
 * cross-entropy, reshape. Shapes in comments; backward always accumulates. */
#include <math.h>
#include <string.h>
#include <omp.h>
#include "core/cpu/kernels.h"
#include "core/convert.h"   /* volt__f2bf */
#include "volt/dtype.h"

#define PAR_MIN 32768   /* below this many elements a loop runs on one thread */

/* 16-bit compute (volt/ops.h): the node's attribute `compute` is the compute dtype.
 * Each float operand is read as the f32 value of its 16-bit rounding: f32 operands are
 * rounded into the step scratch, 16-bit ones (parameters stored in 16 bits) converted;
 * sgemm multiplies and accumulates in f32, outputs are f32. Backward reads the upstream
 * gradient rounded the same way (a GPU's 16-bit backward GEMMs take it in 16 bits: this is
 * where 16-mixed overflows and needs loss scaling). With f32 everywhere nothing is touched
 * and the path is the plain f32 one. */
static volt_dtype gemm_dtype(const volt_node *n) {
    volt_dtype cd = n->op == VOLT_OP_LINEAR ? n->attr.linear.compute : n->attr.matmul.compute;
    if (cd != VOLT_F32) return cd;
    return volt__is_16bit(n->in[1]) ? n->in[1]->dtype : volt__is_16bit(n->in[0]) ? n->in[0]->dtype : VOLT_F32;
}

static const float *gemm_operand(volt_step *s, const volt_tensor *t, volt_dtype cd, int slot) {
    if (t->dtype == cd || cd == VOLT_F32) return volt__cpu_as_f32(s, t, slot);   /* exact */
    if (t->dtype == VOLT_F32) return volt__cpu_round_f32(s, t->data, volt_tensor_numel(t), cd, slot);
    const float *f = volt__cpu_as_f32(s, t, slot);    /* 16-bit of the other kind: via f32 */
    return f ? volt__cpu_round_f32(s, f, volt_tensor_numel(t), cd, slot) : NULL;
}

/* Native bf16 (core/cpu/gemm.c): under a bf16 compute dtype on a CPU with AVX512-BF16 or
 * AMX, the operands go to the GEMM as bf16 bits (the same values as the rounded f32 ones:
 * products of two bf16 are exact in f32, only the summation order differs) and bf16
 * parameters are used in place. Elsewhere the rounded-f32 emulation above. */
static bool native_bf16(volt_dtype cd) { return cd == VOLT_BF16 && volt__cpu_bf16_native(); }

static const void *operand(volt_step *s, const volt_tensor *t, volt_dtype cd, int slot) {
    return native_bf16(cd) ? (const void *)volt__cpu_as_bf16(s, t, slot) : (const void *)gemm_operand(s, t, cd, slot);
}

static const void *operand_f32(volt_step *s, const float *x, int64_t n, volt_dtype cd, int slot) {
    return native_bf16(cd) ? (const void *)volt__cpu_to_bf16(s, x, n, slot) : (const void *)volt__cpu_round_f32(s, x, n, cd, slot);
}

static volt__cpu_gemm_op gemm_op(volt_dtype cd, char ta, char tb, int64_t M, int64_t N, int64_t K,
                                const void *A, int64_t lda, const void *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    return (volt__cpu_gemm_op){.ta = ta, .tb = tb, .batch = 1, .M = M, .N = N, .K = K, .alpha = 1.f, .beta = beta,
                              .ab = native_bf16(cd) ? VOLT_BF16 : VOLT_F32, .A = A, .lda = lda, .B = B, .ldb = ldb,
                              .C = C, .ldc = ldc};
}

/* ---- matmul: mode 0: a (R, K) x b (K, N); mode 1: a (B, M, K) x b (B, K, N) ------------- */
/* One batched GEMM (core/cpu/gemm.c: one oneDNN primitive; OpenBLAS runs a batch of small
 * GEMMs one per thread). */
volt_status volt__cpu_MATMUL_fwd(volt_step *s, volt_node *n) {
    const volt_attr_matmul *at = &n->attr.matmul;
    int64_t B = at->batch, M = at->M, K = at->K, N = at->N;
    const volt_dtype cd = gemm_dtype(n);
    const void *a = operand(s, n->in[0], cd, 0), *b = operand(s, n->in[1], cd, 1);
    if (!a || !b) return s->status;
    volt__cpu_gemm_op g = gemm_op(cd, 'N', 'N', M, N, K, a, K, b, N, 0.f, n->out->data, N);
    g.batch = B; g.sa = M * K; g.sb = K * N; g.sc = M * N;
    volt__cpu_gemm_ex(&g);
    return VOLT_OK;
}

volt_status volt__cpu_MATMUL_bwd(volt_step *s, volt_node *n) {
    const volt_attr_matmul *at = &n->attr.matmul;
    int64_t B = at->batch, M = at->M, K = at->K, N = at->N;
    volt_tensor *a = n->in[0], *b = n->in[1];
    const volt_dtype cd = gemm_dtype(n);
    const void *dc = operand_f32(s, n->out->grad, volt_tensor_numel(n->out), cd, 0);
    const void *bf = volt__needs_grad(a) ? operand(s, b, cd, 1) : NULL;
    const void *af = volt__needs_grad(b) ? operand(s, a, cd, 2) : NULL;
    if (!dc || (volt__needs_grad(a) && !bf) || (volt__needs_grad(b) && !af)) return s->status;
    /* first write (core/internal.h): beta 0 instead of accumulating into zeros */
    const bool acc_a = volt__cpu_acc(n, 0), acc_b = volt__cpu_acc(n, 1);
    float *ga = n->grad_mode[0] ? a->grad : NULL, *gb = n->grad_mode[1] ? b->grad : NULL;
    if (ga) {   /* da (M,K) += dc (M,N) b^T */
        volt__cpu_gemm_op g = gemm_op(cd, 'N', 'T', M, K, N, dc, N, bf, N, acc_a ? 1.f : 0.f, ga, K);
        g.batch = B; g.sa = M * N; g.sb = K * N; g.sc = M * K;
        volt__cpu_gemm_ex(&g);
    }
    if (gb) {   /* db (K,N) += a^T (K,M) dc (M,N) */
        volt__cpu_gemm_op g = gemm_op(cd, 'T', 'N', K, N, M, af, K, dc, N, acc_b ? 1.f : 0.f, gb, N);
        g.batch = B; g.sa = M * K; g.sb = M * N; g.sc = K * N;
        volt__cpu_gemm_ex(&g);
    }
    return VOLT_OK;
}

/* ---- linear: x (R, I), w (O, I), b (O) -> y (R, O); the bias fused into the GEMM -------- */
/* Native bf16, packed B (core/cpu/cast.c, volt__cpu_pack_b_bf16): each of the three GEMMs
 * gets its B operand already in the blocked layout oneDNN's bf16 kernel reads: W^T for
 * forward, W for dx, x for dW. The primitive would otherwise copy B into that layout on
 * every call, more slowly than the pack, which replaces the conversion to bf16 (forward)
 * or reads the bf16 copy of x (dW): 10-15 % off the linears' bf16 time, packing included, at
 * DistilBERT's shapes (docs/BENCHMARKS.md). Bits: the same kernel on the same bf16 values. W is packed
 * from the f32 weights at each use (forward, then backward), so nothing outlives the step:
 * an optimizer step, a checkpoint load, an FSDP gather, or a user's write between steps is
 * always seen. W stored in bf16 is read in place by forward (not packed) and packed for dx.
 *
 * x's bf16 copy is kept for backward (n->saved, the step arena): forward converts x anyway,
 * and dW needs the same bits again. Lifetime = the node's forward to its backward in one
 * step (the arena is reset at step end). Linears recorded just before that read the same
 * x (q, k, v projections) share its copy. Not kept: a bf16 x (used in place) and anything
 * off the tape. */
typedef struct { const uint16_t *x; } linear_bf16;


#define LINEAR_SHARE_BACK 4   /* earlier tape nodes searched for a shared x copy */

static volt_node *tape_node(volt_step *s, volt_node *n) {   /* n if on the tape, else NULL */
    return s->n_nodes > 0 && n == &s->tape[s->n_nodes - 1] ? n : NULL;
}

static const uint16_t *arena_bf16(volt_step *s, const volt_tensor *t) {
    uint16_t *b = volt_step_alloc(s, sizeof(uint16_t) * (size_t)volt_tensor_numel(t));
    if (b) volt_convert(b, VOLT_BF16, t->data, t->dtype, volt_tensor_numel(t));
    return b;
}

/* n's saved bf16 x (NULL member: convert at use) */
static linear_bf16 *linear_keep(volt_step *s, volt_node *n) {
    volt_tensor *x = n->in[0], *w = n->in[1];
    linear_bf16 *k = volt_step_alloc(s, sizeof *k);
    if (!k) return NULL;
    k->x = NULL;
    if (volt__needs_grad(w) && x->dtype != VOLT_BF16) {
        for (int i = s->n_nodes - 2; i >= 0 && i >= s->n_nodes - 1 - LINEAR_SHARE_BACK && !k->x; i--) {
            const volt_node *p = &s->tape[i];
            if (p->op == VOLT_OP_LINEAR && p->in[0] == x && p->saved) k->x = ((const linear_bf16 *)p->saved)->x;
        }
        if (!k->x && !(k->x = arena_bf16(s, x))) return NULL;
    }
    return k;
}

/* Pack B of g from src ((k, n) = trans ? src[n ld + k] : src[k ld + n], f32 or bf16) into
 * scratch slot `slot` and point g at it: 1 when packed, 0 when g does not take a packed B
 * (g untouched), -1 out of memory (step error set). */
static int pack_b(volt_step *s, volt__cpu_gemm_op *g, const void *src, volt_dtype sdt, int64_t ld, bool trans,
                  int slot) {
    if ((sdt != VOLT_F32 && sdt != VOLT_BF16) || !volt__cpu_gemm_packs_b(g)) return 0;
    uint16_t *buf = (uint16_t *)volt__scratch(s, slot, (size_t)(volt__cpu_packed_b_elems(g->K, g->N) + 1) / 2);
    if (!buf) return -1;
    volt__cpu_pack_b_bf16(src, sdt, g->K, g->N, ld, trans, buf);
    g->B = buf;
    g->b_packed = true;
    return 1;
}

volt_status volt__cpu_LINEAR_fwd(volt_step *s, volt_node *n) {
    int64_t R = n->attr.linear.rows, In = n->attr.linear.in, O = n->attr.linear.out;
    const volt_dtype cd = gemm_dtype(n);
    const bool nat = native_bf16(cd);
    volt_tensor *w = n->in[1];
    const linear_bf16 *kept = NULL;
    if (nat && !s->linear_keep_bf16_off && tape_node(s, n)) {
        if (!(kept = linear_keep(s, n))) return VOLT_ERR_NOMEM;
        n->saved = (void *)(uintptr_t)kept;
        if (kept->x) n->bwd_reads &= ~1u;   /* backward reads the kept copy, never x */
    }
    const void *x = kept && kept->x ? kept->x : operand(s, n->in[0], cd, 0);
    if (!x) return s->status;
    volt__cpu_gemm_op g = gemm_op(cd, 'N', 'T', R, O, In, x, In, NULL, In, 0.f, n->out->data, O);
    if (n->n_in == 3) g.bias = n->in[2]->data;
    int pk = nat && w->dtype == VOLT_F32 ? pack_b(s, &g, w->data, VOLT_F32, In, true, 1) : 0;   /* W^T */
    if (pk < 0) return s->status;
    if (!pk && !(g.B = operand(s, w, cd, 1))) return s->status;
    volt__cpu_gemm_ex(&g);
    return VOLT_OK;
}

/* Column sums of dy (R, C) over columns [c0, c1) (c1 - c0 <= 256), rows in order, into db
 * (+= when acc); with hb, dy's bf16 bits too, in the same pass. */
VOLT__SIMD_CLONES
static void colsum_chunk(const float *dy, int64_t R, int64_t C, int64_t c0, int64_t c1, float *db, bool acc,
                         uint16_t *hb) {
    float sum[256];
    int64_t w = c1 - c0;
    for (int64_t c = 0; c < w; c++) sum[c] = 0.f;
    for (int64_t r = 0; r < R; r++) {
        const float *row = dy + r * C + c0;
        for (int64_t c = 0; c < w; c++) sum[c] += row[c];
        if (hb)
            for (int64_t c = 0; c < w; c++) hb[r * C + c0 + c] = volt__f2bf(volt__f_bits(row[c]));
    }
    if (acc) for (int64_t c = 0; c < w; c++) db[c0 + c] += sum[c];
    else for (int64_t c = 0; c < w; c++) db[c0 + c] = sum[c];
}

/* db (C) += sum over R rows of dy (R, C) (= when !acc); columns in chunks of 128 across
 * threads (an even split for C = 768 on 2 threads), rows summed in order. With hb (R * C
 * halves), dy is converted to bf16 bits in the same pass: the native bf16 linear backward
 * reads dy once for its operand and its bias grad. */
static void colsum_acc(const float *dy, int64_t R, int64_t C, float *db, bool acc, uint16_t *hb) {
    int64_t nchunks = (C + 127) / 128;
    #pragma omp parallel for schedule(static) if (R * C > PAR_MIN)
    for (int64_t ch = 0; ch < nchunks; ch++) {
        int64_t c0 = ch * 128, c1 = c0 + 128 < C ? c0 + 128 : C;
        colsum_chunk(dy, R, C, c0, c1, db, acc, hb);
    }
}

volt_status volt__cpu_LINEAR_bwd(volt_step *s, volt_node *n) {
    int64_t R = n->attr.linear.rows, In = n->attr.linear.in, O = n->attr.linear.out;
    volt_tensor *x = n->in[0], *w = n->in[1];
    const volt_dtype cd = gemm_dtype(n);
    const bool nat = native_bf16(cd);
    const linear_bf16 *kept = nat ? n->saved : NULL;   /* forward's bf16 x */
    /* native bf16 with a bias grad: dy's conversion and the bias grad in one pass */
    bool fused_db = nat && n->n_in == 3 && n->grad_mode[2];
    const void *dy;
    if (fused_db) {
        uint16_t *hb = (uint16_t *)volt__scratch(s, 0, (size_t)(R * O + 1) / 2);
        if (hb) colsum_acc(n->out->grad, R, O, n->in[2]->grad, volt__cpu_acc(n, 2), hb);
        dy = hb;
    } else {
        dy = operand_f32(s, n->out->grad, R * O, cd, 0);
    }
    if (!dy) return s->status;
    /* first write (core/internal.h): beta 0 instead of accumulating into zeros */
    if (n->grad_mode[0]) {   /* dx (R,I) += dy (R,O) w (O,I) */
        volt__cpu_gemm_op op = gemm_op(cd, 'N', 'N', R, In, O, dy, O, NULL, In, volt__cpu_acc(n, 0) ? 1.f : 0.f, x->grad, In);
        int pk = nat ? pack_b(s, &op, w->data, w->dtype, In, false, 1) : 0;
        if (pk < 0 || (!pk && !(op.B = operand(s, w, cd, 1)))) return s->status;
        volt__cpu_gemm_ex(&op);
    }
    if (n->grad_mode[1]) {   /* dw (O,I) += dy^T (O,R) x (R,I) */
        volt__cpu_gemm_op op = gemm_op(cd, 'T', 'N', O, In, R, dy, O, NULL, In, volt__cpu_acc(n, 1) ? 1.f : 0.f, w->grad, In);
        const void *xs = kept && kept->x ? kept->x : x->data;
        int pk = nat ? pack_b(s, &op, xs, kept && kept->x ? VOLT_BF16 : x->dtype, In, false, 2) : 0;
        if (pk < 0 || (!pk && !(op.B = kept && kept->x ? kept->x : operand(s, x, cd, 2)))) return s->status;
        volt__cpu_gemm_ex(&op);
    }
    /* the bias was added in f32: its grad is the f32 upstream gradient */
    if (n->n_in == 3 && n->grad_mode[2] && !fused_db)
        colsum_acc(n->out->grad, R, O, n->in[2]->grad, volt__cpu_acc(n, 2), NULL);
    return VOLT_OK;
}

/* ---- add / mul: a (outer, inner), b (inner) or same shape ------------------------------- */
volt_status volt__cpu_ADD_fwd(volt_step *s, volt_node *n) {
    int64_t inner = n->attr.broadcast.inner, outer = n->attr.broadcast.outer;
    const float *a = n->in[0]->data, *b = n->in[1]->data;
    float *y = n->out->data;
    #pragma omp parallel for schedule(static) if (inner * outer > PAR_MIN)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) y[o * inner + k] = a[o * inner + k] + b[k];
    return VOLT_OK;
}

/* The tape makes dy a's grad when a has none yet (volt__op_grad_alias: mode NONE then). */
volt_status volt__cpu_ADD_bwd(volt_step *s, volt_node *n) {
    int64_t inner = n->attr.broadcast.inner, outer = n->attr.broadcast.outer, total = inner * outer;
    float *dy = n->out->grad;
    if (n->grad_mode[0]) {
        float *da = n->in[0]->grad;
        VOLT_CPU_GRAD_LOOP(volt__cpu_acc(n, 0), total, PAR_MIN, da, dy[k]);
    }
    /* after a: when b is a, this adds dy to it again */
    if (n->grad_mode[1]) colsum_acc(dy, outer, inner, n->in[1]->grad, volt__cpu_acc(n, 1), NULL);
    return VOLT_OK;
}

volt_status volt__cpu_MUL_fwd(volt_step *s, volt_node *n) {
    int64_t inner = n->attr.broadcast.inner, outer = n->attr.broadcast.outer;
    const float *a = n->in[0]->data, *b = n->in[1]->data;
    float *y = n->out->data;
    #pragma omp parallel for schedule(static) if (inner * outer > PAR_MIN)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) y[o * inner + k] = a[o * inner + k] * b[k];
    return VOLT_OK;
}

volt_status volt__cpu_MUL_bwd(volt_step *s, volt_node *n) {
    int64_t inner = n->attr.broadcast.inner, outer = n->attr.broadcast.outer;
    const float *a = n->in[0]->data, *b = n->in[1]->data, *dy = n->out->grad;
    if (n->grad_mode[0]) {
        float *da = n->in[0]->grad;
        if (volt__cpu_acc(n, 0)) {
            #pragma omp parallel for schedule(static) if (inner * outer > PAR_MIN)
            for (int64_t o = 0; o < outer; o++)
                for (int64_t k = 0; k < inner; k++) da[o * inner + k] += dy[o * inner + k] * b[k];
        } else {
            #pragma omp parallel for schedule(static) if (inner * outer > PAR_MIN)
            for (int64_t o = 0; o < outer; o++)
                for (int64_t k = 0; k < inner; k++) da[o * inner + k] = 0.f + dy[o * inner + k] * b[k];
        }
    }
    if (n->grad_mode[1]) {
        float *db = n->in[1]->grad;
        const bool acc_b = volt__cpu_acc(n, 1);
        int64_t nchunks = (inner + 255) / 256;
        #pragma omp parallel for schedule(static) if (inner * outer > PAR_MIN)
        for (int64_t ch = 0; ch < nchunks; ch++) {
            int64_t c0 = ch * 256, c1 = c0 + 256 < inner ? c0 + 256 : inner;
            float acc[256];
            for (int64_t c = c0; c < c1; c++) acc[c - c0] = 0.f;
            for (int64_t o = 0; o < outer; o++)
                for (int64_t c = c0; c < c1; c++) acc[c - c0] += dy[o * inner + c] * a[o * inner + c];
            if (acc_b) for (int64_t c = c0; c < c1; c++) db[c] += acc[c - c0];
            else for (int64_t c = c0; c < c1; c++) db[c] = 0.f + acc[c - c0];
        }
    }
    return VOLT_OK;
}

/* ---- unary elementwise ------------------------------------------------------------------ */
volt_status volt__cpu_SCALE_fwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->out);
    const float *x = n->in[0]->data;
    float *y = n->out->data, a = n->attr.scale.alpha;
    #pragma omp parallel for schedule(static) if (N > PAR_MIN)
    for (int64_t k = 0; k < N; k++) y[k] = a * x[k];
    return VOLT_OK;
}

volt_status volt__cpu_SCALE_bwd(volt_step *s, volt_node *n) {   /* first write: dx = a dy */
    int64_t N = volt_tensor_numel(n->out);
    const float *dy = n->out->grad;
    float a = n->attr.scale.alpha;
    float *dx = n->in[0]->grad;
    if (volt__cpu_acc(n, 0)) {
        #pragma omp parallel for schedule(static) if (N > PAR_MIN)
        for (int64_t k = 0; k < N; k++) dx[k] += a * dy[k];
    } else {
        #pragma omp parallel for schedule(static) if (N > PAR_MIN)
        for (int64_t k = 0; k < N; k++) dx[k] = a * dy[k];
    }
    return VOLT_OK;
}

volt_status volt__cpu_RELU_fwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->out);
    const float *x = n->in[0]->data;
    float *y = n->out->data;
    #pragma omp parallel for schedule(static) if (N > PAR_MIN)
    for (int64_t k = 0; k < N; k++) y[k] = x[k] > 0.f ? x[k] : 0.f;
    return VOLT_OK;
}

volt_status volt__cpu_RELU_bwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->out);
    const float *x = n->in[0]->data, *dy = n->out->grad;
    float *dx = n->in[0]->grad;
    VOLT_CPU_GRAD_LOOP(volt__cpu_acc(n, 0), N, PAR_MIN, dx, x[k] > 0.f ? dy[k] : 0.f);
    return VOLT_OK;
}

/* ---- reductions: sequential in double (fixed order, any thread count) ------------------- */
static double sum_f32(const float *x, int64_t n) {
    double acc[4] = { 0, 0, 0, 0 };
    int64_t k = 0;
    for (; k + 4 <= n; k += 4)
        for (int l = 0; l < 4; l++) acc[l] += x[k + l];
    for (; k < n; k++) acc[0] += x[k];
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

volt_status volt__cpu_SUM_fwd(volt_step *s, volt_node *n) {
    ((float *)n->out->data)[0] = (float)sum_f32(n->in[0]->data, volt_tensor_numel(n->in[0]));
    return VOLT_OK;
}

static void fill_acc(float *dx, int64_t N, float g) {
    #pragma omp parallel for schedule(static) if (N > PAR_MIN)
    for (int64_t k = 0; k < N; k++) dx[k] += g;
}

volt_status volt__cpu_SUM_bwd(volt_step *s, volt_node *n) {
    volt__cpu_zero_stores(n);
    fill_acc(n->in[0]->grad, volt_tensor_numel(n->in[0]), n->out->grad[0]);
    return VOLT_OK;
}

volt_status volt__cpu_MEAN_fwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->in[0]);
    ((float *)n->out->data)[0] = (float)(sum_f32(n->in[0]->data, N) / (double)N);
    return VOLT_OK;
}

volt_status volt__cpu_MEAN_bwd(volt_step *s, volt_node *n) {
    volt__cpu_zero_stores(n);
    int64_t N = volt_tensor_numel(n->in[0]);
    fill_acc(n->in[0]->grad, N, n->out->grad[0] / (float)N);
    return VOLT_OK;
}

volt_status volt__cpu_MSE_fwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->in[0]);
    const float *a = n->in[0]->data, *b = n->in[1]->data;
    double acc = 0;
    for (int64_t k = 0; k < N; k++) { double d = (double)a[k] - b[k]; acc += d * d; }
    ((float *)n->out->data)[0] = (float)(acc / (double)N);
    return VOLT_OK;
}

volt_status volt__cpu_MSE_bwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->in[0]);
    const float *a = n->in[0]->data, *b = n->in[1]->data;
    float g = 2.f * n->out->grad[0] / (float)N;
    volt__cpu_zero_stores(n);
    for (int k = 0; k < 2; k++) {
        if (!volt__needs_grad(n->in[k])) continue;
        float *d = n->in[k]->grad, sign = k ? -g : g;
        for (int64_t j = 0; j < N; j++) d[j] += sign * (a[j] - b[j]);
    }
    return VOLT_OK;
}

/* ---- cross entropy: logits (N, C), target (N); saved: logsumexp per row ------------------ */
static int64_t target_at(const volt_tensor *t, int64_t i) {
    return t->dtype == VOLT_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

volt_status volt__cpu_CROSS_ENTROPY_fwd(volt_step *s, volt_node *n) {
    const volt_attr_cross_entropy *at = &n->attr.cross_entropy;
    int64_t N = at->n, C = at->classes, ignore = at->ignore_index;
    float eps = at->label_smoothing;
    const float *x = n->in[0]->data;
    float *lse = volt_step_alloc(s, sizeof(float) * (size_t)(N ? N : 1));
    if (!lse) return VOLT_ERR_NOMEM;
    n->saved = lse;
    for (int64_t r = 0; r < N; r++) {
        int64_t t = target_at(n->in[1], r);
        if (t != ignore && (t < 0 || t >= C))
            return volt_step_fail(s, VOLT_ERR_INVALID_ARG, "cross_entropy: target[%lld] = %lld is outside [0, %lld)",
                                  (long long)r, (long long)t, (long long)C);
    }
    double total = 0;
    int64_t count = 0;
    for (int64_t r = 0; r < N; r++) {
        const float *row = x + r * C;
        float m = -INFINITY;
        for (int64_t c = 0; c < C; c++) m = row[c] > m ? row[c] : m;
        double se = 0, sum_logit = 0;
        for (int64_t c = 0; c < C; c++) { se += exp((double)row[c] - m); sum_logit += row[c]; }
        double l = m + log(se);
        lse[r] = (float)l;
        int64_t t = target_at(n->in[1], r);
        if (t == ignore) continue;
        count++;
        /* (1-eps) * -log p_t + eps * mean_c(-log p_c) */
        total += (1.0 - eps) * (l - row[t]) + eps * (l - sum_logit / (double)C);
    }
    n->attr.cross_entropy.count = count;
    ((float *)n->out->data)[0] = count ? (float)(total / (double)count) : NAN;  /* PyTorch: nan when all ignored */
    return VOLT_OK;
}

volt_status volt__cpu_CROSS_ENTROPY_bwd(volt_step *s, volt_node *n) {
    const volt_attr_cross_entropy *at = &n->attr.cross_entropy;
    int64_t N = at->n, C = at->classes, ignore = at->ignore_index, count = at->count;
    volt__cpu_zero_stores(n);   /* ignored rows (and count == 0) send zeros */
    if (!volt__needs_grad(n->in[0]) || count == 0) return VOLT_OK;
    float eps = at->label_smoothing;
    const float *x = n->in[0]->data, *lse = n->saved;
    float *dx = n->in[0]->grad;
    float g = n->out->grad[0] / (float)count;
    #pragma omp parallel for schedule(static) if (N * C > PAR_MIN)
    for (int64_t r = 0; r < N; r++) {
        int64_t t = target_at(n->in[1], r);
        if (t == ignore) continue;
        for (int64_t c = 0; c < C; c++) {
            float p = expf(x[r * C + c] - lse[r]);
            float tgt = (c == t ? 1.f - eps : 0.f) + eps / (float)C;
            dx[r * C + c] += g * (p - tgt);
        }
    }
    return VOLT_OK;
}

/* ---- reshape: a view; backward adds the grad through ----------------------------------- */
/* The tape makes dy x's grad when x has none yet (volt__op_grad_alias: mode NONE then). */
volt_status volt__cpu_RESHAPE_bwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->out);
    const float *dy = n->out->grad;
    if (!n->grad_mode[0]) return VOLT_OK;
    float *dx = n->in[0]->grad;
    VOLT_CPU_GRAD_LOOP(volt__cpu_acc(n, 0), N, PAR_MIN, dx, dy[k]);
    return VOLT_OK;
}

volt_status volt__cpu_RESHAPE_fwd(volt_step *s, volt_node *n) { return VOLT_OK; }   /* a view: nothing to compute */

/* ---- argmax: x (N, C) -> (N) i64, the first maximum; accuracy: argmax (N), target (N) ->
 * the fraction of rows where they agree, targets -100 left out (0 when none is left) --- */
static int64_t index_at(const volt_tensor *t, int64_t i) {
    return t->dtype == VOLT_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

volt_status volt__cpu_ARGMAX_fwd(volt_step *s, volt_node *n) {
    (void)s;
    int64_t N = n->in[0]->shape.d[0], C = n->in[0]->shape.d[1];
    const float *x = n->in[0]->data;
    int64_t *y = n->out->data;
    for (int64_t r = 0; r < N; r++) {
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (x[r * C + c] > x[r * C + best]) best = c;
        y[r] = best;
    }
    return VOLT_OK;
}

volt_status volt__cpu_ACCURACY_fwd(volt_step *s, volt_node *n) {
    (void)s;
    const int64_t *am = n->in[0]->data;
    int64_t hit = 0, cnt = 0;
    for (int64_t r = 0; r < n->in[1]->shape.d[0]; r++) {
        int64_t t = index_at(n->in[1], r);
        if (t == -100) continue;
        cnt++;
        hit += am[r] == t;
    }
    ((float *)n->out->data)[0] = cnt ? (float)((double)hit / (double)cnt) : 0.f;
    return VOLT_OK;
}

/* never called: the tape records no node for them (volt__op_differentiable) */
volt_status volt__cpu_ARGMAX_bwd(volt_step *s, volt_node *n) { (void)s; (void)n; return VOLT_OK; }
volt_status volt__cpu_ACCURACY_bwd(volt_step *s, volt_node *n) { (void)s; (void)n; return VOLT_OK; }
volt_status volt__cpu_ARANGE_bwd(volt_step *s, volt_node *n) { (void)s; (void)n; return VOLT_OK; }
