/* VOLT_OP_ATTENTION on the cuda backend: the node's attributes (volt_attr_attention) and
 * tensors handed to the fused kernels of core/cuda/attention_*.cu. Forward saves the per-row
 * logsumexp (B, H, Tq) in the step arena as n->saved; backward recomputes P from it. Head
 * dims 1..VOLT_CUDA_ATTN_MAX_D; a larger one fails with VOLT_ERR_UNSUPPORTED, naming it. The
 * stream and the error translation are core/cuda/cuda.h's. Under 16-bit compute forward
 * also keeps 16-bit copies of q, k, v for backward (attn_kept). */
#include "core/cuda/cuda.h"
#include "core/cuda/attention.h"
#include "core/cuda/philox.cuh"

static volt_status params_of(volt_step *s, const volt_node *n, volt_cuda_attn *p) {
    const volt_attr_attention *at = &n->attr.attention;
    if (at->D < 1 || at->D > VOLT_CUDA_ATTN_MAX_D)
        return volt_step_fail(s, VOLT_ERR_UNSUPPORTED,
                              "attention on 'cuda': head dim %lld is not supported (1..%d; the cpu backend "
                              "takes any)",
                              (long long)at->D, VOLT_CUDA_ATTN_MAX_D);
    if (at->B * at->H > 65535)
        return volt_step_fail(s, VOLT_ERR_UNSUPPORTED, "attention on 'cuda': B*H = %lld exceeds 65535 (grid y)",
                              (long long)(at->B * at->H));
    const volt_tensor *m = n->n_in == 4 ? n->in[3] : NULL;
    *p = (volt_cuda_attn){
        .B = at->B, .H = at->H, .Tq = at->Tq, .Tk = at->Tk, .D = at->D, .causal = at->causal, .packed = at->packed,
        .ld = at->packed ? at->H * at->D : at->D, .scale = at->scale,
        .p = at->dropout,
        .compute = at->compute == VOLT_BF16 ? VOLT_CU_ATTN_BF16 : at->compute == VOLT_F16 ? VOLT_CU_ATTN_F16
                                                                                  : VOLT_CU_ATTN_F32,
        .mask = m ? m->data : NULL,
        .mask_dtype = !m ? 0 : m->dtype == VOLT_U8 ? 1 : m->dtype == VOLT_I32 ? 2 : 3,
        .key = volt_philox_key(s->seed, s->rng_offset, at->call), .c0 = s->rng_offset, .c1 = at->call,
        .c0_dev = s->rng_dev, .seed = s->seed };   /* the offset read on the device: graph replays */
    return VOLT_OK;
}

/* What forward keeps for backward (n->saved): the per-row logsumexp (arena) and, under
 * 16-bit compute, q, k, v's 16-bit copies (arena, written by one conversion each in forward,
 * which then reads them too): the kernels read a copy's bits where they would round the f32
 * value to the same bits, so results do not change, and the node does not hold q, k, v. */
typedef struct attn_kept { float *lse; const void *qkv[3]; } attn_kept;

static volt_status attention_fwd(volt_step *s, volt_node *n) {
    volt_cuda_attn p;
    VOLT_TRY(params_of(s, n, &p));
    const void *qkv[3] = { n->in[0]->data, n->in[1]->data, n->in[2]->data };
    float *lse = NULL;
    if (volt__needs_grad(n->out)) {   /* backward's P = exp(S - lse) */
        attn_kept *kp = volt__step_host_alloc(s, sizeof *kp);
        if (!kp || !(lse = volt_step_alloc(s, sizeof(float) * (size_t)(p.B * p.H * p.Tq + 1)))) return VOLT_ERR_NOMEM;
        *kp = (attn_kept){ .lse = lse };
        if (p.compute != VOLT_CU_ATTN_F32) {
            const volt_dtype cd = p.compute == VOLT_CU_ATTN_BF16 ? VOLT_BF16 : VOLT_F16;
            for (int i = 0; i < 3; i++) {
                int same = -1;   /* one tensor given as several of q, k, v: one copy */
                for (int j = 0; j < i && same < 0; j++)
                    if (n->in[j] == n->in[i]) same = j;
                if (same >= 0) {
                    kp->qkv[i] = kp->qkv[same];
                    continue;
                }
                const int64_t cnt = volt_tensor_numel(n->in[i]);
                void *c = volt_step_alloc(s, sizeof(uint16_t) * (size_t)(cnt > 0 ? cnt : 1));
                if (!c) return VOLT_ERR_NOMEM;
                if (volt__cuda_check(s, volt_cu_convert(volt__cuda_stream(s), c, (int)cd, n->in[i]->data, VOLT_CU_F32,
                                                        cnt), "attention (16-bit q, k, v)") < 0)
                    return s->status;
                kp->qkv[i] = c;
            }
            for (int i = 0; i < 3; i++) qkv[i] = kp->qkv[i];
            p.qkv16 = 1;
            n->bwd_reads &= ~7u;   /* backward reads the copies, never q, k, v */
        }
        n->saved = kp;
    }
    return volt__cuda_check(s, volt__cuda_attention_fwd(volt__cuda_stream(s), &p, qkv[0], qkv[1], qkv[2],
                                                        n->out->data, lse),
                            "attention");
}

static volt_status attention_bwd(volt_step *s, volt_node *n) {
    volt_cuda_attn p;
    VOLT_TRY(params_of(s, n, &p));
    const attn_kept *kp = n->saved;
    if (!kp || !kp->lse) return volt_step_fail(s, VOLT_ERR_STATE, "attention: backward without saved logsumexp");
    float *delta = volt_step_alloc(s, sizeof(float) * (size_t)(p.B * p.H * p.Tq + 1));
    if (!delta) return VOLT_ERR_NOMEM;
    volt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    if (p.B * p.H == 0 || p.Tq == 0 || p.Tk == 0) {   /* nothing to sum: stored grads are 0 */
        for (int i = 0; i < 3; i++)
            if (n->grad_mode[i] == VOLT_GRAD_STORE)
                volt__dev_memset(s->dev, n->in[i]->grad, 0, sizeof(float) * (size_t)volt_tensor_numel(n->in[i]));
        return VOLT_OK;
    }
    const void *qkv[3] = { q->data, k->data, v->data };
    if (kp->qkv[0]) {
        for (int i = 0; i < 3; i++) qkv[i] = kp->qkv[i];
        p.qkv16 = 1;
    }
    return volt__cuda_check(s, volt__cuda_attention_bwd(volt__cuda_stream(s), &p, qkv[0], qkv[1], qkv[2],
                                                        n->out->data, n->out->grad, kp->lse, delta, q->grad,
                                                        n->grad_mode[0], k->grad, n->grad_mode[1], v->grad,
                                                        n->grad_mode[2]),
                            "attention backward");
}

void volt__cuda_kernels_attention(volt_kernel *table) {
    table[VOLT_OP_ATTENTION] = (volt_kernel){ "attention", attention_fwd, attention_bwd };
}
