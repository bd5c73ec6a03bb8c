/* One DistilBERT training step on the cuda backend against the cpu backend (issue 11's
 * device check; docs/CUDA.md). Label gpu: without a cuda backend or device it exits 77.
 *
 * The same trainer run (seed, data, model) on both backends for one optimizer step, dropout
 * on everywhere (hidden 0.1, attention 0.1, classifier 0.2: the masks come from the same
 * Philox counters on both, so they must be the same masks). The module wraps the DistilBERT
 * module and keeps the logits; a callback keeps every unit's gradient before the optimizer
 * step. Checks, as max |cuda - cpu| / max |cpu| per tensor (each parameter's gradient, on at
 * least 1e-2 of the largest gradient's scale: see compare):
 *   32-true:    logits <= 1e-4, every unit's gradient <= 1e-3;
 *   bf16-mixed: logits and gradients within bf16's tolerance (3e-2), and the bf16 run
 *               really differs from the 32-true one (else the precision did nothing).
 * 2 layers, dim 128, 2 heads (head dim 64, the fused kernel's), T 40 with a padding tail. */
#include "vtest.h"
#include "core/internal.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#include "volt/distilbert.h"

enum { NS = 4, T = 40, VOCAB = 101, NCLS = 2 };
static int64_t IDS[NS * T], MASK[NS * T], Y[NS];

typedef struct {
    void *bert;
    float logits[NS * NCLS];
    bool have_logits;
    float *grads;          /* every unit's grad, units in order */
    size_t n_grads;
    int64_t par_off[128], par_n[128];   /* each parameter's grad in grads */
    char par_name[128][64];
    int n_par;
} probe;

static volt_status p_setup(void *self, volt_params *ps) { return volt_distilbert_ops.setup(((probe *)self)->bert, ps); }
static volt_status p_opt(void *self, volt_optim_setup *o) {
    return volt_distilbert_ops.configure_optimizers(((probe *)self)->bert, o);
}
static volt_status p_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    probe *p = self;
    (void)i;
    volt_tensor *logits = volt_distilbert_forward(p->bert, s, volt_batch_field(b, "input_ids"),
                                                  volt_batch_field(b, "attention_mask"));
    if (!logits) return volt_step_status(s);
    if (volt_tensor_numel(logits) == NS * NCLS) {
        volt_tensor_to_host(logits, p->logits);
        p->have_logits = true;
    }
    return volt_classification_step(s, logits, volt_batch_field(b, "y"), "train");
}
static const volt_module_ops probe_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "probe", .setup = p_setup,
                                           .configure_optimizers = p_opt, .training_step = p_train };

static volt_status keep_grads(void *self, volt_trainer *t) {
    probe *p = self;
    volt_params *ps = volt_trainer_params(t);
    if (!ps || p->grads) return VOLT_OK;
    size_t n = 0;
    for (int u = 0; u < ps->n_units && u < 64; u++) n += (size_t)ps->units[u]->numel;
    p->grads = malloc(sizeof(float) * n);
    if (!p->grads) return VOLT_ERR_NOMEM;
    size_t off = 0;
    for (int u = 0; u < ps->n_units && u < 64; u++) {
        const volt_unit *un = ps->units[u];
        volt__dev_d2h(ps->dev, p->grads + off, volt_unit_grad(un), sizeof(float) * (size_t)un->numel);
        for (int k = 0; k < un->n_params && p->n_par < 128; k++, p->n_par++) {
            const volt_tensor *t = un->params[k];
            p->par_off[p->n_par] = (int64_t)off + volt__param_rec(t)->offset;
            p->par_n[p->n_par] = volt_tensor_numel(t);
            snprintf(p->par_name[p->n_par], sizeof p->par_name[0], "%s", t->name ? t->name : "?");
        }
        off += (size_t)un->numel;
    }
    p->n_grads = off;
    return VOLT_OK;
}
static const volt_callback_ops keep_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "KeepGrads",
                                            .on_before_optimizer_step = keep_grads };

static bool run(const char *accel, const char *precision, volt_dataset *ds, probe *p) {
    memset(p, 0, sizeof *p);
    volt_distilbert_config dc;
    volt_distilbert_config_init(&dc);
    dc.vocab_size = VOCAB; dc.max_position = 64; dc.dim = 128; dc.n_layers = 2; dc.n_heads = 2; dc.hidden_dim = 256;
    dc.dropout = 0.1f; dc.attention_dropout = 0.1f; dc.seq_classif_dropout = 0.2f; dc.n_classes = NCLS;
    dc.lr = 1e-3f;
    CHECK_OK(volt_distilbert_create(&dc, &p->bert));
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.max_steps = 1;
    c.enable_checkpointing = c.enable_logger = c.enable_progress_bar = c.enable_model_summary = false;
    c.default_root_dir = getenv("VOLT_TEST_TMP") ? getenv("VOLT_TEST_TMP") : ".";
    c.accelerator = accel;
    c.precision = precision;
    c.num_sanity_val_steps = 0;
    c.seed = 5;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    CHECK(st == VOLT_OK, "create (%s): %s", accel, t ? volt_trainer_errmsg(t) : volt_status_str(st));
    bool ok = false;
    if (st == VOLT_OK) {
        CHECK_OK(volt_trainer_add_callback(t, &keep_ops, p));
        volt_loader_config lc;
        volt_loader_config_init(&lc);
        lc.batch_size = NS;
        volt_loader *l = NULL;
        CHECK_OK(volt_loader_create(&lc, ds, &l));
        st = volt_trainer_fit(t, &probe_ops, p, l, NULL, NULL);
        CHECK(st == VOLT_OK, "fit (%s, %s): %s", accel, precision, volt_trainer_errmsg(t));
        ok = st == VOLT_OK && p->have_logits && p->grads;
        volt_loader_destroy(l);
    }
    volt_trainer_destroy(t);
    volt_distilbert_destroy(p->bert);
    p->bert = NULL;
    return ok;
}

static double rel(const float *got, const float *want, size_t n, double floor) {
    double e = 0, sc = floor > 1e-30 ? floor : 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= e)) e = d;   /* NaN: fails */
        if (fabs(want[i]) > sc) sc = fabs(want[i]);
    }
    return e / sc;
}

/* cuda vs cpu at one precision; returns the cuda run (kept for the 32-true / bf16 contrast) */
static void compare(const char *precision, double tl, double tg, volt_dataset *ds, probe *cuda_out) {
    probe cpu, cu;
    bool okc = run("cpu", precision, ds, &cpu), okg = run("cuda", precision, ds, &cu);
    CHECK(okc && okg, "%s: both runs step (cpu %d, cuda %d)", precision, okc, okg);
    if (okc && okg) {
        double el = rel(cu.logits, cpu.logits, NS * NCLS, 0), worst = 0;
        /* k_lin.bias's gradient is exactly 0 (a bias added to every key shifts all of a
         * query's scores equally), so both backends give rounding noise there: each grad is
         * measured on the scale of the larger of its own and 1e-2 of the model's largest */
        double gmax = 0;
        for (size_t i = 0; i < cpu.n_grads; i++) gmax = fabs(cpu.grads[i]) > gmax ? fabs(cpu.grads[i]) : gmax;
        int wu = -1;
        CHECK(cu.n_par == cpu.n_par && cu.n_grads == cpu.n_grads, "%s: the same parameters", precision);
        for (int k = 0; k < cpu.n_par && k < cu.n_par; k++) {
            const size_t off = (size_t)cpu.par_off[k], n = (size_t)cpu.par_n[k];
            double e = rel(cu.grads + off, cpu.grads + off, n, 1e-2 * gmax);
            CHECK(e <= tg, "%s: grad of %s: rel err %.3e > %.0e", precision, cpu.par_name[k], e, tg);
            if (!(e <= worst)) { worst = e; wu = k; }
        }
        printf("distilbert step %s: logits rel err %.3e (tol %.0e), worst grad rel err %.3e in %s (tol %.0e), %d parameters\n",
               precision, el, tl, worst, wu >= 0 ? cpu.par_name[wu] : "-", tg, cpu.n_par);
        CHECK(el <= tl, "%s: logits rel err %.3e > %.0e", precision, el, tl);
    }
    free(cpu.grads);
    if (cuda_out) *cuda_out = cu;
    else free(cu.grads);
}

int main(void) {
    const volt_backend *be = volt__backend_find("cuda");
    if (!be) { printf("SKIP: volt was built without the cuda backend\n"); return 77; }
    if (be->device_count() == 0) { printf("SKIP: no CUDA device (driver and GPU needed)\n"); return 77; }
    for (int i = 0; i < NS; i++) {
        Y[i] = i % NCLS;
        const int len = T - 7 * i;   /* a padding tail: 40, 33, 26, 19 */
        for (int j = 0; j < T; j++) {
            IDS[i * T + j] = j < len ? 1 + (i * 37 + j * 11) % (VOCAB - 1) : 0;
            MASK[i * T + j] = j < len;
        }
    }
    volt_field bf[3] = { { "input_ids", VOLT_I64, VOLT_SHAPE(T) }, { "attention_mask", VOLT_I64, VOLT_SHAPE(T) },
                         { "y", VOLT_I64, VOLT_SCALAR } };
    const void *bd[3] = { IDS, MASK, Y };
    volt_dataset *ds = NULL;
    CHECK_OK(volt_dataset_from_arrays(3, bf, bd, NS, &ds));
    probe f32, b16;
    compare("32-true", 1e-4, 1e-3, ds, &f32);
    compare("bf16-mixed", 3e-2, 3e-2, ds, &b16);
    if (f32.grads && b16.grads && f32.n_grads == b16.n_grads) {
        double d = rel(b16.grads, f32.grads, f32.n_grads, 0);
        printf("distilbert step: bf16-mixed vs 32-true on cuda: grads rel diff %.3e\n", d);
        CHECK(d > 1e-6, "bf16-mixed gave 32-true's gradients (rel diff %.3e): the precision did nothing", d);
    }
    free(f32.grads);
    free(b16.grads);
    volt_dataset_destroy(ds);
    return vtest_finish();
}
