/* MATMUL and LINEAR on the "cuda" backend: the glue of core/cpu/basic.c's GEMM kernels over
 * cuBLASLt (core/cuda/gemm.c). The compute dtype (the node's `compute`, or a 16-bit operand's
 * dtype under f32 compute) decides the operand type: f32 runs in f32; bf16 / f16 convert
 * f32 operands (and the upstream gradient in backward) to that dtype in step scratch and run
 * natively with f32 accumulation; 16-bit parameters are used in place. Outputs and grads are
 * f32. The tape's grad modes map to beta: STORE = 0, ADD = 1. The linear bias is the GEMM's
 * epilogue forward; its gradient is a column sum of the f32 upstream gradient (as on the
 * CPU, where the bias is added in f32). */
#include "core/cuda/cuda.h"

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
    const void *x = volt__cuda_as(s, n->in[0], cd, 0), *w = volt__cuda_as(s, n->in[1], cd, 1);
    if (!x || !w) return s->status;
    volt_cuda_gemm g = gemm_of(cd, 'N', 'T', R, O, In, x, In, w, In, 0.f, n->out->data, O);
    if (n->n_in == 3) g.bias = n->in[2]->data;
    return volt__cuda_gemm(s, &g, "linear");
}

static volt_status linear_bwd(volt_step *s, volt_node *n) {
    const int64_t R = n->attr.linear.rows, In = n->attr.linear.in, O = n->attr.linear.out;
    volt_tensor *x = n->in[0], *w = n->in[1];
    const volt_dtype cd = gemm_dtype(n);
    const void *dy = volt__cuda_f32_as(s, n->out->grad, R * O, cd, 0);
    const void *wf = n->grad_mode[0] ? volt__cuda_as(s, w, cd, 1) : NULL;
    const void *xf = n->grad_mode[1] ? volt__cuda_as(s, x, cd, 2) : NULL;
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
    if (n->n_in == 3 && n->grad_mode[2])
        return volt__cuda_check(s, volt_cu_colsum(volt__cuda_stream(s), n->out->grad, NULL, R, O, n->in[2]->grad,
                                                  volt__cuda_acc(n, 2)), "linear backward (bias)");
    return VOLT_OK;
}

void volt__cuda_kernels_gemm(volt_kernel *t) {
    t[VOLT_OP_MATMUL].forward = matmul_fwd;
    t[VOLT_OP_MATMUL].backward = matmul_bwd;
    t[VOLT_OP_LINEAR].forward = linear_fwd;
    t[VOLT_OP_LINEAR].backward = linear_bwd;
}
