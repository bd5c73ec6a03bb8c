/* volt/nn.h layers: names, units and declaration order; PyTorch's init distributions
 * (checked statistically); PyTorch equivalence of outputs and gradients on the same weights
 * (tests/fixtures/nn_layers.safetensors, made by make_nn_fixture.py with torch.nn itself);
 * finite-difference gradchecks; padding_idx; errors. */
#include "vtest.h"
#include "gradcheck_compose.h"
#include "volt/volt.h"

#ifndef VOLT_FIXTURES
#define VOLT_FIXTURES "tests/fixtures"
#endif
#define FIXTURE VOLT_FIXTURES "/nn_layers.safetensors"

static volt_params *new_store(uint64_t seed) {
    volt_params_config pc;
    volt_params_config_init(&pc);
    pc.seed = seed;
    volt_params *ps = NULL;
    CHECK_OK(volt_params_create(&pc, &ps));
    return ps;
}

static volt_step *new_step(volt_params *ps) {
    volt_step_config sc;
    volt_step_config_init(&sc);
    sc.params = ps;
    sc.arena_bytes = 1 << 22;
    sc.seed = 99;
    volt_step *s = NULL;
    CHECK_OK(volt_step_create(&sc, &s));
    return s;
}

/* ---- names, units, order ------------------------------------------------------------------- */
static void expect_names(volt_params *ps, const char *const *names, int n, const char *what) {
    CHECK(volt_params_count(ps) == n, "%s: %d params, expected %d", what, volt_params_count(ps), n);
    for (int i = 0; i < n && i < volt_params_count(ps); i++)
        CHECK(!strcmp(volt_params_at(ps, i)->name, names[i]), "%s: param %d is '%s', expected '%s'", what, i,
              volt_params_at(ps, i)->name, names[i]);
}

static void test_names_units(void) {
    volt_params *ps = new_store(1);
    volt_nn_linear fc1, fc2, nob;
    volt_nn_linear_config lc;
    volt_nn_linear_config_init(&lc);
    lc.bias = false;
    lc.unit = VOLT_NN_UNIT_JOIN;
    CHECK_OK(volt_nn_linear_declare(ps, "fc1", 4, 3, &fc1));
    CHECK_OK(volt_nn_linear_declare(ps, "fc2", 3, 2, &fc2));
    CHECK_OK(volt_nn_linear_declare_ex(ps, "head.proj", 2, 2, &lc, &nob));    /* joins unit fc2 */
    static const char *const n1[] = { "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "head.proj.weight" };
    expect_names(ps, n1, 5, "linears");
    CHECK(volt_params_unit_count(ps) == 2, "units %d", volt_params_unit_count(ps));
    CHECK(!strcmp(volt_unit_name(volt_params_unit_at(ps, 0)), "fc1") &&
          !strcmp(volt_unit_name(volt_params_unit_at(ps, 1)), "fc2"), "unit names");
    CHECK(nob.bias == NULL && fc1.weight->shape.d[0] == 3 && fc1.weight->shape.d[1] == 4, "shapes / no bias");
    CHECK(volt_unit_param_count(volt_params_unit_at(ps, 1)) == 3, "JOIN puts head.proj into fc2's unit");
    volt_params_destroy(ps);

    /* DistilBERT's block names (the encoder defaults), one unit, HF order */
    ps = new_store(1);
    volt_nn_encoder_config ec;
    volt_nn_encoder_config_init(&ec);
    ec.n_heads = 2;
    ec.ffn_dim = 12;
    volt_nn_encoder_layer e;
    CHECK_OK(volt_nn_encoder_declare(ps, "distilbert.transformer.layer.0", 8, &ec, &e));
    static const char *const n2[] = {
        "distilbert.transformer.layer.0.attention.q_lin.weight", "distilbert.transformer.layer.0.attention.q_lin.bias",
        "distilbert.transformer.layer.0.attention.k_lin.weight", "distilbert.transformer.layer.0.attention.k_lin.bias",
        "distilbert.transformer.layer.0.attention.v_lin.weight", "distilbert.transformer.layer.0.attention.v_lin.bias",
        "distilbert.transformer.layer.0.attention.out_lin.weight", "distilbert.transformer.layer.0.attention.out_lin.bias",
        "distilbert.transformer.layer.0.sa_layer_norm.weight", "distilbert.transformer.layer.0.sa_layer_norm.bias",
        "distilbert.transformer.layer.0.ffn.lin1.weight", "distilbert.transformer.layer.0.ffn.lin1.bias",
        "distilbert.transformer.layer.0.ffn.lin2.weight", "distilbert.transformer.layer.0.ffn.lin2.bias",
        "distilbert.transformer.layer.0.output_layer_norm.weight", "distilbert.transformer.layer.0.output_layer_norm.bias",
    };
    expect_names(ps, n2, 16, "post-LN encoder");
    CHECK(volt_params_unit_count(ps) == 1 &&
          !strcmp(volt_unit_name(volt_params_unit_at(ps, 0)), "distilbert.transformer.layer.0"), "one unit per block");
    CHECK(e.ffn1.weight->shape.d[0] == 12 && e.ffn2.weight->shape.d[1] == 12, "ffn_dim");
    CHECK(!e.norm_first && !e.attn_out_dropout && e.act == VOLT_NN_GELU && !e.attn.causal, "DistilBERT's block");
    volt_params_destroy(ps);

    /* GPT-2's pre-LN order: ln_1, attn, ln_2, mlp */
    ps = new_store(1);
    volt_nn_encoder_config_init_gpt(&ec);
    CHECK_OK(volt_nn_encoder_declare(ps, "h.0", 8, &ec, &e));
    static const char *const n3[] = { "h.0.ln_1.weight", "h.0.ln_1.bias", "h.0.attn.q_proj.weight", "h.0.attn.q_proj.bias",
                                      "h.0.attn.k_proj.weight", "h.0.attn.k_proj.bias", "h.0.attn.v_proj.weight",
                                      "h.0.attn.v_proj.bias", "h.0.attn.c_proj.weight", "h.0.attn.c_proj.bias",
                                      "h.0.ln_2.weight", "h.0.ln_2.bias", "h.0.mlp.c_fc.weight", "h.0.mlp.c_fc.bias",
                                      "h.0.mlp.c_proj.weight", "h.0.mlp.c_proj.bias" };
    expect_names(ps, n3, 16, "pre-LN encoder");
    CHECK(e.ffn1.weight->shape.d[0] == 32, "ffn_dim 0 = 4 * dim");
    CHECK(e.norm_first && e.attn_out_dropout && e.act == VOLT_NN_GELU_TANH && e.attn.causal, "GPT-2's block");
    volt_params_destroy(ps);
}

/* ---- init distributions ----------------------------------------------------------------------- */
typedef struct { double min, max, mean, std; } moments;
static moments stats(const volt_tensor *t) {
    const float *x = volt_tensor_f32(t);
    int64_t n = volt_tensor_numel(t);
    moments m = { x[0], x[0], 0, 0 };
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) {
        m.min = fmin(m.min, x[i]);
        m.max = fmax(m.max, x[i]);
        s += x[i];
        s2 += (double)x[i] * x[i];
    }
    m.mean = s / (double)n;
    m.std = sqrt(fmax(s2 / (double)n - m.mean * m.mean, 0));
    return m;
}

/* U(-b, b) with n samples: bounds within b and reached to 1%, mean within 4 sigma of 0, std
 * b/sqrt(3) within 3%. */
static void check_uniform(const volt_tensor *t, double b, const char *what) {
    moments m = stats(t);
    double n = (double)volt_tensor_numel(t);
    CHECK(m.min >= -b && m.max <= b, "%s: range [%g, %g] outside ±%g", what, m.min, m.max, b);
    CHECK(m.min < -0.99 * b && m.max > 0.99 * b, "%s: range [%g, %g] does not reach ±%g", what, m.min, m.max, b);
    CHECK(fabs(m.mean) < 4 * b / sqrt(3 * n), "%s: mean %g", what, m.mean);
    CHECK(fabs(m.std / (b / sqrt(3)) - 1) < 0.03, "%s: std %g, expected %g", what, m.std, b / sqrt(3));
}

static void check_normal(const volt_tensor *t, double std, int64_t skip_row, const char *what) {
    int64_t n = volt_tensor_numel(t), D = t->shape.ndim == 2 ? t->shape.d[1] : n;
    const float *x = volt_tensor_f32(t);
    double s = 0, s2 = 0, k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i / D == skip_row) continue;
        s += x[i];
        s2 += (double)x[i] * x[i];
        k++;
    }
    double mean = s / k, sd = sqrt(s2 / k - mean * mean);
    CHECK(fabs(mean) < 4 * std / sqrt(k), "%s: mean %g", what, mean);
    CHECK(fabs(sd / std - 1) < 0.03, "%s: std %g, expected %g", what, sd, std);
}

static void test_inits(void) {
    volt_params *ps = new_store(7);
    volt_nn_linear lin, hf;
    volt_nn_conv2d conv;
    volt_nn_embedding emb, pad;
    volt_nn_layernorm ln;
    volt_nn_linear_config lc;
    volt_nn_linear_config_init(&lc);
    lc.init = VOLT_NN_INIT_NORMAL;
    lc.std = 0.05f;
    volt_nn_embedding_config ec;
    volt_nn_embedding_config_init(&ec);
    ec.padding_idx = 3;
    CHECK_OK(volt_nn_linear_declare(ps, "lin", 400, 300, &lin));
    CHECK_OK(volt_nn_linear_declare_ex(ps, "hf", 300, 200, &lc, &hf));
    CHECK_OK(volt_nn_conv2d_declare(ps, "conv", 16, 64, 3, &conv));
    CHECK_OK(volt_nn_embedding_declare(ps, "emb", 500, 64, &emb));
    CHECK_OK(volt_nn_embedding_declare_ex(ps, "pad", 50, 64, &ec, &pad));
    CHECK_OK(volt_nn_layernorm_declare(ps, "ln", 33, &ln));
    CHECK_OK(volt_params_finalize(ps));
    /* nn.Linear: kaiming_uniform(a=sqrt(5)) -> U(±1/sqrt(in)); bias U(±1/sqrt(in)) */
    check_uniform(lin.weight, 1 / sqrt(400.0), "linear weight");
    check_uniform(lin.bias, 1 / sqrt(400.0), "linear bias");
    /* nn.Conv2d: fan_in = 16 * 3 * 3 */
    check_uniform(conv.weight, 1 / sqrt(144.0), "conv weight");
    moments cb = stats(conv.bias);
    CHECK(cb.min >= -1 / 12.0 && cb.max <= 1 / 12.0 && cb.max - cb.min > 0.1, "conv bias range [%g, %g]", cb.min, cb.max);
    /* HF's init: N(0, std), zero bias */
    check_normal(hf.weight, 0.05, -1, "normal-init linear weight");
    moments hb = stats(hf.bias);
    CHECK(hb.min == 0 && hb.max == 0, "normal-init bias is zero");
    /* nn.Embedding: N(0, 1); padding_idx row zero */
    check_normal(emb.weight, 1.0, -1, "embedding");
    check_normal(pad.weight, 1.0, 3, "embedding (pad row left out)");
    bool zero = true;
    for (int j = 0; j < 64; j++) zero &= volt_tensor_f32(pad.weight)[3 * 64 + j] == 0.f;
    CHECK(zero, "padding_idx row starts at zero");
    CHECK(volt_tensor_f32(pad.weight)[2 * 64] != 0.f && volt_tensor_f32(pad.weight)[4 * 64] != 0.f, "other rows random");
    moments lw = stats(ln.weight), lb = stats(ln.bias);
    CHECK(lw.min == 1 && lw.max == 1 && lb.min == 0 && lb.max == 0, "layernorm 1 / 0");
    CHECK(ln.eps == 1e-5f, "layernorm eps default 1e-5");
    volt_params_destroy(ps);
}

/* ---- PyTorch equivalence ------------------------------------------------------------------------ */
typedef volt_status (*decl_fn)(volt_params *ps, void *layer);
typedef volt_tensor *(*fwd_fn)(volt_step *s, void *layer, volt_tensor *x, volt_tensor *mask);

static volt_tensor *fx_tensor(volt_step *s, volt_st_file *f, const char *name, bool required) {
    volt_st_info info;
    if (volt_st_find(f, name, &info) != VOLT_OK) {
        CHECK(!required, "fixture has no '%s'", name);
        return NULL;
    }
    volt_tensor *t = volt_tensor_new(s, info.dtype, info.shape);
    if (t && info.nbytes) memcpy(t->data, info.data, info.nbytes);
    return t;
}

/* max |a - b| / max(max |b|, 0.05). The floor is for the key projection's bias: its exact
 * gradient is 0 (softmax ignores a per-query constant), so both sides hold f32 rounding noise
 * (< 1e-6 here), checked absolutely. Every other tensor here has max |b| > 0.05. */
static double rel_err(const float *a, const float *b, int64_t n) {
    double d = 0, m = 0.05;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / m;
}

static void parity(volt_st_file *f, const char *cs, decl_fn decl, fwd_fn fwd, void *layer, double tol) {
    volt_params *ps = new_store(3);
    CHECK_OK(decl(ps, layer));
    CHECK_OK(volt_params_finalize(ps));
    char err[256], name[256];
    int n_params = volt_params_count(ps);
    for (int i = 0; i < n_params; i++) {
        volt_tensor *p = volt_params_at(ps, i);
        volt_st_info info;
        bool found = volt_st_find(f, p->name, &info) == VOLT_OK;
        CHECK(found && volt_shape_eq(info.shape, p->shape), "%s: torch has no parameter '%s' of its shape", cs, p->name);
        if (found) CHECK_OK(volt_st_read_f32(f, p->name, volt_tensor_f32(p), volt_tensor_numel(p), err, sizeof err));
    }
    volt_step *s = new_step(ps);
    CHECK_OK(volt_step_begin(s, true, 0));
    snprintf(name, sizeof name, "%s.x", cs);
    volt_tensor *x = fx_tensor(s, f, name, true);
    if (x && x->dtype == VOLT_F32) volt_tensor_requires_grad(s, x);
    snprintf(name, sizeof name, "%s.mask", cs);
    volt_tensor *mask = fx_tensor(s, f, name, false);
    volt_tensor *out = fwd(s, layer, x, mask);
    CHECK(out != NULL, "%s: forward: %s", cs, volt_step_errmsg(s));
    snprintf(name, sizeof name, "%s.out", cs);
    volt_tensor *ref = fx_tensor(s, f, name, true);
    snprintf(name, sizeof name, "%s.r", cs);
    volt_tensor *r = fx_tensor(s, f, name, true);
    if (!out || !ref || !r || !volt_shape_eq(out->shape, ref->shape)) {
        CHECK(0, "%s: output shape", cs);
        goto done;
    }
    double e = rel_err(volt_tensor_f32(out), volt_tensor_f32(ref), volt_tensor_numel(ref)), worst = 0;
    CHECK(e < tol, "%s: output rel err %.3g", cs, e);
    CHECK_OK(volt_step_backward_grad(s, out, volt_tensor_f32(r)));
    if (x && x->dtype == VOLT_F32) {
        snprintf(name, sizeof name, "%s.grad.x", cs);
        volt_tensor *gx = fx_tensor(s, f, name, true);
        double ge = gx && x->grad ? rel_err(x->grad, volt_tensor_f32(gx), volt_tensor_numel(gx)) : 1;
        CHECK(ge < tol, "%s: input grad rel err %.3g", cs, ge);
        worst = fmax(worst, ge);
    }
    for (int i = 0; i < n_params; i++) {
        volt_tensor *p = volt_params_at(ps, i);
        snprintf(name, sizeof name, "grad.%s", p->name);
        volt_tensor *g = fx_tensor(s, f, name, true);
        double ge = g && p->grad ? rel_err(p->grad, volt_tensor_f32(g), volt_tensor_numel(g)) : 1;
        CHECK(ge < tol, "%s: grad of %s rel err %.3g", cs, p->name, ge);
        worst = fmax(worst, ge);
    }
    printf("torch parity %-11s %d params: output rel err %.2e, worst grad rel err %.2e\n", cs, n_params, e, worst);
done:
    volt_step_end(s);
    volt_step_destroy(s);
    volt_params_destroy(ps);
}

static volt_status decl_linear(volt_params *ps, void *l) { return volt_nn_linear_declare(ps, "linear", 5, 7, l); }
static volt_tensor *fwd_linear(volt_step *s, void *l, volt_tensor *x, volt_tensor *m) {
    return volt_nn_linear_forward(s, l, x);
}
static volt_status decl_ln(volt_params *ps, void *l) { return volt_nn_layernorm_declare(ps, "layernorm", 6, l); }
static volt_tensor *fwd_ln(volt_step *s, void *l, volt_tensor *x, volt_tensor *m) {
    return volt_nn_layernorm_forward(s, l, x);
}
static volt_status decl_emb(volt_params *ps, void *l) {
    volt_nn_embedding_config c;
    volt_nn_embedding_config_init(&c);
    c.padding_idx = 2;
    return volt_nn_embedding_declare_ex(ps, "embedding", 11, 4, &c, l);
}
static volt_tensor *fwd_emb(volt_step *s, void *l, volt_tensor *x, volt_tensor *m) {
    return volt_nn_embedding_forward(s, l, x);
}
static volt_status decl_mha_(volt_params *ps, void *l, const char *name, bool causal) {
    volt_nn_mha_config c;
    volt_nn_mha_config_init(&c);
    c.n_heads = 2;
    c.causal = causal;
    return volt_nn_mha_declare(ps, name, 8, &c, l);
}
static volt_status decl_mha(volt_params *ps, void *l) { return decl_mha_(ps, l, "mha", false); }
static volt_status decl_mha_causal(volt_params *ps, void *l) { return decl_mha_(ps, l, "mha_causal", true); }
static volt_tensor *fwd_mha(volt_step *s, void *l, volt_tensor *x, volt_tensor *m) {
    return volt_nn_mha_forward(s, l, x, m);
}
static volt_status decl_enc_post(volt_params *ps, void *l) {
    volt_nn_encoder_config c;
    volt_nn_encoder_config_init(&c);        /* DistilBERT names = torch's post-LN layer, renamed */
    c.n_heads = 2;
    c.ffn_dim = 16;
    c.dropout = c.attention_dropout = 0.f;
    return volt_nn_encoder_declare(ps, "enc_post", 8, &c, l);
}
static volt_status decl_enc_pre(volt_params *ps, void *l) {
    volt_nn_encoder_config c;
    volt_nn_encoder_config_init_gpt(&c);    /* norm_first, causal, GELU-tanh */
    c.n_heads = 2;
    c.ffn_dim = 16;
    c.dropout = c.attention_dropout = 0.f;
    return volt_nn_encoder_declare(ps, "enc_pre", 8, &c, l);
}
static volt_tensor *fwd_enc(volt_step *s, void *l, volt_tensor *x, volt_tensor *m) {
    return volt_nn_encoder_forward(s, l, x, m);
}

typedef struct { volt_nn_conv2d conv; volt_nn_max_pool2d pool; volt_nn_linear fc; volt_nn_seq seq; } seq_net;
static volt_status decl_seq(volt_params *ps, void *l) {
    seq_net *n = l;
    volt_nn_conv2d_config c;
    volt_nn_conv2d_config_init(&c);
    c.stride = 2;
    c.padding = 1;
    n->pool = (volt_nn_max_pool2d){ 2, 0 };
    n->seq.n = 0;
    VOLT_TRY(volt_nn_conv2d_declare_ex(ps, "seq.conv", 3, 4, 3, &c, &n->conv));
    VOLT_TRY(volt_nn_linear_declare(ps, "seq.fc", 16, 5, &n->fc));
    VOLT_TRY(volt_nn_seq_add(&n->seq, VOLT_NN_CONV2D, &n->conv));
    VOLT_TRY(volt_nn_seq_add(&n->seq, VOLT_NN_ACT_RELU, NULL));
    VOLT_TRY(volt_nn_seq_add(&n->seq, VOLT_NN_MAX_POOL2D, &n->pool));
    VOLT_TRY(volt_nn_seq_add(&n->seq, VOLT_NN_FLATTEN, NULL));
    return volt_nn_seq_add(&n->seq, VOLT_NN_LINEAR, &n->fc);
}
static volt_tensor *fwd_seq(volt_step *s, void *l, volt_tensor *x, volt_tensor *m) {
    return volt_nn_seq_forward(s, &((seq_net *)l)->seq, x);
}

static void test_torch_parity(void) {
    volt_st_file *f = NULL;
    char err[256];
    volt_status st = volt_st_open(FIXTURE, &f, err, sizeof err);
    CHECK(st == VOLT_OK, "fixture: %s", err);
    if (st) return;
    volt_nn_linear lin;
    volt_nn_layernorm ln;
    volt_nn_embedding emb;
    volt_nn_mha mha;
    volt_nn_encoder_layer enc;
    seq_net net;
    parity(f, "linear", decl_linear, fwd_linear, &lin, 1e-5);
    parity(f, "layernorm", decl_ln, fwd_ln, &ln, 1e-5);
    parity(f, "embedding", decl_emb, fwd_emb, &emb, 1e-6);    /* the pad row's grad is zero in torch too */
    parity(f, "mha", decl_mha, fwd_mha, &mha, 2e-5);
    parity(f, "mha_causal", decl_mha_causal, fwd_mha, &mha, 2e-5);
    parity(f, "enc_post", decl_enc_post, fwd_enc, &enc, 2e-5);
    parity(f, "enc_pre", decl_enc_pre, fwd_enc, &enc, 2e-5);
    parity(f, "seq", decl_seq, fwd_seq, &net, 1e-5);
    volt_st_close(f);
}

/* ---- padding_idx: the pad row gets no gradient, its value still reads ------------------------- */
static void test_padding_idx(void) {
    volt_params *ps = new_store(5);
    volt_nn_embedding e;
    volt_nn_embedding_config c;
    volt_nn_embedding_config_init(&c);
    c.padding_idx = 0;
    CHECK_OK(volt_nn_embedding_declare_ex(ps, "emb", 6, 3, &c, &e));
    CHECK_OK(volt_params_finalize(ps));
    for (int j = 0; j < 3; j++) volt_tensor_f32(e.weight)[j] = 0.5f + (float)j;   /* a pretrained, non-zero pad row */
    volt_step *s = new_step(ps);
    CHECK_OK(volt_step_begin(s, true, 0));
    int32_t ids[4] = { 0, 4, 0, 2 };
    volt_tensor *out = volt_nn_embedding_forward(s, &e, volt_tensor_wrap(s, VOLT_I32, VOLT_SHAPE(2, 2), ids));
    CHECK(out && volt_tensor_f32(out)[0] == 0.5f && volt_tensor_f32(out)[8] == 2.5f, "pad positions read the pad row");
    CHECK_OK(volt_step_backward(s, volt_sum(s, out)));
    CHECK(e.weight->grad[0] == 0.f && e.weight->grad[1] == 0.f && e.weight->grad[2] == 0.f, "pad row grad zero");
    CHECK(e.weight->grad[4 * 3] == 1.f && e.weight->grad[2 * 3 + 1] == 1.f && e.weight->grad[3] == 0.f, "other rows");
    volt_step_end(s);
    volt_step_destroy(s);
    volt_params_destroy(ps);
}

/* Parameters stored in bf16 (bf16-true): the pad positions read the rounded pad row. */
static void test_padding_idx_bf16(void) {
    volt_params *ps = new_store(5);
    volt_nn_embedding e;
    volt_nn_embedding_config c;
    volt_nn_embedding_config_init(&c);
    c.padding_idx = 1;
    CHECK_OK(volt_nn_embedding_declare_ex(ps, "emb", 4, 3, &c, &e));
    CHECK_OK(volt_params_finalize(ps));
    for (int j = 0; j < 3; j++) volt_tensor_f32(e.weight)[3 + j] = 1.f / 3.f + (float)j;
    CHECK_OK(volt_params_convert(ps, VOLT_BF16));
    volt_step *s = new_step(ps);
    CHECK_OK(volt_step_begin(s, true, 0));
    int32_t ids[3] = { 1, 2, 1 };
    volt_tensor *out = volt_nn_embedding_forward(s, &e, volt_tensor_wrap(s, VOLT_I32, VOLT_SHAPE(3), ids));
    CHECK(out != NULL, "bf16 table: %s", volt_step_errmsg(s));
    if (out) {
        const float *o = volt_tensor_f32(out);
        CHECK(o[0] == 0.333984375f && o[2] == 2.328125f && o[6] == o[0] && o[8] == o[2],
              "pad rows read the bf16 row as f32: %.9g %.9g", o[0], o[2]);
        CHECK_OK(volt_step_backward(s, volt_sum(s, out)));
        CHECK(e.weight->grad[3] == 0.f && e.weight->grad[5] == 0.f && e.weight->grad[6] == 1.f, "bf16: pad row grad 0");
    }
    volt_step_end(s);
    volt_step_destroy(s);
    volt_params_destroy(ps);
}

/* ---- attention: the dropout path (unfused) agrees with the fused kernel as p -> 0 ------------- */
static void test_attention_paths(void) {
    volt_params *ps = new_store(9);
    volt_nn_mha a;
    volt_nn_mha_config c;
    volt_nn_mha_config_init(&c);
    c.n_heads = 4;
    c.causal = true;
    CHECK_OK(volt_nn_mha_declare(ps, "attn", 16, &c, &a));
    CHECK_OK(volt_params_finalize(ps));
    volt_step *s = new_step(ps);
    float x[2 * 6 * 16];
    for (int i = 0; i < 2 * 6 * 16; i++) x[i] = sinf(0.37f * (float)i);
    uint8_t mask[12] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0 };
    float fused[2 * 6 * 16];
    CHECK_OK(volt_step_begin(s, false, 0));
    volt_tensor *o = volt_nn_mha_forward(s, &a, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 6, 16), x),
                                         volt_tensor_wrap(s, VOLT_U8, VOLT_SHAPE(2, 6), mask));
    CHECK(o != NULL, "fused: %s", volt_step_errmsg(s));
    if (o) memcpy(fused, o->data, sizeof fused);
    volt_step_end(s);
    a.dropout = 1e-6f;                          /* training with p > 0: the unfused composition */
    CHECK_OK(volt_step_begin(s, true, 0));
    o = volt_nn_mha_forward(s, &a, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 6, 16), x),
                            volt_tensor_wrap(s, VOLT_U8, VOLT_SHAPE(2, 6), mask));
    CHECK(o != NULL && rel_err(volt_tensor_f32(o), fused, 2 * 6 * 16) < 1e-5, "unfused (p=1e-6) vs fused: %.3g",
          o ? rel_err(volt_tensor_f32(o), fused, 2 * 6 * 16) : 1.0);
    volt_step_end(s);
    a.dropout = 0.5f;                           /* and dropout really drops */
    CHECK_OK(volt_step_begin(s, true, 0));
    o = volt_nn_mha_forward(s, &a, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 6, 16), x),
                            volt_tensor_wrap(s, VOLT_U8, VOLT_SHAPE(2, 6), mask));
    CHECK(o != NULL && rel_err(volt_tensor_f32(o), fused, 2 * 6 * 16) > 1e-2, "attention dropout 0.5 changes the output");
    volt_step_end(s);
    volt_step_destroy(s);
    volt_params_destroy(ps);
}

/* ---- gradchecks: the layers as compositions, weights as differentiable inputs ---------------- */
static volt_tensor *gc_linear(volt_step *s, volt_tensor **in, void *ctx) {
    volt_nn_linear l = { in[1], in[2], 5, 3 };
    return volt_nn_linear_forward(s, &l, in[0]);
}
static volt_tensor *gc_ln(volt_step *s, volt_tensor **in, void *ctx) {
    volt_nn_layernorm l = { in[1], in[2], 6, 1e-5f };
    return volt_nn_layernorm_forward(s, &l, in[0]);
}
static volt_tensor *gc_emb(volt_step *s, volt_tensor **in, void *ctx) {
    volt_nn_embedding e = { in[0], 7, 3, -1 };
    return volt_nn_embedding_forward(s, &e, in[1]);
}
static volt_tensor *gc_conv(volt_step *s, volt_tensor **in, void *ctx) {
    volt_nn_conv2d c = { in[1], in[2], 2, 3, 3, 2, 1 };
    volt_nn_max_pool2d p = { 2, 0 };
    return volt_nn_max_pool2d_forward(s, &p, volt_nn_conv2d_forward(s, &c, in[0]));
}

/* MHA / encoder: weights (D, D) random, biases as constants from ctx (host arrays). */
typedef struct { float bias[8][16]; float ffn_b[2][32]; bool causal; float p; volt_nn_act act; bool pre; } gc_ctx;
static volt_tensor *cst(volt_step *s, float *d, int64_t n) { return volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(n), d); }
static void gc_mha_build(volt_step *s, volt_tensor **in, gc_ctx *c, volt_nn_mha *a) {
    *a = (volt_nn_mha){ .dim = 8, .n_heads = 2, .dropout = c->p, .causal = c->causal };
    a->q = (volt_nn_linear){ in[1], cst(s, c->bias[0], 8), 8, 8 };
    a->k = (volt_nn_linear){ in[2], cst(s, c->bias[1], 8), 8, 8 };
    a->v = (volt_nn_linear){ in[3], cst(s, c->bias[2], 8), 8, 8 };
    a->out = (volt_nn_linear){ in[4], cst(s, c->bias[3], 8), 8, 8 };
}
static volt_tensor *gc_mha(volt_step *s, volt_tensor **in, void *ctx) {
    volt_nn_mha a;
    gc_mha_build(s, in, ctx, &a);
    return volt_nn_mha_forward(s, &a, in[0], in[5]);
}
static volt_tensor *gc_cross(volt_step *s, volt_tensor **in, void *ctx) {
    volt_nn_mha a;
    gc_mha_build(s, in, ctx, &a);
    return volt_nn_mha_cross(s, &a, in[0], in[6], in[5]);     /* xq (2, 3, 8) over xkv (2, 5, 8) */
}
static volt_tensor *gc_enc(volt_step *s, volt_tensor **in, void *ctx) {
    gc_ctx *c = ctx;
    volt_nn_encoder_layer e = { .act = c->act, .dropout = c->p, .norm_first = c->pre, .attn_out_dropout = c->pre };
    gc_mha_build(s, in, c, &e.attn);
    e.norm1 = (volt_nn_layernorm){ cst(s, c->bias[4], 8), cst(s, c->bias[5], 8), 8, 1e-5f };
    e.norm2 = (volt_nn_layernorm){ cst(s, c->bias[6], 8), cst(s, c->bias[7], 8), 8, 1e-5f };
    e.ffn1 = (volt_nn_linear){ in[6], cst(s, c->ffn_b[0], 12), 8, 12 };
    e.ffn2 = (volt_nn_linear){ in[7], cst(s, c->ffn_b[1], 8), 12, 8 };
    return volt_nn_encoder_forward(s, &e, in[0], in[5]);
}

static void test_gradchecks(void) {
    gc_input lin[] = { GC_F32(VOLT_SHAPE(2, 4, 5)), GC_F32(VOLT_SHAPE(3, 5)), GC_F32(VOLT_SHAPE(3)) };
    gradcheck_compose("nn linear", gc_linear, NULL, 3, lin);
    gc_input ln[] = { GC_F32(VOLT_SHAPE(3, 6)), GC_F32(VOLT_SHAPE(6)), GC_F32(VOLT_SHAPE(6)) };
    gradcheck_compose("nn layernorm", gc_ln, NULL, 3, ln);
    gc_input emb[] = { GC_F32(VOLT_SHAPE(7, 3)), GC_INDEX(VOLT_SHAPE(2, 5), 7) };
    gradcheck_compose("nn embedding", gc_emb, NULL, 2, emb);
    gc_input conv[] = { GC_F32(VOLT_SHAPE(2, 2, 6, 6)), GC_F32(VOLT_SHAPE(3, 2, 3, 3)), GC_F32(VOLT_SHAPE(3)) };
    gradcheck_compose("nn conv2d + max_pool2d", gc_conv, NULL, 3, conv);

    gc_ctx c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 16; j++) c.bias[i][j] = (i == 4 || i == 6 ? 1.f : 0.f) + 0.1f * sinf((float)(i * 16 + j));
    for (int j = 0; j < 32; j++) c.ffn_b[0][j] = c.ffn_b[1][j] = 0.05f * cosf((float)j);
    static const uint8_t mask[10] = { 1, 1, 1, 1, 1, 1, 1, 1, 0, 0 };
    gc_input mha[] = { GC_F32(VOLT_SHAPE(2, 5, 8)), GC_F32(VOLT_SHAPE(8, 8)), GC_F32(VOLT_SHAPE(8, 8)),
                       GC_F32(VOLT_SHAPE(8, 8)), GC_F32(VOLT_SHAPE(8, 8)),
                       { .dt = VOLT_U8, .shape = VOLT_SHAPE(2, 5), .data = mask } };
    for (int i = 1; i <= 4; i++) mha[i].scale = 0.35f;
    gradcheck_compose("nn mha (fused, padding mask)", gc_mha, &c, 6, mha);
    c.causal = true;
    gradcheck_compose("nn mha (fused, causal)", gc_mha, &c, 6, mha);
    c.p = 0.2f;                                 /* the unfused dropout path: same mask every call */
    gradcheck_compose("nn mha (attention dropout, causal)", gc_mha, &c, 6, mha);
    gc_input cross[] = { GC_F32(VOLT_SHAPE(2, 3, 8)), mha[1], mha[2], mha[3], mha[4], mha[5], GC_F32(VOLT_SHAPE(2, 5, 8)) };
    c.causal = false;
    gradcheck_compose("nn mha cross (Tq 3, Tk 5, attention dropout)", gc_cross, &c, 7, cross);
    gc_input enc[] = { mha[0], mha[1], mha[2], mha[3], mha[4], mha[5], GC_F32(VOLT_SHAPE(12, 8)), GC_F32(VOLT_SHAPE(8, 12)) };
    enc[6].scale = enc[7].scale = 0.35f;
    c.causal = false;
    c.p = 0.f;
    c.act = VOLT_NN_GELU;
    gradcheck_compose("nn encoder post-LN", gc_enc, &c, 8, enc);
    c.pre = true;
    c.causal = true;
    c.act = VOLT_NN_GELU_TANH;
    c.p = 0.1f;
    gradcheck_compose("nn encoder pre-LN (dropouts, causal)", gc_enc, &c, 8, enc);
}

/* ---- errors ----------------------------------------------------------------------------------- */
static void test_errors(void) {
    volt_params *ps = new_store(1);
    volt_nn_linear l;
    volt_nn_mha a;
    volt_nn_mha_config mc;
    volt_nn_mha_config_init(&mc);
    mc.n_heads = 3;
    CHECK(volt_nn_linear_declare(ps, "bad", 0, 3, &l) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_params_errmsg(ps), "linear 'bad'"), "bad linear: %s", volt_params_errmsg(ps));
    CHECK(volt_nn_mha_declare(ps, "attn", 8, &mc, &a) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_params_errmsg(ps), "divisible"), "heads must divide dim: %s", volt_params_errmsg(ps));
    CHECK(volt_nn_linear_declare(ps, "", 2, 3, &l) == VOLT_ERR_INVALID_ARG, "own unit needs a prefix");
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CHECK(volt_nn_linear_declare(ps, longname, 2, 3, &l) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_params_errmsg(ps), "longer than"), "long name: %s", volt_params_errmsg(ps));
    volt_nn_linear_config lc;
    volt_nn_linear_config_init(&lc);
    lc.version = 99;
    CHECK(volt_nn_linear_declare_ex(ps, "v", 2, 3, &lc, &l) == VOLT_ERR_VERSION &&
          strstr(volt_params_errmsg(ps), "nn: linear 'v': config version 99, expected 1..") &&
          strstr(volt_params_errmsg(ps), "(use volt_nn_linear_config_init)"), "config version: %s", volt_params_errmsg(ps));
    volt_nn_mha_config mv = mc;
    mv.version = 0;
    CHECK(volt_nn_mha_declare(ps, "attv", 8, &mv, &a) == VOLT_ERR_VERSION &&
          strstr(volt_params_errmsg(ps), "nn: attention 'attv': config version 0") &&
          strstr(volt_params_errmsg(ps), "(use volt_nn_mha_config_init)"), "mha config version: %s", volt_params_errmsg(ps));
    volt_nn_linear_config_init(&lc);
    lc.std = -1.f;
    lc.init = VOLT_NN_INIT_NORMAL;
    CHECK(volt_nn_linear_declare_ex(ps, "v", 2, 3, &lc, &l) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_params_errmsg(ps), "nn: linear 'v': bad init scheme"), "linear std -1: %s", volt_params_errmsg(ps));
    volt_nn_embedding_config ec;
    volt_nn_embedding_config_init(&ec);
    ec.padding_idx = 5;
    volt_nn_embedding e;
    CHECK(volt_nn_embedding_declare_ex(ps, "emb", 5, 2, &ec, &e) == VOLT_ERR_INVALID_ARG, "padding_idx out of range");
    volt_nn_embedding_config_init(&ec);
    ec.std = NAN;
    CHECK(volt_nn_embedding_declare_ex(ps, "emb", 5, 2, &ec, &e) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_params_errmsg(ps), "nn: embedding 'emb': bad init scheme"), "embedding std NaN: %s", volt_params_errmsg(ps));
    mc.n_heads = 2;
    CHECK_OK(volt_nn_mha_declare(ps, "attn", 8, &mc, &a));
    volt_tensor *c3 = NULL;                    /* the store's zero row: range, any init kind, only before finalize */
    CHECK_OK(volt_params_unit(ps, "rows"));
    CHECK_OK(volt_param_new(ps, "rows.c", VOLT_SHAPE(3, 4), VOLT_INIT_CONST(2.f), &c3));
    CHECK(volt_param_set_init_zero_row(ps, c3, 3) == VOLT_ERR_INVALID_ARG && strstr(volt_params_errmsg(ps), "rows.c"),
          "zero row out of range: %s", volt_params_errmsg(ps));
    CHECK_OK(volt_param_set_init_zero_row(ps, c3, 1));
    CHECK_OK(volt_params_finalize(ps));
    const float *cv = volt_tensor_f32(c3);
    CHECK(cv[0] == 2.f && cv[3] == 2.f && cv[4] == 0.f && cv[7] == 0.f && cv[8] == 2.f, "const init, row 1 zeroed");
    CHECK(volt_param_set_init_zero_row(ps, c3, 0) == VOLT_ERR_STATE, "zero row after finalize");
    CHECK(volt_nn_linear_declare(ps, "late", 2, 3, &l) < 0, "declare after finalize fails");
    volt_step *s = new_step(ps);
    CHECK_OK(volt_step_begin(s, false, 0));
    volt_nn_linear undeclared = { 0 };
    volt_tensor *x = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 3, 8));
    CHECK(!volt_nn_linear_forward(s, &undeclared, x) && strstr(volt_step_errmsg(s), "not declared"),
          "undeclared layer: %s", volt_step_errmsg(s));
    volt_step_end(s);
    CHECK_OK(volt_step_begin(s, true, 0));
    x = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 3, 8));
    volt_tensor *badmask = volt_tensor_new(s, VOLT_U8, VOLT_SHAPE(2, 4));
    CHECK(!volt_nn_mha_forward(s, &a, x, badmask) && strstr(volt_step_errmsg(s), "key_mask"),
          "mask shape: %s", volt_step_errmsg(s));
    volt_step_end(s);
    CHECK_OK(volt_step_begin(s, true, 0));
    volt_tensor *x7 = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 3, 7));
    CHECK(!volt_nn_mha_forward(s, &a, x7, NULL) && strstr(volt_step_errmsg(s), "(B, T, 8)"), "dim: %s",
          volt_step_errmsg(s));
    volt_step_end(s);
    volt_nn_seq q = { 0 };
    CHECK(volt_nn_seq_add(&q, VOLT_NN_LINEAR, NULL) == VOLT_ERR_INVALID_ARG, "seq: linear needs its layer");
    CHECK(volt_nn_seq_add(&q, VOLT_NN_ACT_RELU, &l) == VOLT_ERR_INVALID_ARG, "seq: relu takes no layer");
    for (int i = 0; i < VOLT_NN_SEQ_MAX; i++) CHECK_OK(volt_nn_seq_add(&q, VOLT_NN_ACT_RELU, NULL));
    CHECK(volt_nn_seq_add(&q, VOLT_NN_ACT_RELU, NULL) == VOLT_ERR_NOMEM, "seq: full");
    volt_step_destroy(s);
    volt_params_destroy(ps);
}

int main(void) {
    test_names_units();
    test_inits();
    test_torch_parity();
    test_padding_idx();
    test_padding_idx_bf16();
    test_attention_paths();
    test_gradchecks();
    test_errors();
    return vtest_finish();
}
