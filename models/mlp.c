/* The built-in MLP classifier: [fc_i - relu - dropout] x n_hidden - fc_out, written only
 * against the public headers, as a stack of volt/nn.h layers. Layer k (1-based) is
 * nn.Linear "fc<k>": its own unit, "fc<k>.weight" (out, in), "fc<k>.bias" (out). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/models.h"
#include "volt/nn.h"
#include "volt/ops.h"
#include "volt/params.h"

#define MLP_LAYERS (VOLT_MLP_MAX_HIDDEN + 1)

typedef struct mlp {
    volt_mlp_config cfg;
    char x_field[64], y_field[64];
    int n_layers;                              /* n_hidden + 1 */
    int64_t width[MLP_LAYERS + 1];             /* width[0] = in, width[n_layers] = out */
    volt_nn_linear fc[MLP_LAYERS];
    volt_nn_dropout drop;
    volt_nn_seq body;                          /* fc1 relu [dropout] fc2 ... */
} mlp;

void volt_mlp_config_init(volt_mlp_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_MLP_CONFIG_VERSION;
    cfg->in_features = 784;
    cfg->n_hidden = 2;
    cfg->hidden[0] = 256;
    cfg->hidden[1] = 128;
    cfg->out_features = 10;
    cfg->dropout = 0.2f;
    cfg->optimizer = VOLT_OPTIM_ADAM;
    cfg->lr = 1e-3f;
    cfg->weight_decay = 0.f;
    cfg->x_field = "x";
    cfg->y_field = "y";
}

static bool field_name_ok(const char *s) { return !s || (*s && strlen(s) < 64); }

volt_status volt_mlp_create(const volt_mlp_config *cfg, void **self) {
    if (!self) return VOLT_ERR_INVALID_ARG;
    *self = NULL;
    if (!cfg) return VOLT_ERR_INVALID_ARG;
    if (!VOLT_VERSION_OK(cfg->version, VOLT_MLP_CONFIG_VERSION)) return VOLT_ERR_VERSION;
    if (cfg->in_features <= 0 || cfg->out_features <= 0 || cfg->n_hidden < 0 ||
        cfg->n_hidden > VOLT_MLP_MAX_HIDDEN || !(cfg->dropout >= 0.f && cfg->dropout < 1.f) ||
        !(cfg->lr >= 0.f && isfinite(cfg->lr)) || !(cfg->weight_decay >= 0.f && isfinite(cfg->weight_decay)) ||
        (int)cfg->optimizer < 0 || cfg->optimizer >= VOLT_OPTIM_KIND_COUNT ||
        !field_name_ok(cfg->x_field) || !field_name_ok(cfg->y_field))
        return VOLT_ERR_INVALID_ARG;
    for (int i = 0; i < cfg->n_hidden; i++)
        if (cfg->hidden[i] <= 0) return VOLT_ERR_INVALID_ARG;
    mlp *m = calloc(1, sizeof *m);
    if (!m) return VOLT_ERR_NOMEM;
    m->cfg = *cfg;
    snprintf(m->x_field, sizeof m->x_field, "%s", cfg->x_field ? cfg->x_field : "x");
    snprintf(m->y_field, sizeof m->y_field, "%s", cfg->y_field ? cfg->y_field : "y");
    m->cfg.x_field = m->x_field;
    m->cfg.y_field = m->y_field;
    m->n_layers = cfg->n_hidden + 1;
    m->width[0] = cfg->in_features;
    for (int i = 0; i < cfg->n_hidden; i++) m->width[i + 1] = cfg->hidden[i];
    m->width[m->n_layers] = cfg->out_features;
    *self = m;
    return VOLT_OK;
}

void volt_mlp_destroy(void *self) { free(self); }

static volt_status mlp_setup(void *self, volt_params *ps) {
    mlp *m = self;
    m->body.n = 0;
    m->drop.p = m->cfg.dropout;
    for (int l = 0; l < m->n_layers; l++) {
        char name[16];
        snprintf(name, sizeof name, "fc%d", l + 1);
        VOLT_TRY(volt_nn_linear_declare(ps, name, m->width[l], m->width[l + 1], &m->fc[l]));
        VOLT_TRY(volt_nn_seq_add(&m->body, VOLT_NN_LINEAR, &m->fc[l]));
        if (l + 1 == m->n_layers) break;
        VOLT_TRY(volt_nn_seq_add(&m->body, VOLT_NN_ACT_RELU, NULL));
        if (m->cfg.dropout > 0.f) VOLT_TRY(volt_nn_seq_add(&m->body, VOLT_NN_DROPOUT, &m->drop));
    }
    return VOLT_OK;
}

volt_tensor *volt_mlp_forward(void *self, volt_step *s, volt_tensor *x) {
    mlp *m = self;
    if (x && x->shape.ndim != 2) x = volt_reshape(s, x, VOLT_SHAPE(x->shape.d[0], -1));  /* (B, ...) -> (B, in) */
    return volt_nn_seq_forward(s, &m->body, x);                                          // (B, out)
}

/* Forward on the batch, then the shared classifier step (volt_classification_step). */
static volt_status mlp_eval_step(mlp *m, volt_step *s, const volt_batch *b, const char *stage) {
    volt_tensor *x = volt_batch_field(b, m->x_field), *y = volt_batch_field(b, m->y_field);
    if (!x || !y)
        return volt_step_fail(s, VOLT_ERR_NOT_FOUND, "mlp: batch has no field '%s'", x ? m->y_field : m->x_field);
    return volt_classification_step(s, volt_mlp_forward(m, s, x), y, stage);
}

static volt_status mlp_training_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx) {
    return mlp_eval_step(self, s, b, "train");
}

static volt_status mlp_validation_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx) {
    return mlp_eval_step(self, s, b, "val");
}

static volt_status mlp_test_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx) {
    return mlp_eval_step(self, s, b, "test");
}

static volt_status mlp_predict_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx,
                                    volt_tensor **out) {
    mlp *m = self;
    volt_tensor *x = volt_batch_field(b, m->x_field);
    if (!x) return volt_step_fail(s, VOLT_ERR_NOT_FOUND, "mlp: batch has no field '%s'", m->x_field);
    *out = volt_mlp_forward(m, s, x);
    return *out ? VOLT_OK : volt_step_status(s);
}

static volt_status mlp_configure_optimizers(void *self, volt_optim_setup *out) {
    mlp *m = self;
    out->optimizer.kind = m->cfg.optimizer;
    out->optimizer.lr = m->cfg.lr;
    out->optimizer.weight_decay = m->cfg.weight_decay;
    return VOLT_OK;
}

const volt_module_ops volt_mlp_ops = {
    .version = VOLT_MODULE_OPS_VERSION,
    .name = "mlp",
    .setup = mlp_setup,
    .configure_optimizers = mlp_configure_optimizers,
    .training_step = mlp_training_step,
    .validation_step = mlp_validation_step,
    .test_step = mlp_test_step,
    .predict_step = mlp_predict_step,
};
