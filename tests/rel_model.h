/* rel_model.h — the small model, data and trainer the reliability tests share
 * (tests/test_reliability.c, tests/tools/fault_run.c): a 2-layer MLP on a fixed synthetic
 * set, AdamW, deterministic. REL_EXTRA adds one parameter ("extra.weight"), so a checkpoint
 * of that model has a tensor the plain model lacks. */
#ifndef REL_MODEL_H
#define REL_MODEL_H
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "volt/volt.h"
#include "volt/trainer.h"
#include "volt/precision.h"

enum { REL_IN = 9, REL_H = 17, REL_NC = 3, REL_NS = 96 };

typedef struct rel_mlp {
    bool extra;
    volt_tensor *w1, *b1, *w2, *b2, *x;
} rel_mlp;

static volt_status rel_setup(void *self, volt_params *ps) {
    rel_mlp *m = self;
    VOLT_TRY(volt_params_unit(ps, "fc1"));
    VOLT_TRY(volt_param_new(ps, "fc1.weight", VOLT_SHAPE(REL_H, REL_IN), VOLT_INIT_TORCH_LINEAR, &m->w1));
    VOLT_TRY(volt_param_new(ps, "fc1.bias", VOLT_SHAPE(REL_H), VOLT_INIT_UNIFORM(-0.1f, 0.1f), &m->b1));
    VOLT_TRY(volt_params_unit(ps, "fc2"));
    VOLT_TRY(volt_param_new(ps, "fc2.weight", VOLT_SHAPE(REL_NC, REL_H), VOLT_INIT_TORCH_LINEAR, &m->w2));
    VOLT_TRY(volt_param_new(ps, "fc2.bias", VOLT_SHAPE(REL_NC), VOLT_INIT_ZEROS, &m->b2));
    if (m->extra) VOLT_TRY(volt_param_new(ps, "extra.weight", VOLT_SHAPE(4), VOLT_INIT_ZEROS, &m->x));
    return VOLT_OK;
}

static volt_tensor *rel_fwd(rel_mlp *m, volt_step *s, const volt_batch *b) {
    return volt_linear(s, volt_relu(s, volt_linear(s, volt_batch_x(b), m->w1, m->b1)), m->w2, m->b2);
}

static volt_status rel_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    volt_tensor *loss = volt_cross_entropy(s, rel_fwd(self, s, b), volt_batch_y(b));
    VOLT_TRY(volt_log(s, "train_loss", loss, VOLT_LOG_STEP | VOLT_LOG_SYNC));
    return volt_step_set_loss(s, loss);
}

static volt_status rel_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    return volt_log(s, "val_loss", volt_cross_entropy(s, rel_fwd(self, s, b), volt_batch_y(b)), VOLT_LOG_EPOCH | VOLT_LOG_SYNC);
}

static volt_status rel_opt(void *self, volt_optim_setup *o) {
    o->optimizer.kind = VOLT_OPTIM_ADAMW;
    o->optimizer.lr = 1e-2f;
    return VOLT_OK;
}

static const volt_module_ops rel_ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "rel_mlp", .setup = rel_setup, .configure_optimizers = rel_opt,
    .training_step = rel_train, .validation_step = rel_val,
};

static float rel_X[REL_NS * REL_IN];
static int64_t rel_Y[REL_NS];

static volt_dataset *rel_data(void) {
    for (int i = 0; i < REL_NS; i++) {
        rel_Y[i] = (i * 7 + i / 5) % REL_NC;
        for (int k = 0; k < REL_IN; k++)
            rel_X[i * REL_IN + k] = sinf(0.37f * (float)(i * REL_IN + k)) + (k % REL_NC == rel_Y[i] ? 0.8f : 0.f);
    }
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(REL_IN) }, { "y", VOLT_I64, VOLT_SCALAR } };
    const void *d[2] = { rel_X, rel_Y };
    volt_dataset *ds = NULL;
    return volt_dataset_from_arrays(2, f, d, REL_NS, &ds) == VOLT_OK ? ds : NULL;
}

static volt_loader *rel_loader(volt_dataset *ds, int64_t bs, bool shuffle) {
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = bs;
    lc.shuffle = shuffle;
    lc.seed = 5;
    volt_loader *l = NULL;
    return volt_loader_create(&lc, ds, &l) == VOLT_OK ? l : NULL;
}

/* All parameters as f32, concatenated (n floats; the caller frees). Parameters live on the
 * device: each comes to the host by volt_tensor_to_host, then is widened there. */
static inline float *rel_weights(volt_trainer *t, int64_t *n) {
    volt_params *ps = volt_trainer_params(t);
    *n = volt_params_numel(ps);
    float *w = malloc(sizeof(float) * (size_t)(*n ? *n : 1)), *d = w;
    for (int i = 0; w && i < volt_params_count(ps); i++) {
        volt_tensor *p = volt_params_at(ps, i);
        void *h = malloc(volt_tensor_bytes(p) ? volt_tensor_bytes(p) : 1);
        if (h && volt_tensor_to_host(p, h) == VOLT_OK) volt_convert(d, VOLT_F32, h, p->dtype, volt_tensor_numel(p));
        free(h);
        d += volt_tensor_numel(p);
    }
    return w;
}
#endif
