/* MATMUL and LINEAR on the "cuda" backend: the glue of core/cpu/basic.c's GEMM kernels over
 * cuBLASLt (core/cuda/gemm.c). The compute dtype (the node's `compute`, or a 16-bit operand's
 * dtype under f32 compute) decides the operand type: f32 runs in f32; bf16 / f16 convert
 * f32 operands (and the upstream gradient in backward) to that dtype in step scratch and run
 * natively with f32 accumulation; 16-bit parameters are used in place. Outputs and grads are
 * f32. The tape's grad modes map to beta: STORE = 0, ADD = 1. The linear bias is the GEMM's
 * epilogue forward; its gradient is a column sum of the f32 upstream gradient (as on the
 * CPU, where the bias is added in f32).
 *
 * x's 16-bit copy is kept for backward (n->saved, in the step arena), as core/cpu/basic.c
 * does: forward converts x anyway and dW needs the same bits again, so backward converts
 * only dy and W. Linears recorded just before that read the same x (q, k, v projections)
 * share the first one's copy: one conversion of x instead of three forward and three more in
 * backward. Safe: the copy is made from x when the first of them runs, x is an activation
 * (nothing writes it after its op), the arena is never reused within a step, and the copy's
 * lifetime is that step (reset at the end); a captured graph replays the one conversion with
 * the same addresses. Not kept: a 16-bit x (used in place), f32 compute, anything off the
 * tape, and s->linear_keep_bf16_off (tests: convert at use). */
#include "core/cuda/cuda.h"

typedef struct { const void *x; volt_dtype dt; } linear_kept;
#define LINEAR_SHARE_BACK 4   /* earlier tape nodes searched for a shared x copy (core/cpu/basic.c) */

static volt_node *tape_node(volt_step *s, volt_node *n) {   /* n if on the tape, else NULL */
    return s->n_nodes > 0 && n == &s->tape[s->n_nodes - 1] ? n : NULL;
}

/* n's kept copy of x in dtype cd (member x NULL: convert at use); NULL + step error on OOM */
static linear_kept *linear_keep(volt_step *s, volt_node *n, volt_dtype cd) {
    volt_tensor *x = n->in[0], *w = n->in[1];
    linear_kept *k = volt__step_host_alloc(s, sizeof *k);
    if (!k) return NULL;
    k->x = NULL;
    k->dt = cd;
    if (!volt__needs_grad(w) || x->dtype == cd) return k;
    for (int i = s->n_nodes - 2; i >= 0 && i >= s->n_nodes - 1 - LINEAR_SHARE_BACK && !k->x; i--) {
        const volt_node *p = &s->tape[i];
        const linear_kept *pk = p->op == VOLT_OP_LINEAR ? p->saved : NULL;
        if (pk && p->in[0] == x && pk->dt == cd) k->x = pk->x;
    }
    if (k->x) return k;
    const int64_t numel = volt_tensor_numel(x);
    void *buf = volt_step_alloc(s, volt_dtype_size(cd) * (size_t)(numel ? numel : 1));
    if (!buf) return NULL;
    if (volt__cuda_check(s, volt_cu_convert(volt__cuda_stream(s), buf, cd, x->data, x->dtype, numel), "convert") < 0)
        return NULL;
    k->x = buf;
    return k;
}

static volt_dtype gemm_dtype(const volt_node *n) {
    volt_dtype cd = n->op == VOLT_OP_LINEAR ? n->attr.linear.compute : n->attr.matmul.compute;
    if (cd != VOLT_F32) return cd;
    return volt__is_16bit(n->in[1]) ? n->in[1]->dtype : volt__is_16bit(n->in[0]) ? n->in[0]->dtype : VOLT_F32;
}

static volt_cuda_gemm gemm_of(volt_dtype cd, char ta, char tb, int64_t M, int64_t N, int64_t K, const void *A,
                              int64_t lda, const void *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    return (volt_cuda_gemm){.ta = ta, .tb = tb, .batch = 1, .M = M, .N = N, .K = K, .beta = beta, .ab = cd, .A = A,
                            .lda = lda, .B = B, .ldb = ldb, .C = C, .ldc = ldc};
}

static volt_status matmul_fwd(volt_step *s, volt_node *n) {
    const volt_attr_matmul *at = &n->attr.matmul;
    const volt_dtype cd = gemm_dtype(n);
    const void *a = volt__cuda_as(s, n->in[0], cd, 0), *b = volt__cuda_as(s, n->in[1], cd, 1);
    if (!a || !b) return s->status;
    volt_cuda_gemm g = gemm_of(cd, 'N', 'N', at->M, at->N, at->K, a, at->K, b, at->N, 0.f, n->out->data, at->N);
    g.batch = at->batch; g.sa = at->M * at->K; g.sb = at->K * at->N; g.sc = at->M * at->N;
    return volt__cuda_gemm(s, &g, "matmul");
}

static volt_status matmul_bwd(volt_step *s, volt_node *n) {
    const volt_attr_matmul *at = &n->attr.matmul;
    const int64_t B = at->batch, M = at->M, K = at->K, N = at->N;
    volt_tensor *a = n->in[0], *b = n->in[1];
    const volt_dtype cd = gemm_dtype(n);
    const void *dc = volt__cuda_f32_as(s, n->out->grad, volt_tensor_numel(n->out), cd, 0);
    const void *bf = n->grad_mode[0] ? volt__cuda_as(s, b, cd, 1) : NULL;
    const void *af = n->grad_mode[1] ? volt__cuda_as(s, a, cd, 2) : NULL;
    if (!dc || (n->grad_mode[0] && !bf) || (n->grad_mode[1] && !af)) return s->status;
    volt_status st = VOLT_OK;
    if (n->grad_mode[0]) {   /* da (M,K) (+)= dc (M,N) b^T */
        volt_cuda_gemm g = gemm_of(cd, 'N', 'T', M, K, N, dc, N, bf, N, volt__cuda_acc(n, 0) ? 1.f : 0.f, a->grad, K);
        g.batch = B; g.sa = M * N; g.sb = K * N; g.sc = M * K;
        if ((st = volt__cuda_gemm(s, &g, "matmul backward")) < 0) return st;
    }
    if (n->grad_mode[1]) {   /* db (K,N) (+)= a^T (K,M) dc (M,N) */
        volt_cuda_gemm g = gemm_of(cd, 'T', 'N', K, N, M, af, K, dc, N, volt__cuda_acc(n, 1) ? 1.f : 0.f, b->grad, N);
        g.batch = B; g.sa = M * K; g.sb = M * N; g.sc = K * N;
        st = volt__cuda_gemm(s, &g, "matmul backward");
    }
    return st;
}

static volt_status linear_fwd(volt_step *s, volt_node *n) {
    const int64_t R = n->attr.linear.rows, In = n->attr.linear.in, O = n->attr.linear.out;
    const volt_dtype cd = gemm_dtype(n);
    const linear_kept *kept = NULL;
    if (cd != VOLT_F32 && !s->linear_keep_bf16_off && tape_node(s, n)) {
        if (!(kept = linear_keep(s, n, cd))) return s->status < 0 ? s->status : VOLT_ERR_NOMEM;
        n->saved = (void *)(uintptr_t)kept;
        if (kept->x) n->bwd_reads &= ~1u;   /* backward reads the kept copy, never x */
    }
    const void *x = kept && kept->x ? kept->x : volt__cuda_as(s, n->in[0], cd, 0);
    const void *w = x ? volt__cuda_as(s, n->in[1], cd, 1) : NULL;
    if (!x || !w) return s->status;
    volt_cuda_gemm g = gemm_of(cd, 'N', 'T', R, O, In, x, In, w, In, 0.f, n->out->data, O);
    if (n->n_in == 3) g.bias = n->in[2]->data;
    return volt__cuda_gemm(s, &g, "linear");
}

static volt_status linear_bwd(volt_step *s, volt_node *n) {
    const int64_t R = n->attr.linear.rows, In = n->attr.linear.in, O = n->attr.linear.out;
    volt_tensor *x = n->in[0], *w = n->in[1];
    const volt_dtype cd = gemm_dtype(n);
    const linear_kept *kept = cd != VOLT_F32 ? n->saved : NULL;   /* forward's copy of x */
    /* 16-bit compute with a bias grad: dy's conversion and the bias grad in one pass */
    const bool fused_db = cd != VOLT_F32 && n->n_in == 3 && n->grad_mode[2] && R > 1;
    const void *dy;
    if (fused_db) {
        void *hb = volt__scratch(s, 0, (size_t)(R * O + 1) / 2);
        if (hb && volt__cuda_check(s, volt_cu_colsum_convert(volt__cuda_stream(s), n->out->grad, R, O, n->in[2]->grad,
                                                             volt__cuda_acc(n, 2), volt__cuda_colpart(s), hb, (int)cd),
                                   "linear backward (bias)") < 0)
            return s->status;
        dy = hb;
    } else {
        dy = volt__cuda_f32_as(s, n->out->grad, R * O, cd, 0);
    }
    const void *wf = n->grad_mode[0] ? volt__cuda_as(s, w, cd, 1) : NULL;
    const void *xf = !n->grad_mode[1] ? NULL : kept && kept->x ? kept->x : volt__cuda_as(s, x, cd, 2);
    if (!dy || (n->grad_mode[0] && !wf) || (n->grad_mode[1] && !xf)) return s->status;
    volt_status st;
    if (n->grad_mode[0]) {   /* dx (R,I) (+)= dy (R,O) w (O,I) */
        volt_cuda_gemm g = gemm_of(cd, 'N', 'N', R, In, O, dy, O, wf, In, volt__cuda_acc(n, 0) ? 1.f : 0.f, x->grad, In);
        if ((st = volt__cuda_gemm(s, &g, "linear backward")) < 0) return st;
    }
    if (n->grad_mode[1]) {   /* dw (O,I) (+)= dy^T (O,R) x (R,I) */
        volt_cuda_gemm g = gemm_of(cd, 'T', 'N', O, In, R, dy, O, xf, In, volt__cuda_acc(n, 1) ? 1.f : 0.f, w->grad, In);
        if ((st = volt__cuda_gemm(s, &g, "linear backward")) < 0) return st;
    }
    if (n->n_in == 3 && n->grad_mode[2] && !fused_db)
        return volt__cuda_check(s, volt_cu_colsum(volt__cuda_stream(s), n->out->grad, NULL, R, O, n->in[2]->grad,
                                                  volt__cuda_acc(n, 2), volt__cuda_colpart(s)),
                                "linear backward (bias)");
    return VOLT_OK;
}

void volt__cuda_kernels_gemm(volt_kernel *t) {
    t[VOLT_OP_MATMUL].forward = matmul_fwd;
    t[VOLT_OP_MATMUL].backward = matmul_bwd;
    t[VOLT_OP_LINEAR].forward = linear_fwd;
    t[VOLT_OP_LINEAR].backward = linear_bwd;
}
