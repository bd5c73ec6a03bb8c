/* DistilBERT for sequence classification, Hugging Face's layout, names and math
 * (transformers/models/distilbert/modeling_distilbert.py), written only against the public
 * headers with the volt/nn.h layers. Shapes: B batch, T tokens, D dim, C classes. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/distilbert.h"
#include "volt/nn.h"
#include "volt/ops.h"
#include "volt/params.h"
#include "volt/safetensors.h"

#define NAME_MAX_ 128
#define PREFIX "distilbert."

typedef struct distilbert {
    volt_distilbert_config cfg;
    char *pretrained_dir;
    char *no_decay;                                  /* cfg.no_decay's copy */
    char ids_field[64], mask_field[64], y_field[64];
    volt_nn_embedding word, pos;
    volt_nn_layernorm emb_ln;
    volt_nn_encoder_layer *blocks;                   /* n_layers */
    volt_nn_linear pre, cls;
} distilbert;

/* ---- config ----------------------------------------------------------------------------- */
void volt_distilbert_config_init(volt_distilbert_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_DISTILBERT_CONFIG_VERSION;
    volt_distilbert_preset(cfg, "distilbert-base");
    cfg->dropout = 0.1f;
    cfg->attention_dropout = 0.1f;
    cfg->seq_classif_dropout = 0.2f;
    cfg->n_classes = 2;
    cfg->pad_token_id = 0;
    cfg->initializer_range = 0.02f;
    cfg->optimizer = VOLT_OPTIM_ADAM;
    cfg->lr = 5e-5f;
    cfg->weight_decay = 0.f;
    cfg->warmup_steps = 0;
    cfg->total_steps = 0;
    cfg->plateau_patience = 10;
    cfg->plateau_factor = 0.1;
    cfg->pretrained_dir = NULL;
    cfg->ids_field = "input_ids";
    cfg->mask_field = "attention_mask";
    cfg->y_field = "y";
}

volt_status volt_distilbert_preset(volt_distilbert_config *cfg, const char *name) {
    static const struct { const char *name; int64_t V, P, D; int L, H; int64_t F; } presets[] = {
        { "distilbert-base", 30522, 512, 768, 6, 12, 3072 },
        { "small", 30522, 512, 128, 2, 2, 512 },
        { "tiny", 97, 16, 32, 2, 4, 64 },
    };
    if (!cfg || !name) return VOLT_ERR_INVALID_ARG;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(presets[i].name, name)) continue;
        cfg->vocab_size = presets[i].V;
        cfg->max_position = presets[i].P;
        cfg->dim = presets[i].D;
        cfg->n_layers = presets[i].L;
        cfg->n_heads = presets[i].H;
        cfg->hidden_dim = presets[i].F;
        return VOLT_OK;
    }
    return VOLT_ERR_NOT_FOUND;
}

/* GEMM FLOPs (2 per multiply-add) of one batch: per layer the six linears (q, k, v, out:
 * D x D; lin1, lin2: D x F) on B*T tokens and the attention's two products (q k^T, p v) over
 * all T keys, then the head's two linears on the B [CLS] rows; a training step is three
 * forwards (backward: two GEMMs per forward GEMM). Elementwise work, softmax, layernorms and
 * the embedding gather are not counted, nor is the keys' padding skipped. */
double volt_distilbert_flops(const volt_distilbert_config *cfg, int64_t batch, int64_t seq, bool training) {
    if (!cfg || batch <= 0 || seq <= 0) return 0;
    const double B = (double)batch, T = (double)seq, D = (double)cfg->dim, F = (double)cfg->hidden_dim;
    const double layer = 2 * B * T * (4 * D * D + 2 * D * F) + 2 * 2 * B * T * T * D;
    const double head = 2 * B * (D * D + D * (double)cfg->n_classes);
    const double fwd = (double)cfg->n_layers * layer + head;
    return training ? 3 * fwd : fwd;
}

static bool prob_ok(float p) { return p >= 0.f && p < 1.f; }
static bool field_name_ok(const char *s) { return !s || (*s && strlen(s) < 64); }

volt_status volt_distilbert_create(const volt_distilbert_config *cfg, void **self) {
    if (!self) return VOLT_ERR_INVALID_ARG;
    *self = NULL;
    if (!cfg) return VOLT_ERR_INVALID_ARG;
    if (!VOLT_VERSION_OK(cfg->version, VOLT_DISTILBERT_CONFIG_VERSION)) return VOLT_ERR_VERSION;
    const char *no_decay = cfg->version >= 2 ? cfg->no_decay : NULL;   /* a version-1 struct ends before it */
    if (no_decay && !*no_decay) return VOLT_ERR_INVALID_ARG;
    if (cfg->vocab_size <= 0 || cfg->max_position <= 0 || cfg->dim <= 0 || cfg->n_layers < 0 ||
        cfg->n_layers > 1000 || cfg->n_heads <= 0 || cfg->dim % cfg->n_heads != 0 || cfg->hidden_dim <= 0 ||
        cfg->n_classes <= 0 || !prob_ok(cfg->dropout) || !prob_ok(cfg->attention_dropout) ||
        !prob_ok(cfg->seq_classif_dropout) || cfg->pad_token_id < -1 || cfg->pad_token_id >= cfg->vocab_size ||
        !(cfg->initializer_range >= 0.f && isfinite(cfg->initializer_range)) ||
        (int)cfg->optimizer < 0 || cfg->optimizer >= VOLT_OPTIM_KIND_COUNT ||
        !(cfg->lr >= 0.f && isfinite(cfg->lr)) || !(cfg->weight_decay >= 0.f && isfinite(cfg->weight_decay)) ||
        cfg->warmup_steps < 0 || cfg->total_steps < -1 ||
        (cfg->total_steps > 0 && cfg->total_steps <= cfg->warmup_steps) ||
        !field_name_ok(cfg->ids_field) || !field_name_ok(cfg->mask_field) || !field_name_ok(cfg->y_field) ||
        (cfg->pretrained_dir && !*cfg->pretrained_dir))
        return VOLT_ERR_INVALID_ARG;
    if (cfg->version >= 4 && cfg->plateau &&   /* one schedule: the plateau's, with torch's ranges */
        (cfg->warmup_steps > 0 || cfg->total_steps != 0 || cfg->plateau_patience < 0 ||
         !(cfg->plateau_factor >= 0.0 && cfg->plateau_factor < 1.0)))
        return VOLT_ERR_INVALID_ARG;
    distilbert *m = calloc(1, sizeof *m);
    if (!m) return VOLT_ERR_NOMEM;
    m->blocks = calloc((size_t)(cfg->n_layers > 0 ? cfg->n_layers : 1), sizeof *m->blocks);
    m->pretrained_dir = cfg->pretrained_dir ? strdup(cfg->pretrained_dir) : NULL;
    m->no_decay = no_decay ? strdup(no_decay) : NULL;
    if (!m->blocks || (cfg->pretrained_dir && !m->pretrained_dir) || (no_decay && !m->no_decay)) {
        volt_distilbert_destroy(m);
        return VOLT_ERR_NOMEM;
    }
    volt_distilbert_config_init(&m->cfg);   /* a field an older struct lacks keeps its default */
    if (cfg->version >= 4) m->cfg = *cfg;   /* an older struct ends before its next version's fields */
    else if (cfg->version == 3) memcpy(&m->cfg, cfg, offsetof(volt_distilbert_config, plateau));
    else if (cfg->version == 2) memcpy(&m->cfg, cfg, offsetof(volt_distilbert_config, quiet));
    else memcpy(&m->cfg, cfg, offsetof(volt_distilbert_config, no_decay));
    m->cfg.version = VOLT_DISTILBERT_CONFIG_VERSION;
    m->cfg.pretrained_dir = m->pretrained_dir;
    m->cfg.no_decay = m->no_decay;
    snprintf(m->ids_field, sizeof m->ids_field, "%s", cfg->ids_field ? cfg->ids_field : "input_ids");
    snprintf(m->mask_field, sizeof m->mask_field, "%s", cfg->mask_field ? cfg->mask_field : "attention_mask");
    snprintf(m->y_field, sizeof m->y_field, "%s", cfg->y_field ? cfg->y_field : "y");
    m->cfg.ids_field = m->ids_field;
    m->cfg.mask_field = m->mask_field;
    m->cfg.y_field = m->y_field;
    *self = m;
    return VOLT_OK;
}

void volt_distilbert_destroy(void *self) {
    distilbert *m = self;
    if (!m) return;
    free(m->blocks);
    free(m->pretrained_dir);
    free(m->no_decay);
    free(m);
}

const volt_distilbert_config *volt_distilbert_get_config(const void *self) {
    return self ? &((const distilbert *)self)->cfg : NULL;
}

/* ---- parameters: HF's names, units and init (N(0, initializer_range), zero biases, LN 1/0,
 * the pad row of word_embeddings zeroed) ------------------------------------------------------ */
static volt_status distilbert_setup(void *self, volt_params *ps) {
    distilbert *m = self;
    const volt_distilbert_config *c = &m->cfg;
    volt_nn_embedding_config ec;
    volt_nn_embedding_config_init(&ec);
    ec.unit = VOLT_NN_UNIT_JOIN;
    ec.init = VOLT_NN_INIT_NORMAL;
    ec.std = c->initializer_range;
    volt_nn_layernorm_config nc;
    volt_nn_layernorm_config_init(&nc);
    nc.unit = VOLT_NN_UNIT_JOIN;
    nc.eps = 1e-12f;
    volt_nn_encoder_config bc;                       /* DistilBERT's post-LN block names */
    volt_nn_encoder_config_init(&bc);
    bc.n_heads = c->n_heads;
    bc.ffn_dim = c->hidden_dim;
    bc.dropout = c->dropout;
    bc.attention_dropout = c->attention_dropout;
    bc.ln_eps = 1e-12f;
    bc.init = VOLT_NN_INIT_NORMAL;
    bc.std = c->initializer_range;
    volt_nn_linear_config lc;
    volt_nn_linear_config_init(&lc);
    lc.unit = VOLT_NN_UNIT_JOIN;
    lc.init = VOLT_NN_INIT_NORMAL;
    lc.std = c->initializer_range;
    VOLT_TRY(volt_params_unit(ps, PREFIX "embeddings"));
    ec.padding_idx = c->pad_token_id;
    VOLT_TRY(volt_nn_embedding_declare_ex(ps, PREFIX "embeddings.word_embeddings", c->vocab_size, c->dim, &ec, &m->word));
    ec.padding_idx = -1;
    VOLT_TRY(volt_nn_embedding_declare_ex(ps, PREFIX "embeddings.position_embeddings", c->max_position, c->dim, &ec,
                                          &m->pos));
    VOLT_TRY(volt_nn_layernorm_declare_ex(ps, PREFIX "embeddings.LayerNorm", c->dim, &nc, &m->emb_ln));
    for (int l = 0; l < c->n_layers; l++) {          /* one unit per block */
        char p[NAME_MAX_];
        snprintf(p, sizeof p, PREFIX "transformer.layer.%d", l);
        VOLT_TRY(volt_nn_encoder_declare(ps, p, c->dim, &bc, &m->blocks[l]));
    }
    VOLT_TRY(volt_params_unit(ps, "head"));
    VOLT_TRY(volt_nn_linear_declare_ex(ps, "pre_classifier", c->dim, c->dim, &lc, &m->pre));
    return volt_nn_linear_declare_ex(ps, "classifier", c->dim, c->n_classes, &lc, &m->cls);
}

/* ---- forward --------------------------------------------------------------------------------- */
/* forward's temporary t is done with, unless an op handed it back unchanged as `kept` */
static void done(volt_step *s, volt_tensor *t, const volt_tensor *kept) {
    if (t && t != kept) volt_tensor_release(s, t);
}

volt_tensor *volt_distilbert_forward(void *self, volt_step *s, volt_tensor *ids, volt_tensor *mask) {
    distilbert *m = self;
    if (!m || !m->word.weight) {
        volt_step_fail(s, VOLT_ERR_STATE, "distilbert: forward before setup");
        return NULL;
    }
    if (!ids) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "distilbert: input_ids is NULL");
        return NULL;
    }
    const volt_distilbert_config *c = &m->cfg;
    char a[64], b[64];
    if (ids->shape.ndim != 2 || (ids->dtype != VOLT_I32 && ids->dtype != VOLT_I64)) {
        volt_step_fail(s, VOLT_ERR_SHAPE, "distilbert: input_ids must be i32/i64 (B, T), got %s %s",
                       volt_dtype_name(ids->dtype), volt_shape_str(ids->shape, a, sizeof a));
        return NULL;
    }
    int64_t T = ids->shape.d[1];
    if (T < 1 || T > c->max_position) {
        volt_step_fail(s, VOLT_ERR_SHAPE, "distilbert: %lld tokens per row, the model takes 1..%lld (max_position)",
                       (long long)T, (long long)c->max_position);
        return NULL;
    }
    if (mask && (!volt_shape_eq(mask->shape, ids->shape) ||
                 (mask->dtype != VOLT_I32 && mask->dtype != VOLT_I64 && mask->dtype != VOLT_U8))) {
        volt_step_fail(s, VOLT_ERR_SHAPE, "distilbert: attention_mask must be i32/i64/u8 %s like input_ids, got %s %s",
                       volt_shape_str(ids->shape, a, sizeof a), volt_dtype_name(mask->dtype),
                       volt_shape_str(mask->shape, b, sizeof b));
        return NULL;
    }
    volt_tensor *pos = volt_arange(s, VOLT_I32, T);   /* position ids, built on the device */
    if (!pos) return NULL;
    /* each temporary is released after its last op (volt_tensor_release): the tape keeps
     * what backward reads, the rest of the memory is reused by the next layer */
    volt_tensor *we = volt_nn_embedding_forward(s, &m->word, ids);                       // (B, T, D)
    volt_tensor *pe = volt_nn_embedding_forward(s, &m->pos, pos);                        // (T, D)
    volt_tensor *e = volt_add(s, we, pe);
    done(s, we, NULL);
    done(s, pe, NULL);
    volt_tensor *en = volt_nn_layernorm_forward(s, &m->emb_ln, e);
    done(s, e, NULL);
    volt_tensor *x = volt_dropout(s, en, c->dropout);
    done(s, en, x);
    for (int l = 0; l < c->n_layers; l++) {
        volt_tensor *y = volt_nn_encoder_forward(s, &m->blocks[l], x, mask);
        done(s, x, y);
        x = y;
    }
    volt_tensor *h = volt_select(s, x, 1, 0);                                            // (B, D): first token
    done(s, x, h);
    volt_tensor *p = volt_nn_linear_forward(s, &m->pre, h);
    done(s, h, p);
    volt_tensor *r = volt_relu(s, p);
    done(s, p, r);
    volt_tensor *d = volt_dropout(s, r, c->seq_classif_dropout);
    done(s, r, d);
    volt_tensor *logits = volt_nn_linear_forward(s, &m->cls, d);                         // (B, C)
    done(s, d, logits);
    return logits;
}

/* ---- steps -------------------------------------------------------------------------------------- */
static volt_status fetch(distilbert *m, volt_step *s, const volt_batch *b, bool need_y, volt_tensor **ids,
                         volt_tensor **mask, volt_tensor **y) {
    *ids = volt_batch_field(b, m->ids_field);
    *mask = volt_batch_field(b, m->mask_field);             /* optional */
    *y = need_y ? volt_batch_field(b, m->y_field) : NULL;
    if (!*ids) return volt_step_fail(s, VOLT_ERR_NOT_FOUND, "distilbert: batch has no field '%s'", m->ids_field);
    if (need_y && !*y) return volt_step_fail(s, VOLT_ERR_NOT_FOUND, "distilbert: batch has no field '%s'", m->y_field);
    return VOLT_OK;
}

/* Forward on the batch, then the shared classifier step (volt_classification_step). */
static volt_status eval_step(distilbert *m, volt_step *s, const volt_batch *b, const char *stage) {
    volt_tensor *ids, *mask, *y;
    VOLT_TRY(fetch(m, s, b, true, &ids, &mask, &y));
    return volt_classification_step(s, volt_distilbert_forward(m, s, ids, mask), y, stage);
}

static volt_status distilbert_training_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx) {
    return eval_step(self, s, b, "train");
}

static volt_status distilbert_validation_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx) {
    return eval_step(self, s, b, "val");
}

static volt_status distilbert_test_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx) {
    return eval_step(self, s, b, "test");
}

static volt_status distilbert_predict_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx,
                                           volt_tensor **out) {
    volt_tensor *ids, *mask, *y;
    VOLT_TRY(fetch(self, s, b, false, &ids, &mask, &y));
    *out = volt_distilbert_forward(self, s, ids, mask);
    return *out ? VOLT_OK : volt_step_status(s);
}

void volt_distilbert_set_lr(void *self, float lr) {
    if (self && lr > 0 && isfinite(lr)) ((distilbert *)self)->cfg.lr = lr;
}

static volt_status distilbert_configure_optimizers(void *self, volt_optim_setup *out) {
    const volt_distilbert_config *c = &((distilbert *)self)->cfg;
    out->optimizer.kind = c->optimizer;
    out->optimizer.lr = c->lr;
    out->optimizer.weight_decay = c->weight_decay;
    if (c->no_decay) {   /* HF's recipe: biases and LayerNorm weights without weight decay */
        out->optimizer.n_groups = 1;
        out->optimizer.groups[0] = (volt_optim_group){ .params = c->no_decay, .lr = NAN, .weight_decay = 0.f };
    }
    if (c->plateau) {   /* torch's ReduceLROnPlateau on val_loss, stepped after each epoch's validation */
        out->use_scheduler = true;
        out->scheduler.kind = VOLT_SCHED_PLATEAU;
        out->scheduler.monitor = "val_loss";
        out->scheduler.patience = c->plateau_patience;
        out->scheduler.factor = c->plateau_factor;
        out->scheduler.interval = VOLT_SCHED_EVERY_EPOCH;
    } else if (c->total_steps != 0 || c->warmup_steps > 0) {
        out->use_scheduler = true;
        out->scheduler.kind = c->total_steps != 0 ? VOLT_SCHED_LINEAR : VOLT_SCHED_LINEAR_WARMUP;
        out->scheduler.warmup_steps = c->warmup_steps;
        /* -1: the fit's optimizer steps (the trainer's check names a total not past the warmup) */
        out->scheduler.total_steps = c->total_steps < 0 ? out->estimated_stepping_batches : c->total_steps;
        out->scheduler.interval = VOLT_SCHED_EVERY_STEP;
    }
    return VOLT_OK;
}

/* The pretrained weights, if configured (models/distilbert_load.c). */
static volt_status distilbert_init_weights(void *self, volt_params *ps) {
    distilbert *m = self;
    if (!m->pretrained_dir) return VOLT_OK;
    size_t n = strlen(m->pretrained_dir) + sizeof "/model.safetensors";
    char *path = malloc(n);
    if (!path) return VOLT_ERR_NOMEM;
    snprintf(path, n, "%s/model.safetensors", m->pretrained_dir);
    volt_status st = volt_distilbert_load(m, ps, path);
    free(path);
    return st;
}

const volt_module_ops volt_distilbert_ops = {
    .version = VOLT_MODULE_OPS_VERSION,
    .name = "distilbert",
    .setup = distilbert_setup,
    .configure_optimizers = distilbert_configure_optimizers,
    .training_step = distilbert_training_step,
    .validation_step = distilbert_validation_step,
    .test_step = distilbert_test_step,
    .predict_step = distilbert_predict_step,
    .init_weights = distilbert_init_weights,
};
