/* Sequential stacks: borrowed layers applied in order. Each intermediate output is released
 * once the next item has consumed it (volt_tensor_release): the tape keeps what a backward
 * reads; the caller's input and the result are left alone. */
#include <string.h>
#include "nn/util.h"

volt_status volt_nn_seq_add(volt_nn_seq *q, volt_nn_kind kind, const void *layer) {
    if (!q || (int)kind < 0 || kind >= VOLT_NN_KIND_COUNT) return VOLT_ERR_INVALID_ARG;
    bool needs_layer = kind <= VOLT_NN_ENCODER;
    if (needs_layer != (layer != NULL)) return VOLT_ERR_INVALID_ARG;
    if (q->n >= VOLT_NN_SEQ_MAX) return VOLT_ERR_NOMEM;
    q->item[q->n].kind = kind;
    q->item[q->n].layer = layer;
    q->n++;
    return VOLT_OK;
}

volt_tensor *volt_nn_seq_forward(volt_step *s, const volt_nn_seq *q, volt_tensor *x) {
    if (!q) return volt__nn_undeclared(s, "sequential");
    if (!x) {                     /* keeps an earlier op's error: the step records the first */
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "nn: sequential: input is NULL");
        return NULL;
    }
    volt_tensor *const in = x;
    for (int i = 0; i < q->n && x; i++) {
        const void *l = q->item[i].layer;
        volt_tensor *prev = x;   /* an intermediate once the next item has run: released */
        switch (q->item[i].kind) {
        case VOLT_NN_LINEAR: x = volt_nn_linear_forward(s, l, x); break;
        case VOLT_NN_LAYERNORM: x = volt_nn_layernorm_forward(s, l, x); break;
        case VOLT_NN_DROPOUT: x = volt_nn_dropout_forward(s, l, x); break;
        case VOLT_NN_CONV2D: x = volt_nn_conv2d_forward(s, l, x); break;
        case VOLT_NN_MAX_POOL2D: x = volt_nn_max_pool2d_forward(s, l, x); break;
        case VOLT_NN_ENCODER: x = volt_nn_encoder_forward(s, l, x, NULL); break;
        case VOLT_NN_ACT_RELU: x = volt_relu(s, x); break;
        case VOLT_NN_ACT_GELU: x = volt_gelu(s, x); break;
        case VOLT_NN_ACT_GELU_TANH: x = volt_gelu_tanh(s, x); break;
        case VOLT_NN_ACT_TANH: x = volt_tanh(s, x); break;
        case VOLT_NN_FLATTEN: x = volt_reshape(s, x, VOLT_SHAPE(x->shape.d[0], -1)); break;
        default:
            volt_step_fail(s, VOLT_ERR_INVALID_ARG, "nn: sequential item %d has unknown kind %d", i, (int)q->item[i].kind);
            return NULL;
        }
        volt__nn_done(s, prev, x, in);
    }
    return x;
}
