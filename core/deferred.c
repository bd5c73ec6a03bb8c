/* Deferred index checks (core/device.h, error_word): on a backend whose kernels flag bad
 * indices in a device word, an op registers what the host needs to explain a flag (the
 * index tensor's dtype, shape and address, the bound) and the kernel lowers the word to
 * slot << 40 | position with an atomic min, so the word holds the first bad position of the
 * first op (program order) that found one. volt_step_check reads the word at a point where
 * the host synchronises anyway (the trainer after a step, volt_step_end), resets it and
 * formats the CPU's message. No read-back per op: nothing in the step waits for the host,
 * and a captured step (CUDA graph) replays the checks. */
#include <stdio.h>
#include <string.h>
#include "core/internal.h"

volt_status volt__step_defer(volt_step *s, volt_op_id op, const volt_tensor *idx, int64_t bound, uint64_t *key_base) {
    if (s->n_deferred == VOLT_MAX_DEFERRED)
        return volt_step_fail(s, VOLT_ERR_NOMEM, "step: more than %d index checks (embedding, cross_entropy) in one step",
                              VOLT_MAX_DEFERRED);
    s->deferred[s->n_deferred] = (volt_deferred_check){ .op = op, .dtype = idx->dtype, .shape = idx->shape,
                                                        .data = idx->data, .bound = bound };
    *key_base = (uint64_t)s->n_deferred++ << VOLT_DEFER_SHIFT;
    volt__step_pin(s, idx);   /* the check reads it back after the ops */
    return VOLT_OK;
}

volt_status volt_step_check(volt_step *s) {
    if (!s) return VOLT_ERR_INVALID_ARG;
    uint64_t *word = s->n_deferred ? volt__dev_error_word(s->dev) : NULL;
    if (!word) return s->status;
    uint64_t key = 0;
    volt__dev_d2h(s->dev, &key, word, sizeof key);   /* synchronises */
    const int n = s->n_deferred;
    s->n_deferred = 0;
    if (key == UINT64_MAX) return s->status;
    volt__dev_memset(s->dev, word, 0xff, sizeof key);   /* "no error" for the next step */
    const uint64_t slot = key >> VOLT_DEFER_SHIFT;
    const int64_t pos = (int64_t)(key & (((uint64_t)1 << VOLT_DEFER_SHIFT) - 1));
    if (slot >= (uint64_t)n)
        return volt_step_fail(s, VOLT_ERR_BACKEND, "step: the device flagged index check %llu of %d (corrupt error word)",
                              (unsigned long long)slot, n);
    const volt_deferred_check *c = &s->deferred[slot];
    int64_t v = 0;
    if (c->dtype == VOLT_I64) volt__dev_d2h(s->dev, &v, (const int64_t *)c->data + pos, sizeof v);
    else {
        int32_t w = 0;
        volt__dev_d2h(s->dev, &w, (const int32_t *)c->data + pos, sizeof w);
        v = w;
    }
    if (c->op == VOLT_OP_EMBEDDING) {
        const volt_tensor ids = { .dtype = c->dtype, .shape = c->shape };
        return volt__embedding_id_err(s, &ids, pos, v, c->bound);
    }
    return volt_step_fail(s, VOLT_ERR_INVALID_ARG, "cross_entropy: target[%lld] = %lld is outside [0, %lld)",
                          (long long)pos, (long long)v, (long long)c->bound);
}
