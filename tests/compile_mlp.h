/* tests/compile_mlp.h — the two-layer MLP the compile tests train (test_cuda_compile.c,
 * test_mpi_compile.c): 24 -> 40 (exact GELU, dropout) -> 3, and AdamW with a linear schedule,
 * so a replay must see the learning rate change every step and draw new dropout masks. */
#ifndef VOLT_TESTS_COMPILE_MLP_H
#define VOLT_TESTS_COMPILE_MLP_H
#include "volt/volt.h"

enum { IN = 24, HID = 40, NC = 3 };
typedef struct { volt_tensor *w1, *b1, *w2, *b2; } mlp;

static volt_status mlp_setup(void *self, volt_params *ps) {
    mlp *m = self;
    VOLT_TRY(volt_params_unit(ps, "fc1"));
    VOLT_TRY(volt_param_new(ps, "fc1.weight", VOLT_SHAPE(HID, IN), VOLT_INIT_TORCH_LINEAR, &m->w1));
    VOLT_TRY(volt_param_new(ps, "fc1.bias", VOLT_SHAPE(HID), VOLT_INIT_ZEROS, &m->b1));
    VOLT_TRY(volt_params_unit(ps, "fc2"));
    VOLT_TRY(volt_param_new(ps, "fc2.weight", VOLT_SHAPE(NC, HID), VOLT_INIT_TORCH_LINEAR, &m->w2));
    return volt_param_new(ps, "fc2.bias", VOLT_SHAPE(NC), VOLT_INIT_ZEROS, &m->b2);
}

/* fc2(dropout(gelu(fc1(x)), p)); p = 0: no dropout node */
static volt_tensor *mlp_logits(mlp *m, volt_step *s, const volt_batch *b, float p) {
    volt_tensor *h = volt_gelu(s, volt_linear(s, volt_batch_x(b), m->w1, m->b1));
    if (p > 0) h = volt_dropout(s, h, p);
    return volt_linear(s, h, m->w2, m->b2);
}

/* a training step: cross-entropy of the logits with dropout 0.1, train_loss logged per step */
static inline volt_status mlp_train_ce(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    volt_tensor *loss = volt_cross_entropy(s, mlp_logits(self, s, b, 0.1f), volt_batch_y(b));
    volt_log(s, "train_loss", loss, VOLT_LOG_STEP);
    return volt_step_set_loss(s, loss);
}

static volt_status mlp_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_ADAMW;
    o->optimizer.lr = 3e-3f;
    o->optimizer.weight_decay = 0.01f;
    o->use_scheduler = true;   /* the lr changes every step: the replays must see it */
    o->scheduler.kind = VOLT_SCHED_LINEAR;
    o->scheduler.warmup_steps = 3;
    o->scheduler.total_steps = 40;
    return VOLT_OK;
}
#endif
