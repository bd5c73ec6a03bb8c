/* Row ops on the "cuda" backend: softmax, log_softmax, the fused softmax + cross-entropy,
 * layernorm, embedding (core/cuda/rows.cu; semantics of core/cpu/act.c and basic.c).
 *
 * No host read-back: cross_entropy's valid count stays on the device (its backward reads
 * it there), and a bad target or embedding id is folded into the backend's error word,
 * reported by volt_step_check with the CPU's message (core/deferred.c, docs/CUDA.md). */
#include <stdio.h>
#include "core/cuda/cuda.h"

#define STREAM volt__cuda_stream(s)
#define CHECK(rc, what) volt__cuda_check(s, (rc), (what))

static volt_status softmax_fwd(volt_step *s, volt_node *n) {
    const bool log = n->op == VOLT_OP_LOG_SOFTMAX;
    return CHECK(volt_cu_softmax(STREAM, n->in[0]->data, n->out->data, n->attr.rows.rows, n->attr.rows.cols, log),
                 log ? "log_softmax" : "softmax");
}
static volt_status softmax_bwd(volt_step *s, volt_node *n) {
    if (!n->grad_mode[0]) return VOLT_OK;
    const bool log = n->op == VOLT_OP_LOG_SOFTMAX;
    return CHECK(volt_cu_softmax_grad(STREAM, n->out->data, n->out->grad, n->in[0]->grad, n->attr.rows.rows,
                                      n->attr.rows.cols, log, volt__cuda_acc(n, 0)),
                 log ? "log_softmax backward" : "softmax backward");
}

/* ---- cross-entropy: logits (N, C), target (N) i32/i64. saved: 2 int64 (the valid count,
 * which the backward kernel reads on the device, and the first bad row) then the N
 * logsumexps. A bad target is folded into the error word (volt_step_check reports it). ---- */
static volt_status xent_fwd(volt_step *s, volt_node *n) {
    const volt_attr_cross_entropy *at = &n->attr.cross_entropy;
    const int64_t N = at->n, C = at->classes;
    int64_t *saved = volt_step_alloc(s, 2 * sizeof(int64_t) + sizeof(float) * (size_t)(N ? N : 1));
    double *rowloss = (double *)volt__scratch(s, 0, 2 * (size_t)(N ? N : 1));
    if (!saved || !rowloss) return s->status < 0 ? s->status : VOLT_ERR_NOMEM;
    n->saved = saved;
    float *lse = (float *)(saved + 2);
    const volt_tensor *tg = n->in[1];
    uint64_t key = 0;
    volt_status st = volt__step_defer(s, VOLT_OP_CROSS_ENTROPY, tg, C, &key);
    if (st < 0) return st;
    st = CHECK(volt_cu_xent(STREAM, n->in[0]->data, tg->data, tg->dtype == VOLT_I64, N, C, at->ignore_index,
                            at->label_smoothing, lse, rowloss, saved, n->out->data), "cross_entropy");
    if (st < 0) return st;
    /* n->attr.cross_entropy.count stays unset on cuda: the count lives in saved[0] */
    return CHECK(volt_cu_err_fold(STREAM, saved + 1, key, volt__dev_error_word(s->dev)), "cross_entropy");
}
static volt_status xent_bwd(volt_step *s, volt_node *n) {
    const volt_attr_cross_entropy *at = &n->attr.cross_entropy;
    if (!n->grad_mode[0]) return VOLT_OK;   /* the target carries no grad */
    const int64_t *saved = n->saved;
    const volt_tensor *tg = n->in[1];
    return CHECK(volt_cu_xent_grad(STREAM, n->in[0]->data, tg->data, tg->dtype == VOLT_I64, at->n, at->classes,
                                   at->ignore_index, at->label_smoothing, (const float *)(saved + 2), saved,
                                   n->out->grad, n->in[0]->grad, volt__cuda_acc(n, 0)), "cross_entropy backward");
}

/* ---- layernorm: saved mean (R) then rstd (R) when the node is on the tape -------------------- */
static volt_status layernorm_fwd(volt_step *s, volt_node *n) {
    const volt_attr_layernorm *at = &n->attr.layernorm;
    const float *w = at->w_index >= 0 ? n->in[at->w_index]->data : NULL;
    const float *b = at->b_index >= 0 ? n->in[at->b_index]->data : NULL;
    float *stats = NULL;
    if (volt__needs_grad(n->out)) {
        if (!(stats = volt_step_alloc(s, sizeof(float) * 2 * (size_t)(at->rows ? at->rows : 1)))) return VOLT_ERR_NOMEM;
        n->saved = stats;
    }
    return CHECK(volt_cu_layernorm(STREAM, n->in[0]->data, w, b, n->out->data, stats, at->rows, at->cols, at->eps),
                 "layernorm");
}
static volt_status layernorm_bwd(volt_step *s, volt_node *n) {
    const volt_attr_layernorm *at = &n->attr.layernorm;
    const int wi = at->w_index, bi = at->b_index;
    const float *w = wi >= 0 ? n->in[wi]->data : NULL;
    volt_status st = VOLT_OK;
    if (n->grad_mode[0])
        st = CHECK(volt_cu_layernorm_grad_x(STREAM, n->in[0]->data, n->out->grad, w, n->saved, n->in[0]->grad, at->rows,
                                            at->cols, volt__cuda_acc(n, 0)), "layernorm backward");
    float *gw = wi >= 0 && n->grad_mode[wi] ? n->in[wi]->grad : NULL;
    float *gb = bi >= 0 && n->grad_mode[bi] ? n->in[bi]->grad : NULL;
    if (st == VOLT_OK && (gw || gb))
        st = CHECK(volt_cu_layernorm_grad_wb(STREAM, n->in[0]->data, n->out->grad, n->saved, at->rows, at->cols, gw,
                                             gw && volt__cuda_acc(n, wi), gb, gb && volt__cuda_acc(n, bi),
                                             volt__cuda_colpart(s)),
                   "layernorm backward");
    return st;
}

/* ---- embedding: ids (N) i32/i64, table (V, D) -> (N, D) ------------------------------------- */
static volt_status embedding_fwd(volt_step *s, volt_node *n) {
    const volt_attr_embedding *at = &n->attr.embedding;
    const volt_tensor *ids = n->in[0];
    const bool i64 = ids->dtype == VOLT_I64;
    volt_cuda_ctx *c = volt__cuda_ctx(s->dev);
    uint64_t key = 0;
    volt_status st = volt__step_defer(s, VOLT_OP_EMBEDDING, ids, at->num, &key);
    if (st < 0) return st;
    /* the first bad position into ctx->info (reused by every check: stream order), folded
     * into the error word; the gather writes 0 for a bad id */
    if ((st = CHECK(volt_cu_embedding_check(STREAM, ids->data, i64, at->n, at->num, c->info), "embedding")) < 0 ||
        (st = CHECK(volt_cu_err_fold(STREAM, c->info, key, volt__dev_error_word(s->dev)), "embedding")) < 0)
        return st;
    return CHECK(volt_cu_embedding(STREAM, ids->data, i64, n->in[1]->data, n->out->data, at->n, at->dim, at->num),
                 "embedding");
}
static volt_status embedding_bwd(volt_step *s, volt_node *n) {
    const volt_attr_embedding *at = &n->attr.embedding;
    volt__cuda_zero_stores(s, n);
    if (!n->grad_mode[1]) return VOLT_OK;
    const volt_tensor *ids = n->in[0];
    /* the ids may have been rewritten since the forward's check (volt_tensor_copy_from_host):
     * checked again into the error word as forward does (the CPU backend fails the step here);
     * the scatter-add skips a bad id, so no row outside the table is written either way */
    volt_cuda_ctx *c = volt__cuda_ctx(s->dev);
    uint64_t key = 0;
    volt_status st = volt__step_defer(s, VOLT_OP_EMBEDDING, ids, at->num, &key);
    if (st < 0 ||
        (st = CHECK(volt_cu_embedding_check(STREAM, ids->data, ids->dtype == VOLT_I64, at->n, at->num, c->info),
                    "embedding backward")) < 0 ||
        (st = CHECK(volt_cu_err_fold(STREAM, c->info, key, volt__dev_error_word(s->dev)), "embedding backward")) < 0)
        return st;
    return CHECK(volt_cu_embedding_grad(STREAM, ids->data, ids->dtype == VOLT_I64, n->out->grad, n->in[1]->grad, at->n,
                                        at->dim, at->num, at->padding_idx), "embedding backward");
}

void volt__cuda_kernels_rows(volt_kernel *t) {
    t[VOLT_OP_SOFTMAX].forward = softmax_fwd; t[VOLT_OP_SOFTMAX].backward = softmax_bwd;
    t[VOLT_OP_LOG_SOFTMAX].forward = softmax_fwd; t[VOLT_OP_LOG_SOFTMAX].backward = softmax_bwd;
    t[VOLT_OP_CROSS_ENTROPY].forward = xent_fwd; t[VOLT_OP_CROSS_ENTROPY].backward = xent_bwd;
    t[VOLT_OP_LAYERNORM].forward = layernorm_fwd; t[VOLT_OP_LAYERNORM].backward = layernorm_bwd;
    t[VOLT_OP_EMBEDDING].forward = embedding_fwd; t[VOLT_OP_EMBEDDING].backward = embedding_bwd;
}
