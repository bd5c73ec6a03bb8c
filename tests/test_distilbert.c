/* DistilBERT (models/distilbert.c): config and presets; HF parameter names, units and init;
 * parity with PyTorch (tests/fixtures/distilbert_tiny.safetensors, made by
 * make_distilbert_fixture.py: logits, loss and every parameter gradient); save -> load;
 * loading HF-named checkpoints (prefix, bare names, MLM head, missing head, errors); the
 * module's steps; a short trainer run. Needs no Python. */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "volt/core.h"
#include "volt/ops.h"
#include "volt/params.h"
#include "volt/optim.h"
#include "volt/data.h"
#include "volt/trainer.h"
#include "volt/safetensors.h"
#include "volt/distilbert.h"
#include "volt/precision.h"
#include "vtest.h"
#include "core/safetensors_internal.h"   /* volt__st_read_peak, the check hook */

#ifndef VOLT_FIXTURES
#define VOLT_FIXTURES "tests/fixtures"
#endif
#define FIXTURE VOLT_FIXTURES "/distilbert_tiny.safetensors"

/* The fixture's model: the "tiny" preset, 3 classes, dropout off. */
static void tiny_config(volt_distilbert_config *c) {
    volt_distilbert_config_init(c);
    volt_distilbert_preset(c, "tiny");
    c->n_classes = 3;
    c->dropout = c->attention_dropout = c->seq_classif_dropout = 0.f;
}

typedef struct model { void *m; volt_params *ps; volt_step *s; volt_status init_st; } model;

/* create + setup + finalize + init_weights if `init` (its status in init_st) + a step. */
static bool model_build_ex(model *md, const volt_distilbert_config *c, uint64_t seed, bool init) {
    memset(md, 0, sizeof *md);
    volt_status st = volt_distilbert_create(c, &md->m);
    CHECK(st == VOLT_OK, "create: %s", volt_status_str(st));
    if (st) return false;
    volt_params_config pc;
    volt_params_config_init(&pc);
    pc.seed = seed;
    CHECK_OK(volt_params_create(&pc, &md->ps));
    st = volt_distilbert_ops.setup(md->m, md->ps);
    CHECK(st == VOLT_OK, "setup: %s (%s)", volt_status_str(st), volt_params_errmsg(md->ps));
    CHECK_OK(volt_params_finalize(md->ps));
    if (init) md->init_st = volt_distilbert_ops.init_weights(md->m, md->ps);
    volt_step_config sc;
    volt_step_config_init(&sc);
    sc.params = md->ps;
    sc.seed = 5;
    CHECK_OK(volt_step_create(&sc, &md->s));
    return st == VOLT_OK && md->s;
}

static bool model_build(model *md, const volt_distilbert_config *c, uint64_t seed) {
    return model_build_ex(md, c, seed, true);
}

static void model_free(model *md) {
    volt_step_destroy(md->s);
    volt_params_destroy(md->ps);
    volt_distilbert_destroy(md->m);
}

/* Host copies of device tensors for the checks: values and parameters live on the step's
 * device (cpu-strict in the _strict variant), so the test reads them through copies, in a
 * ring of reused buffers (each copy stays valid for the next 7 calls). */
static float *g_ring[8];
static size_t g_ring_cap[8];
static int g_ring_i;
static const float *H(const volt_tensor *t) {
    int i = g_ring_i++ & 7;
    size_t n = volt_tensor_bytes(t);
    if (n > g_ring_cap[i]) {
        free(g_ring[i]);
        g_ring[i] = malloc(n);
        g_ring_cap[i] = g_ring[i] ? n : 0;
    }
    if (!g_ring[i]) return NULL;
    volt_tensor_to_host(t, g_ring[i]);
    return g_ring[i];
}
/* A parameter's gradient, copied to the host. */
static const float *HG(const volt_tensor *p) {
    volt_tensor g = *p;
    g.dtype = VOLT_F32;
    g.data = p->grad;
    return p->grad ? H(&g) : NULL;
}
static void ring_free(void) {
    for (int i = 0; i < 8; i++) free(g_ring[i]);
}

/* A tensor of the step holding a copy of fixture tensor `name`. */
static volt_tensor *fx_tensor(volt_step *s, volt_st_file *f, const char *name) {
    volt_st_info info;
    if (volt_st_find(f, name, &info) != VOLT_OK) { CHECK(0, "fixture has no '%s'", name); return NULL; }
    return volt_tensor_from_host(s, info.dtype, info.shape, info.data);
}

static bool load_fixture_params(volt_params *ps, volt_st_file *f) {
    char err[256];
    for (int i = 0; i < volt_params_count(ps); i++) {
        volt_tensor *p = volt_params_at(ps, i);
        float *h = malloc(volt_tensor_bytes(p));
        volt_status st = h ? volt_st_read_f32(f, p->name, h, volt_tensor_numel(p), err, sizeof err) : VOLT_ERR_NOMEM;
        if (st == VOLT_OK) volt_tensor_copy_from_host(p, h);   /* parameters are device memory */
        free(h);
        CHECK(st == VOLT_OK, "fixture weight %s: %s", p->name, err);
        if (st) return false;
    }
    return true;
}

static float max_abs(const float *a, int64_t n) {
    float m = 0.f;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(a[i]));
    return m;
}

static float max_diff(const float *a, const float *b, int64_t n) {
    float m = 0.f;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(a[i] - b[i]));
    return m;
}

/* ---- config ------------------------------------------------------------------------------ */
static void test_config(void) {
    volt_distilbert_config c;
    volt_distilbert_config_init(&c);
    CHECK(c.vocab_size == 30522 && c.max_position == 512 && c.dim == 768 && c.n_layers == 6 && c.n_heads == 12 &&
          c.hidden_dim == 3072, "defaults are distilbert-base");
    CHECK(c.dropout == 0.1f && c.attention_dropout == 0.1f && c.seq_classif_dropout == 0.2f && c.n_classes == 2 &&
          c.pad_token_id == 0 && c.initializer_range == 0.02f, "HF DistilBertConfig defaults");
    CHECK(c.optimizer == VOLT_OPTIM_ADAM && c.lr == 5e-5f && !c.warmup_steps && !c.total_steps && !c.pretrained_dir,
          "optimisation defaults");
    CHECK_OK(volt_distilbert_preset(&c, "small"));
    CHECK(c.dim == 128 && c.n_layers == 2 && c.n_heads == 2 && c.hidden_dim == 512 && c.vocab_size == 30522, "small");
    CHECK_OK(volt_distilbert_preset(&c, "tiny"));
    CHECK(c.dim == 32 && c.vocab_size == 97 && c.max_position == 16 && c.n_heads == 4 && c.hidden_dim == 64, "tiny");
    CHECK(volt_distilbert_preset(&c, "huge") == VOLT_ERR_NOT_FOUND, "unknown preset");

    void *m = NULL;
    static const char *bad[] = { "dim % heads", "dropout 1", "total <= warmup", "pad >= vocab",
                                 "empty pretrained_dir", "plateau with warmup", "plateau factor 1", "negative lr" };
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        tiny_config(&c);
        switch (i) {
        case 0: c.n_heads = 5; break;
        case 1: c.dropout = 1.f; break;
        case 2: c.warmup_steps = 10; c.total_steps = 10; break;
        case 3: c.pad_token_id = 97; break;
        case 4: c.pretrained_dir = ""; break;
        case 5: c.plateau = true; c.warmup_steps = 2; break;
        case 6: c.plateau = true; c.plateau_factor = 1.0; break;
        default: c.lr = -1.f; break;
        }
        volt_status st = volt_distilbert_create(&c, &m);
        CHECK(st == VOLT_ERR_INVALID_ARG && !m, "%s: %s", bad[i], volt_status_str(st));
    }
    tiny_config(&c);
    c.version = 99;
    CHECK(volt_distilbert_create(&c, &m) == VOLT_ERR_VERSION, "version");
    volt_distilbert_destroy(NULL);

    /* configure_optimizers: Adam by default; AdamW + HF linear schedule when asked */
    tiny_config(&c);
    CHECK_OK(volt_distilbert_create(&c, &m));
    volt_optim_setup os;
    memset(&os, 0, sizeof os);
    volt_optimizer_config_init(&os.optimizer);
    volt_scheduler_config_init(&os.scheduler);
    CHECK_OK(volt_distilbert_ops.configure_optimizers(m, &os));
    CHECK(os.optimizer.kind == VOLT_OPTIM_ADAM && os.optimizer.lr == 5e-5f && !os.use_scheduler, "Adam 5e-5");
    volt_distilbert_destroy(m);
    c.optimizer = VOLT_OPTIM_ADAMW;
    c.weight_decay = 0.01f;
    c.warmup_steps = 10;
    c.total_steps = 100;
    CHECK_OK(volt_distilbert_create(&c, &m));
    CHECK_OK(volt_distilbert_ops.configure_optimizers(m, &os));
    CHECK(os.optimizer.kind == VOLT_OPTIM_ADAMW && os.optimizer.weight_decay == 0.01f && os.use_scheduler &&
          os.scheduler.kind == VOLT_SCHED_LINEAR && os.scheduler.warmup_steps == 10 && os.scheduler.total_steps == 100,
          "AdamW + linear warmup/decay");
    CHECK_OK(volt_scheduler_config_validate(&os.scheduler));
    volt_distilbert_destroy(m);
    /* version 4: ReduceLROnPlateau on val_loss in place of the schedule */
    tiny_config(&c);
    CHECK(c.version == 4 && !c.plateau && c.plateau_patience == 10 && c.plateau_factor == 0.1, "plateau defaults (torch's)");
    c.plateau = true;
    c.plateau_patience = 2;
    c.plateau_factor = 0.5;
    CHECK_OK(volt_distilbert_create(&c, &m));
    volt_scheduler_config_init(&os.scheduler);
    os.use_scheduler = false;
    CHECK_OK(volt_distilbert_ops.configure_optimizers(m, &os));
    CHECK(os.use_scheduler && os.scheduler.kind == VOLT_SCHED_PLATEAU && os.scheduler.monitor &&
          !strcmp(os.scheduler.monitor, "val_loss") && os.scheduler.patience == 2 && os.scheduler.factor == 0.5 &&
          os.scheduler.interval == VOLT_SCHED_EVERY_EPOCH, "plateau on val_loss");
    CHECK_OK(volt_scheduler_config_validate(&os.scheduler));
    volt_distilbert_destroy(m);
}

/* ---- names, units, init ----------------------------------------------------------------------- */
static void test_layout(void) {
    /* distilbert-base with 2 labels: HF's DistilBertForSequenceClassification has 66,955,010 */
    volt_distilbert_config c;
    volt_distilbert_config_init(&c);
    void *m;
    CHECK_OK(volt_distilbert_create(&c, &m));
    volt_params_config pc;
    volt_params_config_init(&pc);
    volt_params *ps;
    CHECK_OK(volt_params_create(&pc, &ps));
    CHECK_OK(volt_distilbert_ops.setup(m, ps));
    CHECK(volt_params_numel(ps) == 66955010, "distilbert-base: %lld parameters", (long long)volt_params_numel(ps));
    CHECK(volt_params_count(ps) == 4 + 6 * 16 + 4, "%d tensors", volt_params_count(ps));
    CHECK(volt_params_unit_count(ps) == 8, "%d units", volt_params_unit_count(ps));
    volt_params_destroy(ps);
    volt_distilbert_destroy(m);

    tiny_config(&c);
    model md;
    if (model_build(&md, &c, 11)) {
        CHECK_OK(md.init_st);
        static const char *units[] = { "distilbert.embeddings", "distilbert.transformer.layer.0",
                                       "distilbert.transformer.layer.1", "head" };
        CHECK(volt_params_unit_count(md.ps) == 4, "units");
        for (int u = 0; u < 4; u++)
            CHECK(!strcmp(volt_unit_name(volt_params_unit_at(md.ps, u)), units[u]), "unit %d: %s", u,
                  volt_unit_name(volt_params_unit_at(md.ps, u)));
        /* every name the PyTorch fixture has (and nothing else), in the tiny model */
        volt_st_file *f = NULL;
        char err[256];
        if (volt_st_open(FIXTURE, &f, err, sizeof err) == VOLT_OK) {
            int n_weights = 0;
            for (int i = 0; i < volt_st_count(f); i++) {
                const char *nm = volt_st_name(f, i);
                if (!strncmp(nm, "distilbert.", 11) || !strncmp(nm, "pre_classifier.", 15) ||
                    !strncmp(nm, "classifier.", 11)) {
                    n_weights++;
                    volt_tensor *p = volt_params_find(md.ps, nm);
                    volt_st_info info;
                    volt_st_find(f, nm, &info);
                    CHECK(p && volt_shape_eq(p->shape, info.shape), "fixture tensor %s missing or misshapen", nm);
                }
            }
            CHECK(n_weights == volt_params_count(md.ps), "fixture %d weights, model %d", n_weights,
                  volt_params_count(md.ps));
            volt_st_close(f);
        } else {
            CHECK(0, "fixture: %s", err);
        }
        /* HF _init_weights: N(0, 0.02) weights and embeddings, zero bias, LN 1/0, pad row 0 */
        volt_tensor *we = volt_params_find(md.ps, "distilbert.embeddings.word_embeddings.weight");
        volt_tensor *w1 = volt_params_find(md.ps, "distilbert.transformer.layer.0.ffn.lin1.weight");
        volt_tensor *b1 = volt_params_find(md.ps, "distilbert.transformer.layer.0.ffn.lin1.bias");
        volt_tensor *ln = volt_params_find(md.ps, "distilbert.transformer.layer.1.sa_layer_norm.weight");
        volt_tensor *lb = volt_params_find(md.ps, "distilbert.transformer.layer.1.sa_layer_norm.bias");
        CHECK(we && w1 && b1 && ln && lb, "params by HF name");
        if (we && w1 && b1 && ln && lb) {
            CHECK(max_abs(H(we), 32) == 0.f, "pad row zeroed");
            CHECK(max_abs(H(we) + 32, 32) > 0.f, "row 1 not zero");
            double sq = 0;
            const float *d = H(w1);
            for (int64_t i = 0; i < volt_tensor_numel(w1); i++) sq += (double)d[i] * d[i];
            double sd = sqrt(sq / (double)volt_tensor_numel(w1));
            CHECK(sd > 0.018 && sd < 0.022, "lin1 weight std %.4f, want 0.02", sd);
            CHECK(max_abs(H(b1), 64) == 0.f && max_abs(H(lb), 32) == 0.f, "zero biases");
            bool ones = true;
            for (int i = 0; i < 32; i++) ones &= H(ln)[i] == 1.f;
            CHECK(ones, "LayerNorm weight 1");
        }
    }
    model_free(&md);
}

/* ---- PyTorch parity ----------------------------------------------------------------------------
 * attention_dropout 0 runs the fused kernel; 1e-7 runs the unfused path with a dropout that,
 * for this seed, drops nothing (and rescales by 1 + 1e-7), so both paths meet the fixture. */
static void check_parity(float attention_dropout, bool training) {
    volt_st_file *f = NULL;
    char err[256];
    volt_status st = volt_st_open(FIXTURE, &f, err, sizeof err);
    CHECK(st == VOLT_OK, "fixture: %s", err);
    if (st) return;
    volt_distilbert_config c;
    tiny_config(&c);
    c.attention_dropout = attention_dropout;
    model md;
    if (model_build(&md, &c, 1) && load_fixture_params(md.ps, f)) {
        volt_step *s = md.s;
        volt_params_zero_grad(md.ps);
        volt_step_begin(s, training, 0);
        volt_tensor *ids = fx_tensor(s, f, "input_ids"), *mask = fx_tensor(s, f, "attention_mask");
        volt_tensor *labels = fx_tensor(s, f, "labels"), *ref_logits = fx_tensor(s, f, "logits");
        volt_tensor *ref_loss = fx_tensor(s, f, "loss");
        volt_tensor *logits = volt_distilbert_forward(md.m, s, ids, mask);
        volt_tensor *loss = volt_cross_entropy(s, logits, labels);
        CHECK(loss, "forward: %s", volt_step_errmsg(s));
        if (loss && ref_logits && ref_loss) {
            float scale = max_abs(H(ref_logits), 9);
            float e = max_diff(H(logits), H(ref_logits), 9) / scale;
            double lv = volt_tensor_item(loss), lr = volt_tensor_item(ref_loss);
            CHECK(e <= 1e-5f, "logits rel err %.3g (attention_dropout %g, training %d)", e, attention_dropout, training);
            CHECK(fabs(lv - lr) <= 1e-5 * fabs(lr), "loss %.9g vs torch %.9g", lv, lr);
            printf("parity (attention_dropout %g, training %d): logits rel err %.2e, loss %.7f vs %.7f\n",
                   attention_dropout, training, e, lv, lr);
        }
        if (loss && training) {
            st = volt_step_backward(s, loss);
            CHECK(st == VOLT_OK, "backward: %s", volt_step_errmsg(s));
            float worst = 0.f;
            const char *worst_name = "";
            for (int i = 0; i < volt_params_count(md.ps) && st == VOLT_OK; i++) {
                volt_tensor *p = volt_params_at(md.ps, i);
                int64_t n = volt_tensor_numel(p);
                char gname[160];
                snprintf(gname, sizeof gname, "grad.%s", p->name);
                float *ref = malloc(sizeof(float) * (size_t)n);   /* host memory: the reader writes it */
                if (!ref || volt_st_read_f32(f, gname, ref, n, err, sizeof err) != VOLT_OK) {
                    CHECK(0, "fixture %s: %s", gname, err);
                    free(ref);
                    continue;
                }
                /* relative to the tensor's largest grad; atol 1e-7 for the k_lin biases, whose
                 * exact gradient is 0 (softmax ignores a per-row constant; torch has ~1e-17) */
                float sc = max_abs(ref, n), d = max_diff(HG(p), ref, n);
                CHECK(d <= 1e-4f * sc + 1e-7f, "grad %s: max err %.3g, max |grad| %.3g", p->name, d, sc);
                float rel = sc > 1e-6f ? d / sc : 0.f;
                if (rel > worst) { worst = rel; worst_name = p->name; }
                free(ref);
            }
            /* nn.Embedding(padding_idx=0): no gradient into the pad row, though rows 1, 2 pad */
            volt_tensor *we = volt_params_find(md.ps, "distilbert.embeddings.word_embeddings.weight");
            CHECK(we && max_abs(HG(we), 32) == 0.f, "pad row grad %g", we ? max_abs(HG(we), 32) : -1.f);
            printf("parity grads: worst rel err %.2e (%s)\n", worst, worst_name);
        }
        volt_step_end(s);
    }
    model_free(&md);
    volt_st_close(f);
}


/* bf16-mixed: GEMM inputs rounded to bf16 (8 significant bits), f32 accumulation. The
 * logits must agree with PyTorch's f32 ones to what bf16 implies (rel. err <= 1e-2), and
 * must actually differ from the f32 path (the flag does something). */
static void test_bf16_mixed_logits(void) {
    volt_st_file *f = NULL;
    char err[256];
    if (volt_st_open(FIXTURE, &f, err, sizeof err) != VOLT_OK) { CHECK(0, "fixture: %s", err); return; }
    volt_distilbert_config c;
    tiny_config(&c);
    model md;
    if (model_build(&md, &c, 1) && load_fixture_params(md.ps, f)) {
        float lg[2][9];
        for (int mode = 0; mode < 2; mode++) {
            volt_step_begin(md.s, false, 0);
            CHECK_OK(volt_step_set_compute_dtype(md.s, mode ? VOLT_BF16 : VOLT_F32));
            volt_tensor *l = volt_distilbert_forward(md.m, md.s, fx_tensor(md.s, f, "input_ids"), fx_tensor(md.s, f, "attention_mask"));
            CHECK(l, "forward: %s", volt_step_errmsg(md.s));
            if (l) volt_tensor_to_host(l, lg[mode]);
            volt_step_end(md.s);
        }
        volt_step_begin(md.s, false, 0);
        volt_tensor *ref = fx_tensor(md.s, f, "logits");
        float scale = max_abs(H(ref), 9);
        float e = max_diff(lg[1], H(ref), 9) / scale, e32 = max_diff(lg[0], H(ref), 9) / scale;
        CHECK(e <= 1e-2f, "bf16-mixed logits rel err %.3g", e);
        CHECK(e > e32, "bf16 compute changed nothing (err %.3g vs f32 %.3g)", e, e32);
        printf("bf16-mixed logits: rel err %.2e vs torch f32 (f32 path %.2e)\n", e, e32);
        volt_step_end(md.s);
        volt_step_set_compute_dtype(md.s, VOLT_F32);
    }
    model_free(&md);
    volt_st_close(f);
}

static void test_parity(void) {
    check_parity(0.f, true);
    check_parity(1e-7f, true);
    check_parity(0.1f, false);     /* evaluation: no dropout, fused, whatever the config says */
}

/* ---- the vtable's steps on a hand-made batch ---------------------------------------------- */
static void test_steps(void) {
    volt_st_file *f = NULL;
    char err[256];
    if (volt_st_open(FIXTURE, &f, err, sizeof err) != VOLT_OK) { CHECK(0, "fixture: %s", err); return; }
    volt_distilbert_config c;
    tiny_config(&c);
    c.dropout = 0.1f; c.attention_dropout = 0.1f; c.seq_classif_dropout = 0.2f;
    model md;
    if (model_build(&md, &c, 2)) {
        volt_st_info ids, mask, y;
        volt_st_find(f, "input_ids", &ids);
        volt_st_find(f, "attention_mask", &mask);
        volt_st_find(f, "labels", &y);
        volt_batch b;
        memset(&b, 0, sizeof b);
        b.size = 3;
        b.n_fields = 3;
        b.names[0] = "input_ids"; b.names[1] = "attention_mask"; b.names[2] = "y";
        b.fields[0] = (volt_tensor){ .dtype = ids.dtype, .shape = ids.shape, .node = -1, .data = (void *)ids.data };
        b.fields[1] = (volt_tensor){ .dtype = mask.dtype, .shape = mask.shape, .node = -1, .data = (void *)mask.data };
        b.fields[2] = (volt_tensor){ .dtype = y.dtype, .shape = y.shape, .node = -1, .data = (void *)y.data };
        volt_step *s = md.s;
        volt_step_begin(s, true, 1);
        volt_status st = volt_distilbert_ops.training_step(md.m, s, &b, 0);
        CHECK(st == VOLT_OK, "training_step: %s %s", volt_status_str(st), volt_step_errmsg(s));
        volt_step_end(s);
        volt_step_begin(s, false, 0);
        st = volt_distilbert_ops.validation_step(md.m, s, &b, 0);
        CHECK(st == VOLT_OK, "validation_step: %s %s", volt_status_str(st), volt_step_errmsg(s));
        volt_step_end(s);
        volt_step_begin(s, false, 0);
        st = volt_distilbert_ops.test_step(md.m, s, &b, 0);
        CHECK(st == VOLT_OK, "test_step: %s %s", volt_status_str(st), volt_step_errmsg(s));
        volt_step_end(s);
        volt_step_begin(s, false, 0);
        volt_tensor *pred = NULL;
        st = volt_distilbert_ops.predict_step(md.m, s, &b, 0, &pred);
        CHECK(st == VOLT_OK && pred && volt_shape_eq(pred->shape, VOLT_SHAPE(3, 3)), "predict_step: %s %s",
              volt_status_str(st), volt_step_errmsg(s));
        volt_step_end(s);
        /* without a mask every token is attended: different logits from the masked run */
        b.n_fields = 1;
        volt_step_begin(s, false, 0);
        st = volt_distilbert_ops.predict_step(md.m, s, &b, 0, &pred);
        CHECK(st == VOLT_OK && pred, "predict_step without a mask: %s", volt_step_errmsg(s));
        volt_step_end(s);
        volt_step_begin(s, false, 0);
        st = volt_distilbert_ops.validation_step(md.m, s, &b, 0);
        CHECK(st == VOLT_ERR_NOT_FOUND && strstr(volt_step_errmsg(s), "'y'"), "missing y: %s", volt_step_errmsg(s));
        volt_step_end(s);
        /* too long, wrong dtype */
        volt_step_begin(s, false, 0);
        volt_tensor *long_ids = volt_tensor_new(s, VOLT_I32, VOLT_SHAPE(1, 17));
        CHECK(!volt_distilbert_forward(md.m, s, long_ids, NULL) && volt_step_status(s) == VOLT_ERR_SHAPE &&
              strstr(volt_step_errmsg(s), "max_position"), "17 tokens: %s", volt_step_errmsg(s));
        volt_step_end(s);
        volt_step_begin(s, false, 0);
        volt_tensor *fids = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(1, 4));
        CHECK(!volt_distilbert_forward(md.m, s, fids, NULL) && volt_step_status(s) == VOLT_ERR_SHAPE, "f32 ids: %s",
              volt_step_errmsg(s));
        volt_step_end(s);
        /* training steps are deterministic: same seed/offset, same loss (dropout masks included) */
        double l1 = 0, l2 = 0;
        b.n_fields = 3;
        for (int r = 0; r < 2; r++) {
            volt_step_begin(s, true, 7);
            volt_tensor *lg = volt_distilbert_forward(md.m, s, &b.fields[0], &b.fields[1]);
            volt_tensor *ls = volt_cross_entropy(s, lg, &b.fields[2]);
            *(r ? &l2 : &l1) = ls ? volt_tensor_item(ls) : NAN;
            volt_step_end(s);
        }
        CHECK(l1 == l2 && isfinite(l1), "training loss %.9g vs %.9g", l1, l2);
    }
    model_free(&md);
    volt_st_close(f);
}

/* ---- checkpoints --------------------------------------------------------------------------------- */
/* Run `fn` with stderr captured into buf. */
static void capture_stderr(char *buf, size_t n, volt_status (*fn)(model *), model *md, volt_status *st) {
    char path[512];
    snprintf(path, sizeof path, "%s/stderr.txt", vtest_tmpdir());
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (saved >= 0 && fd >= 0) dup2(fd, 2);
    *st = fn(md);
    fflush(stderr);
    if (saved >= 0) { dup2(saved, 2); close(saved); }
    if (fd >= 0) close(fd);
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (f) { size_t k = fread(buf, 1, n - 1, f); buf[k] = 0; fclose(f); }
}

static volt_status run_init_weights(model *md) { return volt_distilbert_ops.init_weights(md->m, md->ps); }

/* Eval logits (3, 3) of the fixture batch into out. */
static bool eval_logits(model *md, volt_st_file *f, float out[9]) {
    volt_step_begin(md->s, false, 0);
    volt_tensor *lg = volt_distilbert_forward(md->m, md->s, fx_tensor(md->s, f, "input_ids"),
                                              fx_tensor(md->s, f, "attention_mask"));
    if (lg) volt_tensor_to_host(lg, out);
    else CHECK(0, "forward: %s", volt_step_errmsg(md->s));
    volt_step_end(md->s);
    return lg != NULL;
}

enum { KEEP_PREFIX = 1, STRIP_PREFIX = 2, NO_HEAD = 4, MLM_HEAD = 8, BAD_SHAPE = 16, DROP_ONE = 32,
       BF16_EMB = 64, GAMMA_BETA = 128, EXTRA = 256, DUP = 512 };

/* Write <dir>/model.safetensors from the fixture's weights, HF style, per flags. */
static bool write_checkpoint(volt_st_file *f, const char *dir, unsigned flags) {
    mkdir(dir, 0755);
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    volt_st_writer *w;
    if (volt_st_writer_create(&w) != VOLT_OK) return false;
    static float zeros[97 * 32];
    static uint16_t bf16[97 * 32];
    for (int i = 0; i < volt_st_count(f); i++) {
        const char *nm = volt_st_name(f, i);
        bool body = !strncmp(nm, "distilbert.", 11);
        bool head = !strncmp(nm, "pre_classifier.", 15) || !strncmp(nm, "classifier.", 11);
        if ((!body && !head) || (head && (flags & NO_HEAD))) continue;
        if ((flags & DROP_ONE) && !strcmp(nm, "distilbert.transformer.layer.1.ffn.lin2.bias")) continue;
        volt_st_info info;
        volt_st_find(f, nm, &info);
        char out[160];
        snprintf(out, sizeof out, "%s", body && (flags & STRIP_PREFIX) ? nm + 11 : nm);
        if ((flags & GAMMA_BETA) && strstr(out, "LayerNorm.weight")) strcpy(strstr(out, "weight"), "gamma");
        if ((flags & GAMMA_BETA) && strstr(out, "LayerNorm.bias")) strcpy(strstr(out, "bias"), "beta");
        bool emb = strstr(nm, "word_embeddings") != NULL;
        if (emb && (flags & BAD_SHAPE)) {
            volt_st_writer_add_copy(w, out, VOLT_F32, VOLT_SHAPE(96, 32), info.data);
        } else if (emb && (flags & BF16_EMB)) {
            const float *x = info.data;      /* truncate to bf16 (the reader widens it back exactly) */
            for (int k = 0; k < 97 * 32; k++) { uint32_t u; memcpy(&u, &x[k], 4); bf16[k] = (uint16_t)(u >> 16); }
            volt_st_writer_add_copy(w, out, VOLT_BF16, info.shape, bf16);
        } else {
            volt_st_writer_add_copy(w, out, info.dtype, info.shape, info.data);
        }
    }
    if (flags & EXTRA) volt_st_writer_add_copy(w, "extra.weight", VOLT_F32, VOLT_SHAPE(4), zeros);
    if (flags & DUP) {   /* a second name of one parameter (the bare DistilBertModel one), other values */
        static float ones[32];
        for (int k = 0; k < 32; k++) ones[k] = 1.f + (float)k;
        volt_st_writer_add_copy(w, "embeddings.LayerNorm.weight", VOLT_F32, VOLT_SHAPE(32), ones);
    }
    if (flags & MLM_HEAD) {                   /* DistilBertForMaskedLM's extra tensors, an old position_ids buffer */
        volt_st_writer_add_copy(w, "vocab_transform.weight", VOLT_F32, VOLT_SHAPE(32, 32), zeros);
        volt_st_writer_add_copy(w, "vocab_transform.bias", VOLT_F32, VOLT_SHAPE(32), zeros);
        volt_st_writer_add_copy(w, "vocab_layer_norm.weight", VOLT_F32, VOLT_SHAPE(32), zeros);
        volt_st_writer_add_copy(w, "vocab_layer_norm.bias", VOLT_F32, VOLT_SHAPE(32), zeros);
        volt_st_writer_add_copy(w, "vocab_projector.bias", VOLT_F32, VOLT_SHAPE(97), zeros);
        static const int64_t pos_ids[16] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };
        volt_st_writer_add_copy(w, "distilbert.embeddings.position_ids", VOLT_I64, VOLT_SHAPE(1, 16), pos_ids);
    }
    char err[256];
    volt_status st = volt_st_writer_write(w, path, err, sizeof err);
    CHECK(st == VOLT_OK, "write %s: %s", path, err);
    volt_st_writer_destroy(w);
    return st == VOLT_OK;
}

static void test_load_streamed(model *a, volt_st_file *fx);

static void test_save_load(void) {
    volt_st_file *f = NULL;
    char err[256], dir[512], out[4096];
    if (volt_st_open(FIXTURE, &f, err, sizeof err) != VOLT_OK) { CHECK(0, "fixture: %s", err); return; }
    volt_distilbert_config c;
    tiny_config(&c);
    float ref[9], got[9];
    model a;
    bool ok = model_build(&a, &c, 1) && load_fixture_params(a.ps, f) && eval_logits(&a, f, ref);

    /* save the store with volt's writer -> a fresh model (other seed) loads it -> same logits */
    snprintf(dir, sizeof dir, "%s/roundtrip", vtest_tmpdir());
    mkdir(dir, 0755);
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    volt_st_writer *w = NULL;
    CHECK_OK(volt_st_writer_create(&w));
    for (int i = 0; ok && i < volt_params_count(a.ps); i++) {
        volt_tensor *p = volt_params_at(a.ps, i);
        CHECK_OK(volt_st_writer_add_copy(w, p->name, VOLT_F32, p->shape, H(p)));
    }
    CHECK_OK(volt_st_writer_write(w, path, err, sizeof err));
    volt_st_writer_destroy(w);
    c.pretrained_dir = dir;
    model b;
    memset(&b, 0, sizeof b);
    if (ok && model_build(&b, &c, 99)) {
        CHECK(b.init_st == VOLT_OK, "round-trip load: %s", volt_params_errmsg(b.ps));
        CHECK(eval_logits(&b, f, got) && !memcmp(ref, got, sizeof ref), "round trip: logits differ");
    }
    model_free(&b);

    /* HF names: "distilbert." prefix, MLM head present, no classification head */
    model fresh;                               /* the head's init with seed 99, to compare */
    c.pretrained_dir = NULL;
    model_build(&fresh, &c, 99);
    const char *head_names[] = { "pre_classifier.weight", "pre_classifier.bias", "classifier.weight", "classifier.bias" };
    static const unsigned variants[] = { KEEP_PREFIX | NO_HEAD | MLM_HEAD, STRIP_PREFIX | NO_HEAD | GAMMA_BETA | EXTRA,
                                         KEEP_PREFIX | BF16_EMB, KEEP_PREFIX | DUP };
    for (int v = 0; v < 4; v++) {
        snprintf(dir, sizeof dir, "%s/hf%d", vtest_tmpdir(), v);
        if (!write_checkpoint(f, dir, variants[v])) continue;
        c.pretrained_dir = dir;
        volt_status st;
        if (!model_build_ex(&b, &c, 99, false)) { model_free(&b); continue; }
        capture_stderr(out, sizeof out, run_init_weights, &b, &st);
        CHECK(st == VOLT_OK, "HF variant %d: %s", v, volt_params_errmsg(b.ps));
        bool no_head = variants[v] & NO_HEAD;
        CHECK(no_head == (strstr(out, "newly initialised") != NULL && strstr(out, "pre_classifier.weight") &&
                          strstr(out, "classifier.bias")), "variant %d stderr: '%s'", v, out);
        bool extra = variants[v] & EXTRA;     /* unknown tensors are listed; the MLM head is not */
        bool dup = variants[v] & DUP;         /* the name not taken (HF's preferred one is) is listed too */
        CHECK(extra ? strstr(out, "unused tensor 'extra.weight'") && !strstr(out, "vocab")
              : dup ? strstr(out, "unused tensor 'embeddings.LayerNorm.weight'") && !strstr(out, "'distilbert.embeddings")
                    : !strstr(out, "unused"),
              "variant %d stderr: '%s'", v, out);
        for (int i = 0; i < volt_params_count(b.ps); i++) {
            volt_tensor *p = volt_params_at(b.ps, i);
            int64_t n = volt_tensor_numel(p);
            bool head = false;
            for (int k = 0; k < 4; k++) head |= !strcmp(p->name, head_names[k]);
            const float *want = H(volt_params_find(a.ps, p->name));
            if (head && no_head) want = H(volt_params_find(fresh.ps, p->name));
            float d = max_diff(H(p), want, n);
            bool bf = (variants[v] & BF16_EMB) && strstr(p->name, "word_embeddings");
            CHECK(bf ? d <= max_abs(want, n) * (1.f / 128) : d == 0.f, "variant %d: %s differs by %g", v, p->name, d);
        }
        model_free(&b);
    }
    model_free(&fresh);

    /* errors: shape mismatch (both shapes named), a missing body tensor, a missing file */
    struct { unsigned flags; volt_status want; const char *needles[3]; } errs[] = {
        { KEEP_PREFIX | BAD_SHAPE, VOLT_ERR_SHAPE, { "word_embeddings.weight", "(96, 32)", "(97, 32)" } },
        { KEEP_PREFIX | DROP_ONE, VOLT_ERR_NOT_FOUND, { "distilbert.transformer.layer.1.ffn.lin2.bias", "missing", "" } },
    };
    for (int e = 0; e < 2; e++) {
        snprintf(dir, sizeof dir, "%s/bad%d", vtest_tmpdir(), e);
        if (!write_checkpoint(f, dir, errs[e].flags)) continue;
        c.pretrained_dir = dir;
        if (model_build(&b, &c, 3)) {
            const char *msg = volt_params_errmsg(b.ps);
            bool all = true;
            for (int k = 0; k < 3; k++) all &= strstr(msg, errs[e].needles[k]) != NULL;
            CHECK(b.init_st == errs[e].want && all, "error case %d: %s '%s'", e, volt_status_str(b.init_st), msg);
        }
        model_free(&b);
    }
    /* n_classes 2 against a 3-class head is a shape error too */
    snprintf(dir, sizeof dir, "%s/hf2", vtest_tmpdir());
    c.pretrained_dir = dir;
    c.n_classes = 2;
    if (model_build(&b, &c, 3))
        CHECK(b.init_st == VOLT_ERR_SHAPE && strstr(volt_params_errmsg(b.ps), "classifier.weight"), "head shape: %s",
              volt_params_errmsg(b.ps));
    model_free(&b);
    c.n_classes = 3;
    snprintf(dir, sizeof dir, "%s/no_such_dir", vtest_tmpdir());
    c.pretrained_dir = dir;
    if (model_build(&b, &c, 3))
        CHECK(b.init_st == VOLT_ERR_IO && strstr(volt_params_errmsg(b.ps), "no_such_dir"), "missing file: %s '%s'",
              volt_status_str(b.init_st), volt_params_errmsg(b.ps));
    model_free(&b);
    test_load_streamed(&a, f);
    model_free(&a);
    volt_st_close(f);
}

/* ---- the import holds one tensor of the file at a time, checks all before it applies any ---- */
/* A Hugging Face-style file of the fixture's model tensors: no metadata, so no crcs (the
 * writer always adds them), f32, laid out in the fixture's order. */
static bool write_plain(volt_st_file *f, const char *path, size_t *largest) {
    char *hdr = malloc(1 << 16);
    size_t hl = 0, off = 0;
    *largest = 0;
    hl += (size_t)snprintf(hdr + hl, (1 << 16) - hl, "{");
    for (int i = 0; i < volt_st_count(f); i++) {
        const char *nm = volt_st_name(f, i);
        volt_st_info info;
        volt_st_find(f, nm, &info);
        if (strncmp(nm, "distilbert.", 11) && strncmp(nm, "pre_classifier.", 15) && strncmp(nm, "classifier.", 11)) continue;
        hl += (size_t)snprintf(hdr + hl, (1 << 16) - hl, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[", off ? "," : "", nm);
        for (int d = 0; d < info.shape.ndim; d++)
            hl += (size_t)snprintf(hdr + hl, (1 << 16) - hl, "%s%lld", d ? "," : "", (long long)info.shape.d[d]);
        hl += (size_t)snprintf(hdr + hl, (1 << 16) - hl, "],\"data_offsets\":[%zu,%zu]}", off, off + info.nbytes);
        off += info.nbytes;
        if (info.nbytes > *largest) *largest = info.nbytes;
    }
    hl += (size_t)snprintf(hdr + hl, (1 << 16) - hl, "}");
    while (hl % 8) hdr[hl++] = ' ';
    FILE *o = fopen(path, "wb");
    bool ok = o != NULL;
    unsigned char l8[8];
    for (int i = 0; i < 8; i++) l8[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    ok = ok && fwrite(l8, 1, 8, o) == 8 && fwrite(hdr, 1, hl, o) == hl;
    for (int i = 0; ok && i < volt_st_count(f); i++) {
        const char *nm = volt_st_name(f, i);
        volt_st_info info;
        volt_st_find(f, nm, &info);
        if (strncmp(nm, "distilbert.", 11) && strncmp(nm, "pre_classifier.", 15) && strncmp(nm, "classifier.", 11)) continue;
        ok = fwrite(info.data, 1, info.nbytes, o) == info.nbytes;
    }
    if (o) ok &= fclose(o) == 0;
    free(hdr);
    CHECK(ok, "write %s", path);
    return ok;
}

/* Every parameter's values, one after another (host copy). */
static float *snapshot_params(volt_params *ps, int64_t *n) {
    int64_t total = 0;
    for (int i = 0; i < volt_params_count(ps); i++) total += volt_tensor_numel(volt_params_at(ps, i));
    float *out = malloc(sizeof(float) * (size_t)total);
    for (int i = 0, at = 0; out && i < volt_params_count(ps); i++) {
        volt_tensor *p = volt_params_at(ps, i);
        memcpy(out + at, H(p), volt_tensor_bytes(p));
        at += (int)volt_tensor_numel(p);
    }
    *n = total;
    return out;
}

/* The hook between the check and the reads: a byte in the middle of the file's data changes. */
static char g_change_path[600];
static long g_change_at;
static int g_changes;
static void change_file(const char *path, void *ctx) {
    (void)ctx;
    if (strcmp(path, g_change_path)) return;
    FILE *fp = fopen(path, "r+b");
    unsigned char c = 0;
    if (fp && fseek(fp, g_change_at, SEEK_SET) == 0 && fread(&c, 1, 1, fp) == 1 && fseek(fp, g_change_at, SEEK_SET) == 0) {
        c ^= 0x5a;
        g_changes += fwrite(&c, 1, 1, fp) == 1;
    }
    if (fp) fclose(fp);
}

static void test_load_streamed(model *a, volt_st_file *fx) {
    char dir[512], path[600], err[256];
    volt_distilbert_config c;
    tiny_config(&c);
    snprintf(dir, sizeof dir, "%s/plain", vtest_tmpdir());
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    size_t largest = 0;
    if (!write_plain(fx, path, &largest)) return;
    model b;
    if (!model_build(&b, &c, 41)) { model_free(&b); return; }   /* random init */
    int64_t n0, n1;
    float *before = snapshot_params(b.ps, &n0);

    /* damaged files: a clear error naming file and tensor, the model untouched. DROP_ONE misses
     * a tensor late in the model: the parameters before it were once already copied over. */
    snprintf(dir, sizeof dir, "%s/late_missing", vtest_tmpdir());
    if (write_checkpoint(fx, dir, KEEP_PREFIX | DROP_ONE)) {
        char p2[600];
        snprintf(p2, sizeof p2, "%s/model.safetensors", dir);
        volt_status st = volt_distilbert_load(b.m, b.ps, p2);
        CHECK(st == VOLT_ERR_NOT_FOUND && strstr(volt_params_errmsg(b.ps), "layer.1.ffn.lin2.bias"), "late missing: %s",
              volt_params_errmsg(b.ps));
        float *after = snapshot_params(b.ps, &n1);
        CHECK(before && after && n0 == n1 && !memcmp(before, after, sizeof(float) * (size_t)n0),
              "a file missing a late tensor leaves the model untouched");
        free(after);
    }
    char trunc[700];   /* the plain file cut in its last tensor: the open says so */
    snprintf(trunc, sizeof trunc, "%s.truncated", path);
    {
        FILE *in = fopen(path, "rb"), *out = fopen(trunc, "wb");
        char buf[4096];
        size_t k, total = 0;
        fseek(in, 0, SEEK_END);
        const long size = ftell(in);
        rewind(in);
        while ((k = fread(buf, 1, sizeof buf, in)) > 0 && total < (size_t)size - 6) {
            if (total + k > (size_t)size - 6) k = (size_t)size - 6 - total;
            fwrite(buf, 1, k, out);
            total += k;
        }
        fclose(in);
        fclose(out);
        volt_status st = volt_distilbert_load(b.m, b.ps, trunc);
        CHECK(st == VOLT_ERR_CORRUPT && strstr(volt_params_errmsg(b.ps), "truncated") && strstr(volt_params_errmsg(b.ps), trunc),
              "truncated HF file: %s", volt_params_errmsg(b.ps));
        float *after = snapshot_params(b.ps, &n1);
        CHECK(after && !memcmp(before, after, sizeof(float) * (size_t)n0), "a truncated file leaves the model untouched");
        free(after);
    }

    /* the good file: the fixture's values, read one tensor at a time (no buffer over the largest tensor) */
    volt__st_read_peak(true);
    CHECK_OK(volt_distilbert_load(b.m, b.ps, path));
    const size_t peak = volt__st_read_peak(false);
    CHECK(peak > 0 && peak <= largest, "HF import: the largest read was %zu bytes, the largest tensor %zu (the file's data: "
          "several times that)", peak, largest);
    int same = 0;
    for (int i = 0; i < volt_params_count(b.ps); i++) {
        volt_tensor *p = volt_params_at(b.ps, i);
        same += !memcmp(H(p), H(volt_params_find(a->ps, p->name)), volt_tensor_bytes(p));
    }
    CHECK(same == volt_params_count(b.ps), "plain HF file: %d of %d parameters equal the fixture's", same, volt_params_count(b.ps));

    /* changed between the check and the reads: a file without crcs, so what is caught is that
     * the bytes differ from the ones the check read */
    volt_st_file *pf = NULL;
    volt_st_info info;
    if (volt_st_open_some(path, NULL, NULL, &pf, err, sizeof err) == VOLT_OK &&
        volt_st_find(pf, "distilbert.transformer.layer.1.ffn.lin1.weight", &info) == VOLT_OK) {
        g_change_at = (long)(pf->base + (uint64_t)((const unsigned char *)info.data - pf->data) + info.nbytes / 2);
        snprintf(g_change_path, sizeof g_change_path, "%s", path);
        g_changes = 0;
        volt__st_set_check_hook(change_file, NULL);
        volt_status st = volt_distilbert_load(b.m, b.ps, path);
        volt__st_set_check_hook(NULL, NULL);
        CHECK(g_changes == 1, "the hook changed the file once (%d)", g_changes);
        CHECK(st == VOLT_ERR_CORRUPT && strstr(volt_params_errmsg(b.ps), "'distilbert.transformer.layer.1.ffn.lin1.weight' changed "
              "after it was checked") && strstr(volt_params_errmsg(b.ps), "partly replaced"), "HF file changed during the load: %s",
              volt_params_errmsg(b.ps));
        printf("HF import: largest read %zu bytes (largest tensor %zu); changed during load: %s\n", peak, largest,
               volt_params_errmsg(b.ps));
    } else CHECK(0, "reopen %s: %s", path, err);
    volt_st_close(pf);
    free(before);
    model_free(&b);
}

/* ---- a short trainer run: the label is which of two token sets (10..19 or 60..69) token 1
 * comes from, so the [CLS] position must learn to attend to it; rows are padded to random
 * lengths and hold random tokens elsewhere. ------------------------------------------------------ */
static uint64_t rng = 0x853c49e6748fea9bull;
static uint32_t urand(uint32_t n) { rng = rng * 6364136223846793005ull + 1442695040888963407ull; return (uint32_t)(rng >> 33) % n; }

static void test_trainer(void) {
    enum { N = 256, NV = 64, T = 12, V = 97 };
    static int32_t ids[(N + NV) * T], mask[(N + NV) * T];
    static int64_t y[N + NV];
    for (int i = 0; i < N + NV; i++) {
        int len = 3 + (int)urand(T - 2);
        for (int t = 0; t < T; t++) {
            ids[i * T + t] = t == 0 ? 2 : t < len ? 1 + (int32_t)urand(V - 1) : 0;
            mask[i * T + t] = t < len;
        }
        y[i] = urand(2);
        ids[i * T + 1] = (int32_t)(y[i] ? 60 : 10) + (int32_t)urand(10);   /* 10..19 or 60..69 */
    }
    const volt_field fields[3] = { { "input_ids", VOLT_I32, VOLT_SHAPE(T) }, { "attention_mask", VOLT_I32, VOLT_SHAPE(T) },
                                   { "y", VOLT_I64, VOLT_SCALAR } };
    const void *tr[3] = { ids, mask, y }, *va[3] = { ids + N * T, mask + N * T, y + N };
    volt_dataset *dtr = NULL, *dva = NULL;
    CHECK_OK(volt_dataset_from_arrays(3, fields, tr, N, &dtr));
    CHECK_OK(volt_dataset_from_arrays(3, fields, va, NV, &dva));
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = 32;
    volt_loader *lva = NULL, *ltr = NULL;
    CHECK_OK(volt_loader_create(&lc, dva, &lva));
    lc.shuffle = true;
    lc.seed = 1;
    CHECK_OK(volt_loader_create(&lc, dtr, &ltr));

    volt_distilbert_config c;
    volt_distilbert_config_init(&c);          /* HF dropouts (unfused attention in training) */
    volt_distilbert_preset(&c, "tiny");
    c.optimizer = VOLT_OPTIM_ADAMW;
    c.lr = 3e-3f;
    c.weight_decay = 0.01f;
    c.warmup_steps = 8;
    c.total_steps = 8 * (N / 32);
    void *m = NULL;
    CHECK_OK(volt_distilbert_create(&c, &m));
    volt_trainer_config tc;
    volt_trainer_config_init(&tc);
    tc.max_epochs = 8;
    tc.enable_progress_bar = false;
    tc.enable_checkpointing = false;
    tc.enable_logger = false;
    tc.default_root_dir = vtest_tmpdir();
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&tc, &t));
    if (t && m && ltr && lva) {
        volt_status st = volt_trainer_fit(t, &volt_distilbert_ops, m, ltr, lva, NULL);
        CHECK(st == VOLT_OK, "fit: %s %s", volt_status_str(st), volt_trainer_errmsg(t));
        double va_acc = 0, va_loss = 0, tl = 0;
        CHECK(volt_trainer_metric(t, "val_acc", &va_acc) && volt_trainer_metric(t, "val_loss", &va_loss) &&
              volt_trainer_metric(t, "train_loss", &tl), "metrics logged");
        CHECK(va_acc >= 0.95, "val_acc %.3f after 8 epochs", va_acc);
        CHECK(volt_trainer_global_step(t) == 8 * (N / 32), "global_step %lld", (long long)volt_trainer_global_step(t));
        printf("trainer: train_loss %.4f, val_loss %.4f, val_acc %.3f\n", tl, va_loss, va_acc);
    }
    volt_trainer_destroy(t);
    volt_distilbert_destroy(m);
    volt_loader_destroy(ltr); volt_loader_destroy(lva);
    volt_dataset_destroy(dtr); volt_dataset_destroy(dva);
}

int main(void) {
    vtest_check_accelerator();
    test_config();
    test_layout();
    test_parity();
    test_bf16_mixed_logits();
    test_steps();
    test_save_load();
    test_trainer();
    ring_free();
    return vtest_finish();
}
