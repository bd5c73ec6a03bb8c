/* The built-in small CNN classifier (the classic MNIST/Fashion-MNIST net), written only
 * against the public headers (the steps: models/classifier.h):
 *   conv1 (C -> c1, 3x3, pad 1) - relu - maxpool 2 - conv2 (c1 -> c2, 3x3, pad 1) - relu -
 *   maxpool 2 - flatten - fc1 (c2*(H/4)*(W/4) -> hidden) - relu - dropout - fc2 (-> out).
 * Units "conv1", "conv2", "fc1", "fc2": volt/nn.h layers with nn.Conv2d / nn.Linear layout
 * and default init, so a torch module with the same attributes loads the state dict as is. */
#include <stdlib.h>
#include <string.h>
#include "volt/models.h"
#include "volt/nn.h"
#include "volt/ops.h"
#include "volt/params.h"
#include "models/classifier.h"

typedef struct cnn {
    volt__clf clf;                             /* first: the shared steps' view (models/classifier.h) */
    volt_cnn_config cfg;
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

volt_status volt_cnn_create(const volt_cnn_config *cfg, void **self) {
    if (!self) return VOLT_ERR_INVALID_ARG;
    *self = NULL;
    if (!cfg) return VOLT_ERR_INVALID_ARG;
    if (!VOLT_VERSION_OK(cfg->version, VOLT_CNN_CONFIG_VERSION)) return VOLT_ERR_VERSION;
    if (cfg->in_channels <= 0 || cfg->height < 4 || cfg->width < 4 || cfg->conv1_channels <= 0 ||
        cfg->conv2_channels <= 0 || cfg->hidden <= 0 || cfg->out_features <= 0 ||
        !volt__clf_settings_ok(cfg->dropout, cfg->optimizer, cfg->lr, cfg->weight_decay, cfg->x_field, cfg->y_field))
        return VOLT_ERR_INVALID_ARG;
    cnn *m = calloc(1, sizeof *m);
    if (!m) return VOLT_ERR_NOMEM;
    m->cfg = *cfg;
    volt__clf_init(&m->clf, "cnn", volt_cnn_forward, cfg->optimizer, cfg->lr, cfg->weight_decay, &m->cfg.x_field,
                   &m->cfg.y_field);
    if (__builtin_mul_overflow(cfg->conv2_channels, cfg->height / 2 / 2, &m->flat) ||
        __builtin_mul_overflow(m->flat, cfg->width / 2 / 2, &m->flat)) {   /* fc1's inputs must be countable */
        free(m);
        return VOLT_ERR_INVALID_ARG;
    }
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

const volt_module_ops volt_cnn_ops = {
    .version = VOLT_MODULE_OPS_VERSION,
    .name = "cnn",
    .setup = cnn_setup,
    .configure_optimizers = volt__clf_configure_optimizers,
    .training_step = volt__clf_training_step,
    .validation_step = volt__clf_validation_step,
    .test_step = volt__clf_test_step,
    .predict_step = volt__clf_predict_step,
};
