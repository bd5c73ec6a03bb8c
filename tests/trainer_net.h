/* tests/trainer_net.h — the small MLP module with dropout (recording its hooks), its data
 * (203 samples of 9 features, 3 classes), loaders and a trainer, shared by test_trainer.c and
 * test_interrupt.c. */
#ifndef VOLT_TESTS_TRAINER_NET_H
#define VOLT_TESTS_TRAINER_NET_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"

/* ---- a small MLP module with dropout, recording its hooks ------------------------------ */
typedef struct {
    int in, hidden, out;
    float dropout;
    volt_tensor *w1, *b1, *w2, *b2;
    int64_t steps_run;    /* training_step calls */
    char *log;            /* hook log (may be NULL) */
    size_t cap;
} net;

static void rec(char *log, size_t cap, const char *what) {
    if (log) snprintf(log + strlen(log), cap - strlen(log), "%s ", what);
}

static volt_status net_setup(void *self, volt_params *ps) {
    net *m = self;
    VOLT_TRY(volt_params_unit(ps, "fc1"));
    VOLT_TRY(volt_param_new(ps, "fc1.weight", VOLT_SHAPE(m->hidden, m->in), VOLT_INIT_TORCH_LINEAR, &m->w1));
    VOLT_TRY(volt_param_new(ps, "fc1.bias", VOLT_SHAPE(m->hidden), VOLT_INIT_ZEROS, &m->b1));
    VOLT_TRY(volt_params_unit(ps, "fc2"));
    VOLT_TRY(volt_param_new(ps, "fc2.weight", VOLT_SHAPE(m->out, m->hidden), VOLT_INIT_TORCH_LINEAR, &m->w2));
    return volt_param_new(ps, "fc2.bias", VOLT_SHAPE(m->out), VOLT_INIT_ZEROS, &m->b2);
}

static volt_tensor *net_fwd(net *m, volt_step *s, const volt_batch *b) {
    volt_tensor *h = volt_relu(s, volt_linear(s, volt_batch_x(b), m->w1, m->b1));
    if (m->dropout > 0) h = volt_dropout(s, h, m->dropout);
    return volt_linear(s, h, m->w2, m->b2);
}

static volt_status net_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    net *m = self;
    rec(m->log, m->cap, "training_step");
    m->steps_run++;
    volt_tensor *loss = volt_cross_entropy(s, net_fwd(m, s, b), volt_batch_y(b));
    volt_log(s, "train_loss", loss, VOLT_LOG_STEP | VOLT_LOG_EPOCH | VOLT_LOG_PROG_BAR);
    return volt_step_set_loss(s, loss);
}

static volt_status net_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    net *m = self;
    rec(m->log, m->cap, "validation_step");
    volt_tensor *logits = net_fwd(m, s, b);
    volt_log(s, "val_loss", volt_cross_entropy(s, logits, volt_batch_y(b)), 0);
    return volt_log(s, "val_acc", volt_accuracy(s, logits, volt_batch_y(b)), VOLT_LOG_PROG_BAR);
}

static volt_status net_opt(void *self, volt_optim_setup *o) {
    o->optimizer.kind = VOLT_OPTIM_ADAMW;
    o->optimizer.lr = 5e-3f;
    o->optimizer.weight_decay = 0.01f;
    o->use_scheduler = true;
    o->scheduler.kind = VOLT_SCHED_LINEAR;
    o->scheduler.warmup_steps = 5;
    o->scheduler.total_steps = 200;
    return VOLT_OK;
}

#define MREC(hook) static volt_status m_##hook(void *self, volt_trainer *t) { net *m = self; rec(m->log, m->cap, #hook "(mod)"); return VOLT_OK; }
MREC(on_fit_start) MREC(on_fit_end) MREC(on_train_epoch_start) MREC(on_train_epoch_end)
MREC(on_validation_epoch_start) MREC(on_validation_epoch_end) MREC(on_before_optimizer_step)
static volt_status m_on_train_batch_start(void *self, volt_trainer *t, const volt_batch *b, int64_t i) { net *m = self; rec(m->log, m->cap, "on_train_batch_start(mod)"); return VOLT_OK; }
static volt_status m_on_train_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) { net *m = self; rec(m->log, m->cap, "on_train_batch_end(mod)"); return VOLT_OK; }

static const volt_module_ops net_ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "net", .setup = net_setup, .configure_optimizers = net_opt,
    .training_step = net_train, .validation_step = net_val, .test_step = net_val,
    .on_fit_start = m_on_fit_start, .on_fit_end = m_on_fit_end, .on_train_epoch_start = m_on_train_epoch_start,
    .on_train_epoch_end = m_on_train_epoch_end, .on_validation_epoch_start = m_on_validation_epoch_start,
    .on_validation_epoch_end = m_on_validation_epoch_end, .on_train_batch_start = m_on_train_batch_start,
    .on_train_batch_end = m_on_train_batch_end, .on_before_optimizer_step = m_on_before_optimizer_step,
};

/* ---- data ---------------------------------------------------------------------------------- */
enum { NS = 203, IN = 9, NC = 3 };
static float X[NS * IN];
static int64_t Y[NS];

static volt_dataset *make_data(void) {
    for (int i = 0; i < NS; i++) {
        Y[i] = (i * 5 + i / 7) % NC;
        for (int k = 0; k < IN; k++) X[i * IN + k] = sinf((float)(i * IN + k)) + (k % NC == Y[i] ? 1.f : 0.f);
    }
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(IN) }, { "y", VOLT_I64, VOLT_SCALAR } };
    const void *d[2] = { X, Y };
    volt_dataset *ds = NULL;
    CHECK_OK(volt_dataset_from_arrays(2, f, d, NS, &ds));
    return ds;
}

static volt_loader *make_loader(volt_dataset *ds, int64_t bs, bool shuffle, int workers) {
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = bs;
    lc.shuffle = shuffle;
    lc.seed = 17;
    lc.num_workers = workers;
    volt_loader *l = NULL;
    CHECK_OK(volt_loader_create(&lc, ds, &l));
    return l;
}

/* checkpointing: the default ModelCheckpoint (or one the test adds) may run */
static volt_trainer *make_trainer_ckpt(int64_t epochs, const char *root, bool checkpointing) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.max_epochs = epochs;
    c.enable_checkpointing = checkpointing;
    c.enable_logger = false;
    c.enable_progress_bar = false;
    c.default_root_dir = root;
    c.accumulate_grad_batches = 2;
    c.gradient_clip_val = 0.5f;
    c.seed = 3;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    return t;
}
static volt_trainer *make_trainer(int64_t epochs, const char *root) { return make_trainer_ckpt(epochs, root, false); }

/* Every parameter value, in order (device memory: read through copies). */
static float *snapshot(volt_trainer *t, int64_t *n) {
    volt_params *ps = volt_trainer_params(t);
    *n = volt_params_numel(ps);
    float *out = malloc(sizeof(float) * (size_t)*n), *o = out;
    for (int i = 0; i < volt_params_count(ps); i++) {
        volt_tensor *p = volt_params_at(ps, i);
        CHECK_OK(volt_tensor_to_host(p, o));   /* device memory: read through a copy */
        o += volt_tensor_numel(p);
    }
    return out;
}

#endif
