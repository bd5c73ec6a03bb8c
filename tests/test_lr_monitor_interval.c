/* LearningRateMonitor's logging_interval (Lightning's "step" / "epoch" / None) and its logger
 * check (callbacks/lr_monitor.c), end to end through the trainer and the default loggers.
 *
 * A 4 -> 1 linear model, SGD lr 0.1, 32 rows in batches of 8 (4 optimizer steps an epoch), 3
 * epochs, log_every_n_steps 1 (a metrics.csv row after every step, one at each epoch's end).
 * Schedulers: StepLR per step (step_size 2, gamma 0.5: step k uses 0.1 * 0.5^(k // 2)) and StepLR
 * per epoch (step_size 1, gamma 0.5: epoch e uses 0.1 * 0.5^e). Checked from metrics.csv: which
 * rows carry lr-SGD (step rows: train_loss_step; epoch rows: train_loss_epoch) and its values;
 * from the TensorBoard event file: how many lr-SGD scalars; from a probe: the lr metric the
 * other callbacks see during each batch.
 * - "epoch": one lr per epoch, the epoch's starting lr, in the epoch row (with a step scheduler:
 *   0.1, 0.025, 0.00625), none in step rows; also with a validation after each epoch (the epoch
 *   row is then written from what the validation's start kept) and in TensorBoard (3 scalars);
 *   during an epoch the metric stays the epoch's.
 * - None: a per-step scheduler's lr in every step row (12 values), an epoch scheduler's once per
 *   epoch in the epoch rows (0.1, 0.05, 0.025), no scheduler: every step row (volt logs no
 *   epoch duplicate; docs/CALLBACKS.md).
 * - "step" with an epoch scheduler: every step row, the epoch's lr.
 * - The default (volt_add_lr_monitor, _config_init) is None; a version-1 config (an older
 *   caller's shorter struct) logs every step as it did; an unknown interval is refused.
 * - No logger (enable_logger false, no *Logger callback): fit fails at its start with
 *   VOLT_ERR_INVALID_ARG naming LearningRateMonitor and the missing logger, before any training
 *   step; a CSVLogger added by hand, or fast_dev_run, counts as a logger. */
#include <stddef.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"

enum { NS = 32, BS = 8, SPE = NS / BS, EPOCHS = 3 };
enum { SCHED_NONE, SCHED_PER_STEP, SCHED_PER_EPOCH };

static volt_dataset *DS;

typedef struct net { vtest_lin4 lin; int sched; int64_t train_steps; } net;

static volt_status net_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    net *m = self;
    m->train_steps++;
    volt_tensor *loss = vtest_lin4_loss(self, s, b);
    volt_log(s, "train_loss", loss, VOLT_LOG_STEP | VOLT_LOG_EPOCH);
    return volt_step_set_loss(s, loss);
}
static volt_status net_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    return volt_log(s, "val_loss", vtest_lin4_loss(self, s, b), VOLT_LOG_EPOCH);
}
static volt_status net_opt(void *self, volt_optim_setup *o) {
    const net *m = self;
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.1f;
    if (m->sched == SCHED_NONE) return VOLT_OK;
    o->use_scheduler = true;
    o->scheduler.kind = VOLT_SCHED_STEP;
    o->scheduler.gamma = 0.5f;
    o->scheduler.step_size = m->sched == SCHED_PER_STEP ? 2 : 1;
    o->scheduler.interval = m->sched == SCHED_PER_STEP ? VOLT_SCHED_EVERY_STEP : VOLT_SCHED_EVERY_EPOCH;
    return VOLT_OK;
}
static const volt_module_ops net_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "lin4", .setup = vtest_lin4_setup,
                                         .configure_optimizers = net_opt, .training_step = net_train,
                                         .validation_step = net_val };

/* ---- a probe: the "lr-SGD" metric as the callbacks see it at each train batch start ---------------- */
typedef struct probe { int n; double lr[64]; } probe;
static volt_status probe_batch_start(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b; (void)i;
    probe *p = self;
    double v = NAN;
    if (!volt_trainer_metric(t, "lr-SGD", &v)) v = NAN;
    if (p->n < 64) p->lr[p->n++] = v;
    return VOLT_OK;
}
static const volt_callback_ops probe_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "LrProbe",
                                             .on_train_batch_start = probe_batch_start, .destroy = NULL };

/* ---- metrics.csv -------------------------------------------------------------------------------- */
typedef struct lr_cell { int64_t epoch, step; double lr; bool epoch_row; } lr_cell;
typedef struct run_out { int n; lr_cell c[64]; int tb_scalars; volt_status st; char err[600]; } run_out;

/* The cells of one CSV line (no quoting in these files' names and numbers): pointers into line. */
static int split(char *line, char **cells, int max) {
    int n = 0;
    for (char *p = line; n < max;) {
        cells[n++] = p;
        char *c = strchr(p, ',');
        if (!c) break;
        *c = 0;
        p = c + 1;
    }
    return n;
}

static int col(char **h, int nh, const char *name) {
    for (int i = 0; i < nh; i++)
        if (!strcmp(h[i], name)) return i;
    return -1;
}

static void read_csv(const char *path, run_out *o) {
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "no %s", path);
    if (!f) return;
    static char head[4096], line[4096];
    char *h[64], *c[64];
    int nh = fgets(head, sizeof head, f) ? split(strtok(head, "\r\n"), h, 64) : 0;
    const int ce = col(h, nh, "epoch"), cs = col(h, nh, "step"), cl = col(h, nh, "lr-SGD"), cep = col(h, nh, "train_loss_epoch");
    CHECK(ce == 0 && cs == 1 && cep > 1, "metrics.csv header: epoch %d, step %d, train_loss_epoch %d", ce, cs, cep);
    while (cl >= 0 && fgets(line, sizeof line, f)) {
        char *ln = strtok(line, "\r\n");
        if (!ln) continue;
        int k = split(ln, c, 64);
        if (cl >= k || !c[cl][0] || o->n == 64) continue;
        o->c[o->n++] = (lr_cell){ .epoch = atoll(c[ce]), .step = atoll(c[cs]), .lr = atof(c[cl]),
                                  .epoch_row = cep < k && c[cep][0] };
    }
    fclose(f);
}

/* "lr-SGD" tags in the TensorBoard event file of dir (each scalar event names its tag once). */
static int tb_count(const char *dir) {
    char cmd[1400], path[1024] = "";
    snprintf(cmd, sizeof cmd, "ls '%s'/events.out.tfevents.* 2>/dev/null | head -1", dir);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    if (!fgets(path, sizeof path, p)) path[0] = 0;
    pclose(p);
    path[strcspn(path, "\n")] = 0;
    FILE *f = path[0] ? fopen(path, "rb") : NULL;
    if (!f) return -1;
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    int count = 0;
    for (size_t i = 0; i + 6 <= n; i++) count += !memcmp(buf + i, "lr-SGD", 6) && (i + 6 == n || buf[i + 6] != '-');
    return count;
}

typedef struct run_opts {
    int sched;
    bool with_val, logger, csv_by_hand;
    int64_t fast_dev_run;
    const volt_lr_monitor_config *cfg;   /* NULL: volt_add_lr_monitor */
    probe *probe;
} run_opts;

static void run(const char *name, const run_opts *ro, run_out *o) {
    memset(o, 0, sizeof *o);
    char root[1024];
    snprintf(root, sizeof root, "%s/%s", vtest_tmpdir(), name);
    vtest_fresh_dir(root);
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = EPOCHS;
    c.enable_logger = ro->logger;
    c.log_every_n_steps = 1;
    c.fast_dev_run = ro->fast_dev_run;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    if (!t) return;
    if (ro->cfg) CHECK_OK(volt_add_lr_monitor_ex(t, ro->cfg));
    else CHECK_OK(volt_add_lr_monitor(t));
    if (ro->csv_by_hand) CHECK_OK(volt_add_csv_logger(t));
    if (ro->probe) CHECK_OK(volt_trainer_add_callback(t, &probe_ops, ro->probe));
    net m = { .sched = ro->sched };
    volt_loader *tl = vtest_loader(DS, BS, false), *vl = ro->with_val ? vtest_loader(DS, BS, false) : NULL;
    o->st = volt_trainer_fit(t, &net_ops, &m, tl, vl, NULL);
    snprintf(o->err, sizeof o->err, "%s", volt_trainer_errmsg(t));
    if (o->st == VOLT_ERR_INVALID_ARG) CHECK(m.train_steps == 0, "%s: %lld training steps ran before the logger check", name,
                                              (long long)m.train_steps);
    if (o->st == VOLT_OK && volt_trainer_log_dir(t) && !ro->fast_dev_run) {
        char path[1200];
        snprintf(path, sizeof path, "%s/metrics.csv", volt_trainer_log_dir(t));
        read_csv(path, o);
        o->tb_scalars = ro->logger ? tb_count(volt_trainer_log_dir(t)) : -1;
    }
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
    volt_trainer_destroy(t);
}

static double step_lr(int64_t k) { return 0.1 * pow(0.5, (double)(k / 2)); }   /* StepLR per step */
static double epoch_lr(int64_t e) { return 0.1 * pow(0.5, (double)e); }        /* StepLR per epoch */

/* Exactly one lr per epoch, in the epoch rows (step = the epoch's last step), the values want[e]. */
static void expect_epochs(const char *what, const run_out *o, const double *want) {
    CHECK(o->st == VOLT_OK, "%s: fit: %s", what, o->err);
    CHECK(o->n == EPOCHS, "%s: %d lr-SGD cells in metrics.csv, want %d (one per epoch)", what, o->n, EPOCHS);
    for (int i = 0; i < o->n && i < EPOCHS; i++)
        CHECK(o->c[i].epoch_row && o->c[i].epoch == i && o->c[i].step == (int64_t)(i + 1) * SPE - 1 &&
                  fabs(o->c[i].lr - want[i]) <= 1e-6 * want[i],
              "%s: lr cell %d: epoch %lld step %lld lr %.9g (%s row), want epoch %d step %d lr %.9g in the epoch row", what, i,
              (long long)o->c[i].epoch, (long long)o->c[i].step, o->c[i].lr, o->c[i].epoch_row ? "an epoch" : "a step", i,
              (i + 1) * SPE - 1, want[i]);
}

/* One lr per optimizer step, in the step rows, lr(k) at step k. */
static void expect_steps(const char *what, const run_out *o, double (*lr)(int64_t)) {
    CHECK(o->st == VOLT_OK, "%s: fit: %s", what, o->err);
    CHECK(o->n == EPOCHS * SPE, "%s: %d lr-SGD cells in metrics.csv, want %d (one per step)", what, o->n, EPOCHS * SPE);
    for (int i = 0; i < o->n; i++)
        CHECK(!o->c[i].epoch_row && o->c[i].step == i && fabs(o->c[i].lr - lr(i)) <= 1e-6 * lr(i),
              "%s: lr cell %d: step %lld lr %.9g (%s row), want step %d lr %.9g in a step row", what, i,
              (long long)o->c[i].step, o->c[i].lr, o->c[i].epoch_row ? "an epoch" : "a step", i, lr(i));
}

static double const_lr(int64_t k) { (void)k; return 0.1; }
static double epoch_of_step_lr(int64_t k) { return epoch_lr(k / SPE); }

static void test_epoch_interval(void) {
    volt_lr_monitor_config lc;
    volt_lr_monitor_config_init(&lc);
    lc.logging_interval = VOLT_LR_LOG_EPOCH;
    run_out o;
    probe pr = { 0 };
    /* a per-step scheduler: the epoch's starting lr, steps 0, 4, 8 */
    run("epoch_stepsched", &(run_opts){ .sched = SCHED_PER_STEP, .logger = true, .cfg = &lc, .probe = &pr }, &o);
    const double want_s[EPOCHS] = { step_lr(0), step_lr(4), step_lr(8) };
    expect_epochs("epoch, per-step scheduler", &o, want_s);
    CHECK(o.tb_scalars == EPOCHS, "epoch, per-step scheduler: %d lr-SGD scalars in TensorBoard, want %d", o.tb_scalars, EPOCHS);
    CHECK(pr.n == EPOCHS * SPE, "probe: %d batches", pr.n);
    for (int i = 0; i < pr.n; i++)   /* the epoch's value all epoch long (not the step's) */
        CHECK(fabs(pr.lr[i] - want_s[i / SPE]) <= 1e-6 * want_s[i / SPE], "epoch: batch %d sees lr-SGD %.9g, want the epoch's %.9g", i, pr.lr[i],
              want_s[i / SPE]);
    /* with a validation after every epoch: the epoch row still has it (CSV) and TensorBoard's
     * epoch scalars, written at the validation's start, too */
    run("epoch_val", &(run_opts){ .sched = SCHED_PER_STEP, .logger = true, .with_val = true, .cfg = &lc }, &o);
    expect_epochs("epoch with validation", &o, want_s);
    CHECK(o.tb_scalars == EPOCHS, "epoch with validation: %d lr-SGD scalars in TensorBoard, want %d", o.tb_scalars, EPOCHS);
    /* an epoch scheduler */
    run("epoch_epochsched", &(run_opts){ .sched = SCHED_PER_EPOCH, .logger = true, .with_val = true, .cfg = &lc }, &o);
    const double want_e[EPOCHS] = { epoch_lr(0), epoch_lr(1), epoch_lr(2) };
    expect_epochs("epoch, epoch scheduler", &o, want_e);
    /* a CSVLogger added by hand (enable_logger false): a logger, and it gets the epoch rows too */
    run("epoch_byhand", &(run_opts){ .sched = SCHED_PER_EPOCH, .csv_by_hand = true, .cfg = &lc }, &o);
    expect_epochs("epoch, CSVLogger added by hand", &o, want_e);
}

static void test_none_interval(void) {
    run_out o;
    volt_lr_monitor_config lc;
    volt_lr_monitor_config_init(&lc);
    CHECK(lc.version == VOLT_LR_MONITOR_CONFIG_VERSION && lc.logging_interval == VOLT_LR_LOG_AUTO &&
              !lc.log_momentum && !lc.log_weight_decay,
          "_init: Lightning's defaults (logging_interval None)");
    /* volt_add_lr_monitor: None */
    run("none_stepsched", &(run_opts){ .sched = SCHED_PER_STEP, .logger = true }, &o);
    expect_steps("None, per-step scheduler", &o, step_lr);
    probe pr = { 0 };
    run("none_epochsched", &(run_opts){ .sched = SCHED_PER_EPOCH, .logger = true, .with_val = true, .probe = &pr }, &o);
    const double want_e[EPOCHS] = { epoch_lr(0), epoch_lr(1), epoch_lr(2) };
    expect_epochs("None, epoch scheduler", &o, want_e);
    for (int i = 0; i < pr.n; i++)
        CHECK(fabs(pr.lr[i] - want_e[i / SPE]) <= 1e-6 * want_e[i / SPE], "None, epoch scheduler: batch %d sees %.9g, want %.9g", i, pr.lr[i],
              want_e[i / SPE]);
    run("none_nosched", &(run_opts){ .sched = SCHED_NONE, .logger = true, .cfg = &lc }, &o);
    expect_steps("None, no scheduler", &o, const_lr);
}

static void test_step_interval(void) {
    run_out o;
    volt_lr_monitor_config lc;
    volt_lr_monitor_config_init(&lc);
    lc.logging_interval = VOLT_LR_LOG_STEP;
    run("step_epochsched", &(run_opts){ .sched = SCHED_PER_EPOCH, .logger = true, .with_val = true, .cfg = &lc }, &o);
    expect_steps("step, epoch scheduler", &o, epoch_of_step_lr);
    /* a version-1 caller: its struct ends before logging_interval (allocated that short, so a read
     * past it is a sanitizer's error): it logs every step, as version 1 did */
    const size_t v1_size = offsetof(volt_lr_monitor_config, logging_interval);
    volt_lr_monitor_config old = lc;
    old.version = 1;
    old.logging_interval = VOLT_LR_LOG_EPOCH;   /* not copied: past the version-1 struct */
    unsigned char *v1 = malloc(v1_size);
    memcpy(v1, &old, v1_size);
    run("step_v1", &(run_opts){ .sched = SCHED_PER_EPOCH, .logger = true, .cfg = (const volt_lr_monitor_config *)(void *)v1 }, &o);
    expect_steps("version-1 config, epoch scheduler", &o, epoch_of_step_lr);
    free(v1);
    /* an unknown interval */
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    lc.logging_interval = (volt_lr_logging_interval)7;
    volt_status st = volt_add_lr_monitor_ex(t, &lc);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "logging_interval"), "interval 7: %s, '%s'",
          volt_status_str(st), volt_trainer_errmsg(t));
    lc.logging_interval = VOLT_LR_LOG_STEP;
    lc.version = VOLT_LR_MONITOR_CONFIG_VERSION + 1;
    st = volt_add_lr_monitor_ex(t, &lc);
    CHECK(st == VOLT_ERR_VERSION, "a config from a newer library: %s", volt_status_str(st));
    CHECK(volt_trainer_num_callbacks(t) == 0, "refused configs added %d callbacks", volt_trainer_num_callbacks(t));
    volt_trainer_destroy(t);
}

static void test_no_logger(void) {
    run_out o;
    for (int i = 0; i < 2; i++) {
        volt_lr_monitor_config lc;
        volt_lr_monitor_config_init(&lc);
        lc.logging_interval = i ? VOLT_LR_LOG_EPOCH : VOLT_LR_LOG_AUTO;
        run("nologger", &(run_opts){ .sched = SCHED_PER_STEP, .logger = false, .cfg = &lc }, &o);
        CHECK(o.st == VOLT_ERR_INVALID_ARG && strstr(o.err, "LearningRateMonitor") && strstr(o.err, "no logger"),
              "no logger (interval %d): %s, '%s'", (int)lc.logging_interval, volt_status_str(o.st), o.err);
    }
    /* fast_dev_run: Lightning's DummyLogger is a logger; nothing is written */
    run("fastdev", &(run_opts){ .sched = SCHED_PER_STEP, .logger = false, .fast_dev_run = 2 }, &o);
    CHECK(o.st == VOLT_OK, "fast_dev_run without a logger: %s", o.err);
}

int main(void) {
    DS = vtest_rows4(NS);
    if (!DS) return vtest_finish();
    test_epoch_interval();
    test_none_interval();
    test_step_interval();
    test_no_logger();
    volt_dataset_destroy(DS);
    return vtest_finish();
}
