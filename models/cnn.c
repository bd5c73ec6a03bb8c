/* The built-in small CNN classifier (the classic MNIST/Fashion-MNIST net), written only
 * against the public headers:
 *   conv1 (C -> c1, 3x3, pad 1) - relu - maxpool 2 - conv2 (c1 -> c2, 3x3, pad 1) - relu -
 *   maxpool 2 - flatten - fc1 (c2*(H/4)*(W/4) -> hidden) - relu - dropout - fc2 (-> out).
 * Units "conv1", "conv2", "fc1", "fc2": volt/nn.h layers with nn.Conv2d / nn.Linear layout
 * and default init, so a torch module with the same attributes loads the state dict as is. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/models.h"
#include "volt/nn.h"
#include "volt/ops.h"
#include "volt/params.h"

typedef struct cnn {
    volt_cnn_config cfg;
    char x_field[64], y_field[64];
    int64_t flat;                              /* fc1 input: c2 * (H/2/2) * (W/2/2) */
    volt_nn_conv2d conv1, conv2;
    volt_nn_linear fc1, fc2;
    volt_nn_max_pool2d pool;
    volt_nn_dropout drop;
    volt_nn_seq body;                          /* (B, C, H, W) -> logits */
} cnn;

void volt_cnn_config_init(volt_cnn_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_CNN_CONFIG_VERSION;
    cfg->in_channels = 1;
    cfg->height = 28;
    cfg->width = 28;
    cfg->conv1_channels = 32;
    cfg->conv2_channels = 64;
    cfg->hidden = 128;
    cfg->out_features = 10;
    cfg->dropout = 0.25f;
    cfg->optimizer = VOLT_OPTIM_ADAM;
    cfg->lr = 1e-3f;
    cfg->weight_decay = 0.f;
    cfg->x_field = "x";
    cfg->y_field = "y";
}

static bool field_name_ok(const char *s) { return !s || (*s && strlen(s) < 64); }

volt_status volt_cnn_create(const volt_cnn_config *cfg, void **self) {
    if (!self) return VOLT_ERR_INVALID_ARG;
    *self = NULL;
    if (!cfg) return VOLT_ERR_INVALID_ARG;
    if (!VOLT_VERSION_OK(cfg->version, VOLT_CNN_CONFIG_VERSION)) return VOLT_ERR_VERSION;
    if (cfg->in_channels <= 0 || cfg->height < 4 || cfg->width < 4 || cfg->conv1_channels <= 0 ||
        cfg->conv2_channels <= 0 || cfg->hidden <= 0 || cfg->out_features <= 0 ||
        !(cfg->dropout >= 0.f && cfg->dropout < 1.f) || !(cfg->lr >= 0.f && isfinite(cfg->lr)) ||
        !(cfg->weight_decay >= 0.f && isfinite(cfg->weight_decay)) ||
        (int)cfg->optimizer < 0 || cfg->optimizer >= VOLT_OPTIM_KIND_COUNT ||
        !field_name_ok(cfg->x_field) || !field_name_ok(cfg->y_field))
        return VOLT_ERR_INVALID_ARG;
    cnn *m = calloc(1, sizeof *m);
    if (!m) return VOLT_ERR_NOMEM;
    m->cfg = *cfg;
    snprintf(m->x_field, sizeof m->x_field, "%s", cfg->x_field ? cfg->x_field : "x");
    snprintf(m->y_field, sizeof m->y_field, "%s", cfg->y_field ? cfg->y_field : "y");
    m->cfg.x_field = m->x_field;
    m->cfg.y_field = m->y_field;
    m->flat = cfg->conv2_channels * (cfg->height / 2 / 2) * (cfg->width / 2 / 2);
    *self = m;
    return VOLT_OK;
}

void volt_cnn_destroy(void *self) { free(self); }

static volt_status cnn_setup(void *self, volt_params *ps) {
    cnn *m = self;
    const volt_cnn_config *c = &m->cfg;
    volt_nn_conv2d_config cc;
    volt_nn_conv2d_config_init(&cc);
    cc.padding = 1;
    m->pool = (volt_nn_max_pool2d){ 2, 2 };
    m->drop.p = c->dropout;
    VOLT_TRY(volt_nn_conv2d_declare_ex(ps, "conv1", c->in_channels, c->conv1_channels, 3, &cc, &m->conv1));
    VOLT_TRY(volt_nn_conv2d_declare_ex(ps, "conv2", c->conv1_channels, c->conv2_channels, 3, &cc, &m->conv2));
    VOLT_TRY(volt_nn_linear_declare(ps, "fc1", m->flat, c->hidden, &m->fc1));
    VOLT_TRY(volt_nn_linear_declare(ps, "fc2", c->hidden, c->out_features, &m->fc2));
    const struct { volt_nn_kind kind; const void *layer; } body[] = {
        { VOLT_NN_CONV2D, &m->conv1 }, { VOLT_NN_ACT_RELU, NULL }, { VOLT_NN_MAX_POOL2D, &m->pool }, // (B, c1, H/2, W/2)
        { VOLT_NN_CONV2D, &m->conv2 }, { VOLT_NN_ACT_RELU, NULL }, { VOLT_NN_MAX_POOL2D, &m->pool }, // (B, c2, H/4, W/4)
        { VOLT_NN_FLATTEN, NULL }, { VOLT_NN_LINEAR, &m->fc1 }, { VOLT_NN_ACT_RELU, NULL },          // (B, hidden)
    };
    m->body.n = 0;
    for (size_t i = 0; i < sizeof body / sizeof body[0]; i++)
        VOLT_TRY(volt_nn_seq_add(&m->body, body[i].kind, body[i].layer));
    if (c->dropout > 0.f) VOLT_TRY(volt_nn_seq_add(&m->body, VOLT_NN_DROPOUT, &m->drop));
    return volt_nn_seq_add(&m->body, VOLT_NN_LINEAR, &m->fc2);                           // (B, out)
}

volt_tensor *volt_cnn_forward(void *self, volt_step *s, volt_tensor *x) {
    cnn *m = self;
    const volt_cnn_config *c = &m->cfg;
    if (!x) return volt_relu(s, NULL);   /* records the NULL-input error in the step */
    int64_t B = x->shape.d[0];
    return volt_nn_seq_forward(s, &m->body, volt_reshape(s, x, VOLT_SHAPE(B, c->in_channels, c->height, c->width)));
}

/* Forward on the batch, then the shared classifier step (volt_classification_step). */
static volt_status cnn_eval_step(cnn *m, volt_step *s, const volt_batch *b, const char *stage) {
    volt_tensor *x = volt_batch_field(b, m->x_field), *y = volt_batch_field(b, m->y_field);
    if (!x || !y)
        return volt_step_fail(s, VOLT_ERR_NOT_FOUND, "cnn: batch has no field '%s'", x ? m->y_field : m->x_field);
    return volt_classification_step(s, volt_cnn_forward(m, s, x), y, stage);
}

static volt_status cnn_training_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx) {
    return cnn_eval_step(self, s, b, "train");
}

static volt_status cnn_validation_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx) {
    return cnn_eval_step(self, s, b, "val");
}

static volt_status cnn_test_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx) {
    return cnn_eval_step(self, s, b, "test");
}

static volt_status cnn_predict_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx,
                                    volt_tensor **out) {
    cnn *m = self;
    volt_tensor *x = volt_batch_field(b, m->x_field);
    if (!x) return volt_step_fail(s, VOLT_ERR_NOT_FOUND, "cnn: batch has no field '%s'", m->x_field);
    *out = volt_cnn_forward(m, s, x);
    return *out ? VOLT_OK : volt_step_status(s);
}

static volt_status cnn_configure_optimizers(void *self, volt_optim_setup *out) {
    cnn *m = self;
    out->optimizer.kind = m->cfg.optimizer;
    out->optimizer.lr = m->cfg.lr;
    out->optimizer.weight_decay = m->cfg.weight_decay;
    return VOLT_OK;
}

const volt_module_ops volt_cnn_ops = {
    .version = VOLT_MODULE_OPS_VERSION,
    .name = "cnn",
    .setup = cnn_setup,
    .configure_optimizers = cnn_configure_optimizers,
    .training_step = cnn_training_step,
    .validation_step = cnn_validation_step,
    .test_step = cnn_test_step,
    .predict_step = cnn_predict_step,
};
