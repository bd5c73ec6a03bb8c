/* DistilBERT forward and backward through the tape on "cpu-strict" (device memory
 * unreadable from host code: a host read of an activation, a grad, the position ids or the
 * padding mask faults), compared bit for bit with the same steps on "cpu": logits, loss and
 * every parameter's grad. Tiny preset with dropout on, padded rows (pad id 0, mask 0) so the
 * embedding's padding_idx and the attention's key mask are exercised; two steps per model so
 * the second reuses arena memory (fresh grads start with stale contents: first writes must
 * store). */
#include "vtest.h"
#include "volt/volt.h"
#include "volt/distilbert.h"

enum { B = 3, T = 9, STEPS = 2 };

typedef struct run {
    float logits[STEPS][B * 3], loss[STEPS];
    float *grads;   /* every parameter's grad after the last step, declaration order */
    int64_t n_grads;
    char device[32];
    int64_t dim;
} run;

static void one_run(const char *accelerator, run *r) {
    memset(r, 0, sizeof *r);
    volt_distilbert_config c;
    volt_distilbert_config_init(&c);
    CHECK_OK(volt_distilbert_preset(&c, "tiny"));
    c.n_classes = 3;
    c.dropout = c.attention_dropout = 0.1f;
    c.seq_classif_dropout = 0.2f;
    void *m = NULL;
    CHECK_OK(volt_distilbert_create(&c, &m));
    volt_params_config pc;
    volt_params_config_init(&pc);
    pc.seed = 11;
    pc.accelerator = accelerator;
    volt_params *ps = NULL;
    CHECK_OK(volt_params_create(&pc, &ps));
    CHECK_OK(volt_distilbert_ops.setup(m, ps));
    CHECK_OK(volt_params_finalize(ps));
    CHECK_OK(volt_distilbert_ops.init_weights(m, ps));
    volt_step_config sc;
    volt_step_config_init(&sc);
    sc.params = ps;
    sc.seed = 5;
    sc.arena_bytes = 1 << 16;   /* small: the first step overflows, later ones reuse */
    volt_step *s = NULL;
    CHECK_OK(volt_step_create(&sc, &s));
    if (!s) return;
    snprintf(r->device, sizeof r->device, "%s", volt_step_device(s));
    int32_t ids[B * T], mask[B * T];
    int64_t y[B] = { 2, 0, 1 };
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int keep = t < T - 3 * b;           /* row b ends in 3b pads */
            ids[b * T + t] = keep ? 1 + (b * 31 + t * 7) % 96 : 0;
            mask[b * T + t] = keep;
        }
    for (int it = 0; it < STEPS; it++) {
        CHECK_OK(volt_step_begin(s, true, (uint64_t)it));
        volt_tensor *ti = volt_tensor_from_host(s, VOLT_I32, VOLT_SHAPE(B, T), ids);
        volt_tensor *tm = volt_tensor_from_host(s, VOLT_I32, VOLT_SHAPE(B, T), mask);
        volt_tensor *ty = volt_tensor_from_host(s, VOLT_I64, VOLT_SHAPE(B), y);
        volt_tensor *logits = volt_distilbert_forward(m, s, ti, tm);
        volt_tensor *loss = volt_cross_entropy(s, logits, ty);
        CHECK(loss && volt_step_backward(s, loss) == VOLT_OK, "%s step %d: %s", accelerator, it, volt_step_errmsg(s));
        if (!loss) break;
        CHECK_OK(volt_tensor_to_host(logits, r->logits[it]));
        r->loss[it] = (float)volt_tensor_item(loss);
        if (it == STEPS - 1) {   /* grads: the last step's on top of the earlier ones' (not zeroed) */
            for (int i = 0; i < volt_params_count(ps); i++) r->n_grads += volt_tensor_numel(volt_params_at(ps, i));
            r->dim = volt_params_at(ps, 0)->shape.d[1];
            r->grads = calloc((size_t)r->n_grads, sizeof(float));
            int64_t at = 0;
            for (int i = 0; i < volt_params_count(ps); i++) {
                volt_tensor *p = volt_params_at(ps, i);
                volt_tensor *g = volt_tensor_wrap(s, VOLT_F32, p->shape, p->grad);
                CHECK(g && p->grad && volt_tensor_to_host(g, r->grads + at) == VOLT_OK, "grad of %s", p->name);
                at += volt_tensor_numel(p);
            }
        }
        volt_step_end(s);
    }
    volt_step_destroy(s);
    volt_params_destroy(ps);
    volt_distilbert_destroy(m);
}

int main(void) {
    run a, b;
    one_run("cpu", &a);
    one_run("cpu-strict", &b);
    printf("devices: %s, %s; losses %.7g %.7g / %.7g %.7g\n", a.device, b.device, a.loss[0], a.loss[1], b.loss[0], b.loss[1]);
    CHECK(!strcmp(a.device, "cpu") && !strcmp(b.device, "cpu-strict"), "ran on cpu and cpu-strict (%s, %s)", a.device, b.device);
    CHECK(isfinite(a.loss[0]) && a.loss[0] > 0.f, "a real loss: %g", a.loss[0]);
    CHECK(!memcmp(a.logits, b.logits, sizeof a.logits), "logits differ between cpu and cpu-strict");
    CHECK(!memcmp(a.loss, b.loss, sizeof a.loss), "losses differ between cpu and cpu-strict");
    CHECK(a.grads && b.grads && a.n_grads == b.n_grads && a.n_grads > 0 &&
          !memcmp(a.grads, b.grads, sizeof(float) * (size_t)a.n_grads), "grads differ between cpu and cpu-strict");
    /* the pad row of the word embeddings (padding_idx 0) got no gradient; other rows did */
    float pad_max = 0.f, row1_max = 0.f;
    for (int64_t j = 0; a.grads && j < a.dim; j++) {
        pad_max = fmaxf(pad_max, fabsf(a.grads[j]));
        row1_max = fmaxf(row1_max, fabsf(a.grads[a.dim + j]));
    }
    CHECK(pad_max == 0.f && row1_max > 0.f, "word embedding pad row grad %g (want 0), row 1 %g (want > 0)", pad_max, row1_max);
    free(a.grads);
    free(b.grads);
    return vtest_finish();
}
