/* VOLT_OP_DROPOUT on the cuda backend: volt_attr_dropout (call index in the step, p). Keep
 * element k iff the uniform of element k of the stream (seed, step offset, call) is >= p,
 * scale kept values by 1/(1-p) (core/cpu/act.c's rule); backward redraws the mask from the
 * same counters and stores into or adds to dx as the grad mode says. The stream, the error
 * translation and the rest of the backend are core/cuda/cuda.h's. */
#include "core/cuda/cuda.h"
#include "core/cuda/dropout.h"

static volt_status dropout_fwd(volt_step *s, volt_node *n) {
    const volt_attr_dropout *at = &n->attr.dropout;
    /* the offset from the step's device word: a captured step draws each replay's own mask */
    return volt__cuda_check(s, volt__cuda_dropout_dev(volt__cuda_stream(s), n->in[0]->data, n->out->data,
                                                      volt_tensor_numel(n->out), at->p, s->seed, s->rng_dev, at->call, 0),
                            "dropout");
}

static volt_status dropout_bwd(volt_step *s, volt_node *n) {
    if (n->grad_mode[0] == VOLT_GRAD_NONE) return VOLT_OK;
    const volt_attr_dropout *at = &n->attr.dropout;
    return volt__cuda_check(s, volt__cuda_dropout_dev(volt__cuda_stream(s), n->out->grad, n->in[0]->grad,
                                                      volt_tensor_numel(n->out), at->p, s->seed, s->rng_dev, at->call,
                                                      volt__cuda_acc(n, 0)),
                            "dropout backward");
}

void volt__cuda_kernels_dropout(volt_kernel *table) {
    table[VOLT_OP_DROPOUT] = (volt_kernel){ "dropout", dropout_fwd, dropout_bwd };
}
