/* DistilBERT for sequence classification, Hugging Face's layout, names and math
 * (transformers/models/distilbert/modeling_distilbert.py), written only against the public
 * headers. Shapes: B batch, T tokens, D dim, H heads, dh = D / H, F hidden_dim, C classes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/distilbert.h"
#include "volt/ops.h"
#include "volt/params.h"
#include "volt/safetensors.h"

#define LN_EPS 1e-12f            /* every LayerNorm in DistilBERT */
#define NAME_MAX_ 128
#define PREFIX "distilbert."

typedef struct block {
    volt_tensor *q_w, *q_b, *k_w, *k_b, *v_w, *v_b, *o_w, *o_b;
    volt_tensor *sa_ln_w, *sa_ln_b;
    volt_tensor *lin1_w, *lin1_b, *lin2_w, *lin2_b;
    volt_tensor *out_ln_w, *out_ln_b;
} block;

typedef struct distilbert {
    volt_distilbert_config cfg;
    char *pretrained_dir;
    char ids_field[64], mask_field[64], y_field[64];
    volt_tensor *word_emb, *pos_emb, *emb_ln_w, *emb_ln_b;
    block *blocks;                                   /* n_layers */
    volt_tensor *pre_w, *pre_b, *cls_w, *cls_b;
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

static bool prob_ok(float p) { return p >= 0.f && p < 1.f; }
static bool field_name_ok(const char *s) { return !s || (*s && strlen(s) < 64); }

volt_status volt_distilbert_create(const volt_distilbert_config *cfg, void **self) {
    if (!self) return VOLT_ERR_INVALID_ARG;
    *self = NULL;
    if (!cfg) return VOLT_ERR_INVALID_ARG;
    if (cfg->version != VOLT_DISTILBERT_CONFIG_VERSION) return VOLT_ERR_VERSION;
    if (cfg->vocab_size <= 0 || cfg->max_position <= 0 || cfg->dim <= 0 || cfg->n_layers < 0 ||
        cfg->n_layers > 1000 || cfg->n_heads <= 0 || cfg->dim % cfg->n_heads != 0 || cfg->hidden_dim <= 0 ||
        cfg->n_classes <= 0 || !prob_ok(cfg->dropout) || !prob_ok(cfg->attention_dropout) ||
        !prob_ok(cfg->seq_classif_dropout) || cfg->pad_token_id < -1 || cfg->pad_token_id >= cfg->vocab_size ||
        !(cfg->initializer_range >= 0.f && isfinite(cfg->initializer_range)) ||
        (int)cfg->optimizer < 0 || cfg->optimizer >= VOLT_OPTIM_KIND_COUNT ||
        !(cfg->lr >= 0.f && isfinite(cfg->lr)) || !(cfg->weight_decay >= 0.f && isfinite(cfg->weight_decay)) ||
        cfg->warmup_steps < 0 || cfg->total_steps < 0 ||
        (cfg->total_steps > 0 && cfg->total_steps <= cfg->warmup_steps) ||
        !field_name_ok(cfg->ids_field) || !field_name_ok(cfg->mask_field) || !field_name_ok(cfg->y_field) ||
        (cfg->pretrained_dir && !*cfg->pretrained_dir))
        return VOLT_ERR_INVALID_ARG;
    distilbert *m = calloc(1, sizeof *m);
    if (!m) return VOLT_ERR_NOMEM;
    m->blocks = calloc((size_t)(cfg->n_layers > 0 ? cfg->n_layers : 1), sizeof *m->blocks);
    m->pretrained_dir = cfg->pretrained_dir ? strdup(cfg->pretrained_dir) : NULL;
    if (!m->blocks || (cfg->pretrained_dir && !m->pretrained_dir)) {
        volt_distilbert_destroy(m);
        return VOLT_ERR_NOMEM;
    }
    m->cfg = *cfg;
    m->cfg.pretrained_dir = m->pretrained_dir;
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
    free(m);
}

const volt_distilbert_config *volt_distilbert_get_config(const void *self) {
    return self ? &((const distilbert *)self)->cfg : NULL;
}

/* ---- parameters ---------------------------------------------------------------------------- */
static volt_status decl(volt_params *ps, const char *prefix, const char *name, volt_shape shape,
                        volt_init init, volt_tensor **out) {
    char full[NAME_MAX_];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return volt_param_new(ps, full, shape, init, out);
}

/* nn.Linear(in, out) with HF's init: weight (out, in) ~ N(0, std), bias (out) = 0. */
static volt_status decl_linear(volt_params *ps, const char *prefix, const char *name, int64_t in, int64_t out,
                               float std, volt_tensor **w, volt_tensor **b) {
    char nm[NAME_MAX_];
    snprintf(nm, sizeof nm, "%s.weight", name);
    VOLT_TRY(decl(ps, prefix, nm, VOLT_SHAPE(out, in), VOLT_INIT_NORMAL(0.f, std), w));
    snprintf(nm, sizeof nm, "%s.bias", name);
    return decl(ps, prefix, nm, VOLT_SHAPE(out), VOLT_INIT_ZEROS, b);
}

static volt_status decl_layernorm(volt_params *ps, const char *prefix, const char *name, int64_t d,
                                  volt_tensor **w, volt_tensor **b) {
    char nm[NAME_MAX_];
    snprintf(nm, sizeof nm, "%s.weight", name);
    VOLT_TRY(decl(ps, prefix, nm, VOLT_SHAPE(d), VOLT_INIT_ONES, w));
    snprintf(nm, sizeof nm, "%s.bias", name);
    return decl(ps, prefix, nm, VOLT_SHAPE(d), VOLT_INIT_ZEROS, b);
}

static volt_status distilbert_setup(void *self, volt_params *ps) {
    distilbert *m = self;
    const volt_distilbert_config *c = &m->cfg;
    float std = c->initializer_range;
    int64_t D = c->dim, F = c->hidden_dim;
    const char *pe = PREFIX "embeddings.";
    VOLT_TRY(volt_params_unit(ps, PREFIX "embeddings"));
    VOLT_TRY(decl(ps, pe, "word_embeddings.weight", VOLT_SHAPE(c->vocab_size, D), VOLT_INIT_NORMAL(0.f, std),
                  &m->word_emb));
    VOLT_TRY(decl(ps, pe, "position_embeddings.weight", VOLT_SHAPE(c->max_position, D), VOLT_INIT_NORMAL(0.f, std),
                  &m->pos_emb));
    VOLT_TRY(decl_layernorm(ps, pe, "LayerNorm", D, &m->emb_ln_w, &m->emb_ln_b));
    for (int l = 0; l < c->n_layers; l++) {
        block *bl = &m->blocks[l];
        char unit[NAME_MAX_], p[NAME_MAX_];
        snprintf(unit, sizeof unit, PREFIX "transformer.layer.%d", l);
        snprintf(p, sizeof p, PREFIX "transformer.layer.%d.", l);
        VOLT_TRY(volt_params_unit(ps, unit));
        VOLT_TRY(decl_linear(ps, p, "attention.q_lin", D, D, std, &bl->q_w, &bl->q_b));
        VOLT_TRY(decl_linear(ps, p, "attention.k_lin", D, D, std, &bl->k_w, &bl->k_b));
        VOLT_TRY(decl_linear(ps, p, "attention.v_lin", D, D, std, &bl->v_w, &bl->v_b));
        VOLT_TRY(decl_linear(ps, p, "attention.out_lin", D, D, std, &bl->o_w, &bl->o_b));
        VOLT_TRY(decl_layernorm(ps, p, "sa_layer_norm", D, &bl->sa_ln_w, &bl->sa_ln_b));
        VOLT_TRY(decl_linear(ps, p, "ffn.lin1", D, F, std, &bl->lin1_w, &bl->lin1_b));
        VOLT_TRY(decl_linear(ps, p, "ffn.lin2", F, D, std, &bl->lin2_w, &bl->lin2_b));
        VOLT_TRY(decl_layernorm(ps, p, "output_layer_norm", D, &bl->out_ln_w, &bl->out_ln_b));
    }
    VOLT_TRY(volt_params_unit(ps, "head"));
    VOLT_TRY(decl_linear(ps, "", "pre_classifier", D, D, std, &m->pre_w, &m->pre_b));
    return decl_linear(ps, "", "classifier", D, c->n_classes, std, &m->cls_w, &m->cls_b);
}

/* ---- forward --------------------------------------------------------------------------------- */
static int64_t id_at(const volt_tensor *ids, int64_t i) {
    return ids->dtype == VOLT_I32 ? ((const int32_t *)ids->data)[i] : ((const int64_t *)ids->data)[i];
}

/* nn.Embedding(padding_idx=pad): positions holding the pad id send no gradient to the pad
 * row. Values are unchanged: we * keep + pad_rows, keep = 0 and pad_rows = W[pad] there.
 * we (B, T, D). Only in a training step, and only when a pad id occurs. */
static volt_tensor *block_pad_grad(distilbert *m, volt_step *s, volt_tensor *ids, volt_tensor *we) {
    int64_t pad = m->cfg.pad_token_id, N = volt_tensor_numel(ids), D = m->cfg.dim;
    if (!we || pad < 0 || !volt_step_training(s) || !(m->word_emb->flags & VOLT_TENSOR_REQUIRES_GRAD)) return we;
    bool any = false;
    for (int64_t i = 0; i < N && !any; i++) any = id_at(ids, i) == pad;
    if (!any) return we;
    volt_tensor *keep = volt_tensor_new(s, VOLT_F32, we->shape);
    volt_tensor *rows = volt_tensor_new(s, VOLT_F32, we->shape);   /* zero-filled */
    if (!keep || !rows) return NULL;
    const float *wp = volt_tensor_f32(m->word_emb) + pad * D;
    float *k = volt_tensor_f32(keep), *r = volt_tensor_f32(rows);
    for (int64_t i = 0; i < N; i++) {
        if (id_at(ids, i) == pad) memcpy(r + i * D, wp, sizeof(float) * (size_t)D);
        else for (int64_t j = 0; j < D; j++) k[i * D + j] = 1.f;
    }
    return volt_add(s, volt_mul(s, we, keep), rows);
}

/* (B, T, D) -> (B, H, T, dh) */
static volt_tensor *split_heads(volt_step *s, volt_tensor *x, int64_t B, int64_t T, int64_t H, int64_t dh) {
    static const int perm[4] = { 0, 2, 1, 3 };
    return volt_permute(s, volt_reshape(s, x, VOLT_SHAPE(B, T, H, dh)), perm);
}

volt_tensor *volt_distilbert_forward(void *self, volt_step *s, volt_tensor *ids, volt_tensor *mask) {
    distilbert *m = self;
    if (!m || !m->word_emb) {
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
    int64_t B = ids->shape.d[0], T = ids->shape.d[1], D = c->dim, H = c->n_heads, dh = D / H;
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

    /* embeddings */
    volt_tensor *pos = volt_tensor_new(s, VOLT_I32, VOLT_SHAPE(T));
    if (!pos) return NULL;
    for (int64_t t = 0; t < T; t++) ((int32_t *)pos->data)[t] = (int32_t)t;
    volt_tensor *we = block_pad_grad(m, s, ids, volt_embedding(s, ids, m->word_emb));    // (B, T, D)
    volt_tensor *x = volt_add(s, we, volt_embedding(s, pos, m->pos_emb));                // + (T, D)
    x = volt_dropout(s, volt_layernorm(s, x, m->emb_ln_w, m->emb_ln_b, LN_EPS), c->dropout);

    /* transformer */
    static const int merge[4] = { 0, 2, 1, 3 };
    for (int l = 0; l < c->n_layers; l++) {
        const block *bl = &m->blocks[l];
        volt_tensor *q = split_heads(s, volt_linear(s, x, bl->q_w, bl->q_b), B, T, H, dh);   // (B, H, T, dh)
        volt_tensor *k = split_heads(s, volt_linear(s, x, bl->k_w, bl->k_b), B, T, H, dh);
        volt_tensor *v = split_heads(s, volt_linear(s, x, bl->v_w, bl->v_b), B, T, H, dh);
        /* HF's dropout on the attention probabilities, fused (no dropout in evaluation) */
        volt_tensor *ctx = volt_attention_dropout(s, q, k, v, mask, false, c->attention_dropout);   // (B, H, T, dh)
        ctx = volt_reshape(s, volt_permute(s, ctx, merge), VOLT_SHAPE(B, T, D));            // (B, T, D)
        volt_tensor *sa = volt_linear(s, ctx, bl->o_w, bl->o_b);
        x = volt_layernorm(s, volt_add(s, sa, x), bl->sa_ln_w, bl->sa_ln_b, LN_EPS);
        volt_tensor *f = volt_gelu(s, volt_linear(s, x, bl->lin1_w, bl->lin1_b));           // (B, T, F)
        f = volt_dropout(s, volt_linear(s, f, bl->lin2_w, bl->lin2_b), c->dropout);         // (B, T, D)
        x = volt_layernorm(s, volt_add(s, f, x), bl->out_ln_w, bl->out_ln_b, LN_EPS);
    }

    /* classification head on the first token */
    volt_tensor *h = volt_select(s, x, 1, 0);                                                // (B, D)
    h = volt_dropout(s, volt_relu(s, volt_linear(s, h, m->pre_w, m->pre_b)), c->seq_classif_dropout);
    return volt_linear(s, h, m->cls_w, m->cls_b);                                            // (B, C)
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

static volt_status distilbert_configure_optimizers(void *self, volt_optim_setup *out) {
    const volt_distilbert_config *c = &((distilbert *)self)->cfg;
    out->optimizer.kind = c->optimizer;
    out->optimizer.lr = c->lr;
    out->optimizer.weight_decay = c->weight_decay;
    if (c->total_steps > 0 || c->warmup_steps > 0) {
        out->use_scheduler = true;
        out->scheduler.kind = c->total_steps > 0 ? VOLT_SCHED_LINEAR : VOLT_SCHED_LINEAR_WARMUP;
        out->scheduler.warmup_steps = c->warmup_steps;
        out->scheduler.total_steps = c->total_steps;
        out->scheduler.interval = VOLT_SCHED_EVERY_STEP;
    }
    return VOLT_OK;
}

/* ---- pretrained weights ------------------------------------------------------------------------ */
static bool has_prefix(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }
static bool has_suffix(const char *s, const char *x) {
    size_t n = strlen(s), k = strlen(x);
    return n >= k && !strcmp(s + n - k, x);
}
static bool is_head(const char *name) { return has_prefix(name, "pre_classifier.") || has_prefix(name, "classifier."); }

/* The names a parameter may have in a HF file, in order of preference (at most 4). */
static int candidates(const char *name, char out[4][NAME_MAX_]) {
    int n = 0;
    snprintf(out[n++], NAME_MAX_, "%s", name);
    if (has_prefix(name, PREFIX)) snprintf(out[n++], NAME_MAX_, "%s", name + strlen(PREFIX));
    bool norm = strstr(name, "LayerNorm.") || strstr(name, "layer_norm.");
    const char *from = has_suffix(name, ".weight") ? ".weight" : has_suffix(name, ".bias") ? ".bias" : NULL;
    if (norm && from) {                            /* old TF-era names: gamma / beta */
        const char *to = !strcmp(from, ".weight") ? ".gamma" : ".beta";
        for (int i = 0, k = n; i < k; i++) {
            size_t base = strlen(out[i]) - strlen(from), tl = strlen(to);
            if (base + tl >= NAME_MAX_) continue;
            memcpy(out[n], out[i], base);
            memcpy(out[n] + base, to, tl + 1);
            n++;
        }
    }
    return n;
}

/* Does file tensor `fname` map to one of the model's parameters? */
static bool file_name_used(volt_params *ps, const char *fname) {
    int np = volt_params_count(ps);
    for (int i = 0; i < np; i++) {
        char cand[4][NAME_MAX_];
        int nc = candidates(volt_params_at(ps, i)->name, cand);
        for (int k = 0; k < nc; k++)
            if (!strcmp(cand[k], fname)) return true;
    }
    return false;
}

/* Tensors of HF files that are expected and not parameters here: the MLM head of
 * DistilBertForMaskedLM, and the position_ids buffer older exports saved. */
static bool ignored(const char *fname) {
    if (has_prefix(fname, PREFIX)) fname += strlen(PREFIX);
    return has_prefix(fname, "vocab_transform.") || has_prefix(fname, "vocab_layer_norm.") ||
           has_prefix(fname, "vocab_projector.") || !strcmp(fname, "embeddings.position_ids");
}

/* The model's own parameters, in declaration order. */
static int model_params(distilbert *m, volt_tensor **out) {
    int n = 0;
    out[n++] = m->word_emb; out[n++] = m->pos_emb; out[n++] = m->emb_ln_w; out[n++] = m->emb_ln_b;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        block *bl = &m->blocks[l];
        volt_tensor *ts[16] = { bl->q_w, bl->q_b, bl->k_w, bl->k_b, bl->v_w, bl->v_b, bl->o_w, bl->o_b,
                                bl->sa_ln_w, bl->sa_ln_b, bl->lin1_w, bl->lin1_b, bl->lin2_w, bl->lin2_b,
                                bl->out_ln_w, bl->out_ln_b };
        for (int i = 0; i < 16; i++) out[n++] = ts[i];
    }
    out[n++] = m->pre_w; out[n++] = m->pre_b; out[n++] = m->cls_w; out[n++] = m->cls_b;
    return n;
}

volt_status volt_distilbert_load(void *self, volt_params *ps, const char *path) {
    distilbert *m = self;
    if (!m || !ps || !path) return VOLT_ERR_INVALID_ARG;
    if (!m->word_emb || !volt_params_finalized(ps))
        return volt_params_fail(ps, VOLT_ERR_STATE, "distilbert: load '%s' needs setup and a finalized store", path);
    char err[512];
    volt_st_file *f;
    volt_status st = volt_st_open(path, &f, err, sizeof err);
    if (st < 0) return volt_params_fail(ps, st, "distilbert: pretrained weights: %s", err);
    int np_max = 8 + 16 * m->cfg.n_layers;
    volt_tensor **params = malloc(sizeof *params * (size_t)np_max);
    if (!params) { volt_st_close(f); return VOLT_ERR_NOMEM; }
    int np = model_params(m, params);
    char fresh[512] = "";
    for (int i = 0; i < np && st >= 0; i++) {
        volt_tensor *p = params[i];
        char cand[4][NAME_MAX_], a[64], b[64];
        int nc = candidates(p->name, cand), k;
        volt_st_info info;
        for (k = 0; k < nc; k++)
            if (volt_st_find(f, cand[k], &info) == VOLT_OK) break;
        if (k == nc) {
            if (is_head(p->name)) {          /* a body-only checkpoint: the head trains from its init */
                size_t len = strlen(fresh);
                snprintf(fresh + len, sizeof fresh - len, "%s%s", len ? ", " : "", p->name);
                continue;
            }
            st = volt_params_fail(ps, VOLT_ERR_NOT_FOUND, "distilbert: '%s': tensor '%s' missing (looked for '%s'%s)",
                                  path, p->name, cand[0], nc > 1 ? " and HF variants" : "");
            break;
        }
        if (!volt_shape_eq(info.shape, p->shape)) {
            st = volt_params_fail(ps, VOLT_ERR_SHAPE, "distilbert: '%s': tensor '%s' has shape %s in the file, the model "
                                  "has %s (check the config: vocab_size, max_position, dim, hidden_dim, n_classes)",
                                  path, cand[k], volt_shape_str(info.shape, a, sizeof a),
                                  volt_shape_str(p->shape, b, sizeof b));
            break;
        }
        if ((st = volt_st_verify(f, cand[k], err, sizeof err)) < 0 ||
            (st = volt_st_read_f32(f, cand[k], volt_tensor_f32(p), volt_tensor_numel(p), err, sizeof err)) < 0)
            st = volt_params_fail(ps, st, "distilbert: %s", err);
    }
    if (st >= 0) {
        if (*fresh)
            fprintf(stderr, "distilbert: '%s': newly initialised (not in the checkpoint; train them): %s\n", path, fresh);
        int unused = 0;
        for (int i = 0; i < volt_st_count(f); i++) {
            const char *fn = volt_st_name(f, i);
            if (ignored(fn) || file_name_used(ps, fn)) continue;
            if (unused++ < 5) fprintf(stderr, "distilbert: '%s': unused tensor '%s'\n", path, fn);
        }
        if (unused > 5) fprintf(stderr, "distilbert: '%s': ... %d unused tensors in all\n", path, unused);
    }
    free(params);
    volt_st_close(f);
    return st;
}

/* HF init's last touch (the pad row zeroed), then the pretrained weights if configured. */
static volt_status distilbert_init_weights(void *self, volt_params *ps) {
    distilbert *m = self;
    int64_t pad = m->cfg.pad_token_id, D = m->cfg.dim;
    if (pad >= 0) memset(volt_tensor_f32(m->word_emb) + pad * D, 0, sizeof(float) * (size_t)D);
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
