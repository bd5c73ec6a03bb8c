/* Private state of the trainer, shared by the files in trainer/. */
#ifndef VOLT_TRAINER_INTERNAL_H
#define VOLT_TRAINER_INTERNAL_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include "volt/trainer.h"
#include "core/internal.h"
#include "core/clock.h"
#include "strategies/strategy.h"
#include "precision/precision.h"
#include "volt/safetensors.h"

/* FNV-1a over n bytes, continuing from h (start: VOLT__FNV_START): the fingerprints ranks compare
 * (the model and settings at set-up, the checkpoint each opened). */
#define VOLT__FNV_START 0xcbf29ce484222325ull
static inline uint64_t volt__fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
/* ... over a string and its NUL (NULL as ""), so "ab","c" and "a","bc" differ */
static inline uint64_t volt__fnv_str(uint64_t h, const char *s) { return volt__fnv(h, s ? s : "", s ? strlen(s) + 1 : 1); }
#include "core/device.h"

#define VOLT_MAX_CALLBACKS 32
#define VOLT_MAX_METRICS 256   /* 16 evaluation loaders x 8 metrics each, and the training's */

/* from_module: added by the module's configure_callbacks (destroyed when a later call's replace it) */
typedef struct volt_cb { const volt_callback_ops *ops; void *self; bool from_module; } volt_cb;

typedef struct volt_metric {
    char name[128];        /* <= 80 bytes as logged, "_step" / "_epoch", "/dataloader_idx_N" */
    double value;
    unsigned flags;
    bool fresh;            /* updated since the last clear point (loggers read these) */
} volt_metric;

typedef struct volt_accum {   /* an epoch-level metric being averaged */
    char name[128];
    volt_stage stage;
    bool in_fit_val;         /* validation inside fit vs. standalone */
    double sum, weight;      /* exact: integer counts (sum of hits, weight = rows), so the mean
                                is the same number however batches and ranks split them */
    bool exact;
    unsigned flags;
} volt_accum;

typedef struct volt_confusion_acc {   /* a stage's confusion matrix: counts[true * C + pred] */
    char prefix[32];         /* "val", "test": metrics <prefix>_precision/_recall/_f1; of one of
                                several evaluation loaders "val/dataloader_idx_1": metrics
                                val_precision/dataloader_idx_1, ... */
    volt_stage stage;
    int n_classes;
    int64_t *counts;         /* C*C; grown when a batch brings more classes */
    bool used;               /* counted since the last epoch end */
} volt_confusion_acc;
#define VOLT_MAX_CONFUSION 16

struct volt_trainer {
    volt_trainer_config cfg;
    char *root_dir, *logger_name, *precision, *strategy_name, *clip_algo, *run_config_json, *run_fingerprint;
    char errmsg[1024];
    bool err_agreed;           /* errmsg is a verdict every rank reports alike (volt__agree_status) */
    volt_cb cbs[VOLT_MAX_CALLBACKS];
    int n_cbs;
    bool defaults_added;
    /* Attaches the default callbacks; volt_trainer_create installs volt__add_default_callbacks. */
    volt_status (*add_defaults)(volt_trainer *t);
    /* Orders the callbacks as the defaults are (volt__order_callbacks), after configure_callbacks */
    volt_status (*order_callbacks)(volt_trainer *t);
    /* the trainer's callbacks a module's configure_callbacks replaced: idle, destroyed with t */
    volt_cb *idle_cbs;
    int n_idle_cbs;
    /* configure_callbacks running: a resolver a callback sets goes to pending_resolver */
    bool configuring_cbs, has_pending_resolver;
    int cbs_first_module;      /* while configuring: the index of the first callback the module added */
    int call_depth;            /* public calls running (a hook may make one inside another) */
    int64_t call_acc;          /* accumulate_grad_batches when the outermost call began: what it
                                  goes back to when that call ends (a schedule's factor is the call's) */
    volt_ckpt_resolver pending_resolver;

    /* model */
    const volt_module_ops *mops;
    const volt_datamodule_ops *dm;   /* the datamodule of the running *_dm call (its state in checkpoints) */
    void *dm_self;
    void *module;
    volt_params *ps;
    bool ck_weights_only;      /* the save in progress leaves the optimizer out (VOLT_CKPT_WEIGHTS_ONLY) */
    const void *lost_module;   /* a module another trainer took over (setup.c): its weights went there */
    bool weights_touched;      /* ps holds trained or loaded weights, not just the inits (setup.c) */
    bool weights_pending;      /* ps's inits were skipped for a load that has not happened yet */
    double max_time_s;         /* cfg.max_time parsed; 0 = none */
    double train_t0;           /* when this fit's training loop started, less the time a resumed
                                  checkpoint had trained (volt.fit_time_s) */
    double fit_time_loaded;    /* that time, from the checkpoint a fit resumed */
    bool min_note_printed;     /* "min_epochs/min_steps not met" said once per fit */
    bool time_note_printed;    /* "max_time reached" said once per fit */
    bool capture_loss;         /* lr_find: the training step's loss read back into captured_loss */
    double captured_loss;
    bool track_step_loss;      /* volt_trainer_track_step_loss: each training step stages its loss (metrics.c) */
    bool step_loss_set;        /* step_loss is the last training batch's */
    double step_loss;
    volt_step *step;
    volt_optimizer *opt;
    volt_scheduler *sched;
    volt_optim_setup osetup;
    /* weight averaging (trainer/weight_average.c): asked for by the WeightAveraging callback
     * before fit, enabled on every optimizer setup_optim creates */
    volt_optim_average avg_mode;
    float avg_decay;
    bool avg_swapped;          /* the values hold the average now, the state the current weights */

    /* loop state (checkpointed) */
    int64_t epoch, global_step, batch_in_epoch, micro_step;
    bool epoch_sched_done, epoch_val_done, epoch_done;
    int64_t num_train_batches;
    int64_t total_batches;           /* train batches this fit ran, across epochs (checkpointed; -1:
                                        a checkpoint without it, counted from epoch and batch) */
    bool val_pending;                /* check_val_every_n_epoch = 0: the count fell due inside the
                                        accumulation window running (validates at its end) */
    /* A checkpoint written in a batch's end hooks, or in what follows them before the next batch
     * (loop.c batch_tail: the due validation, the step-interval plateau step, the stop vote),
     * resumes with what was left of that (checkpointed: volt.epoch_flags) */
    bool tail_pending;               /* between on_train_batch_end and the end of batch_tail */
    bool val_due;                    /* the mid-epoch validation after this batch is due ... */
    bool val_due_ran;                /* ... and reached its end hooks (it does not run again) */
    bool tail_validated;             /* a resumed tail's: that validation ran before the checkpoint (a
                                        stop there does not validate again at the epoch's end) */
    bool batch_stepped;              /* this batch took an optimizer step the plateau has not seen */
    /* The running fit's train loader as the batch index reads it: batch size, samples, ranks,
     * shuffled (checkpointed as volt.train_loader); ck_train: a resumed checkpoint's, when it had
     * them (a mid-epoch resume over other ones warns: the epoch's remaining samples differ) */
    int64_t train_desc[4], ck_train[4];
    bool ck_train_have;
    int64_t est_steps;               /* estimated_stepping_batches of this fit; -1 before one */
    int64_t num_eval_batches;  /* of the running validation/test/predict loop, else -1 */
    int64_t eval_span;         /* of its first batches, how many every rank runs (eval_loop.c) */
    int64_t eval_idx;          /* the batch it runs */
    int n_eval_dl;             /* the loaders of the running evaluation loop (0 outside one) */
    int eval_dl;               /* the one it runs: with several, metrics are logged with the
                                  suffix "/dataloader_idx_<eval_dl>" (volt__metric_dl_suffix) */

    volt_stage stage;
    volt_trainer_fn fn;        /* the public call running (volt_trainer_state_fn), NONE between */
    int64_t decisions;         /* collective.c's exchanges so far (reduce_boolean_decision, broadcast_bool): tests count them */
    bool sanity, should_stop, fitting;
    bool plateau_warned;       /* ReduceLROnPlateau's missing monitor (strict = false) said once */
    bool in_clip_hook;         /* the module's configure_gradient_clipping runs (volt_trainer_clip_gradients) */
    int64_t cur_batch_size;

    volt_metric metrics[VOLT_MAX_METRICS];
    int n_metrics;
    volt_accum accums[VOLT_MAX_METRICS];
    int n_accums;
    volt_confusion_acc confusion[VOLT_MAX_CONFUSION];
    int n_confusion;

    char *log_dir;
    volt_ckpt_resolver resolver;
    bool has_resolver;
    char *last_cands[16];      /* volt_trainer_add_last_candidate: files "last" also weighs */
    int n_last_cands;
    char last_pick[4096];      /* ckpt_path "last": the candidate picked (trainer/checkpoint.c) */
    char resolved_path[4096];  /* ckpt_path resolved on rank 0, broadcast to every rank */
    int rank, world;
    volt_strategy *strategy;
    volt_precision *prec;      /* cfg.precision (precision/); owned by the strategy once it exists */

    /* device (issue 10): cfg.accelerator resolved at create; params, the step and batches live on it */
    volt_device *dev;
    char *accelerator;
    /* transfer_batch_to_device (transfer.c): the device copy of the loader's host batch, in
     * buffers grown on the first batches and reused (no allocation in the steady state) */
    volt_batch dev_batch;
    void *dev_buf[VOLT_MAX_FIELDS];
    size_t dev_cap[VOLT_MAX_FIELDS];
    /* logged tensors (metrics.c): each volt_log / classification step copies its values
     * device->device into log_dev; the loop reads them all with one device->host copy per step */
    void *log_dev;
    unsigned char *log_host;
    size_t log_cap, log_used;
    struct volt_pending_log *pending;
    int n_pending, cap_pending;
    bool in_step;              /* a step function or its backward runs: logs are queued */

    /* compile (compile.c): one entry per batch shape seen, a graph for up to
     * VOLT_COMPILE_MAX_GRAPHS of them */
    char *matmul_precision;
    char *max_time;             /* cfg.max_time's copy */
    char *reduce_dtype, *comm;   /* owned copies of cfg.strategy_reduce_dtype / strategy_comm (NULL stays NULL):
                                   the loggers read the config at fit start */
    struct volt_compiled *compiled;
    int n_compiled;
    int64_t compile_eager, compile_captured, compile_replayed;
    bool graph_owner;                /* registered with the comm layer (volt__comm_graph_owner_add): a comm
                                        that aborts destroys this trainer's graphs first */
    const char *compile_phase; /* what runs while a step is being captured (error messages) */
    struct volt_prof *prof;    /* profiler = "simple" (trainer/profiler.c), else NULL */
    int interrupted;           /* the signal that stopped the last run (signals.c), 0 = none */
    bool interrupted_local;    /* it was received by this process (else another rank's) */
    /* the folders this fit will write, named by callbacks in on_fit_start
     * (volt_trainer_check_writable) and checked once every on_fit_start has run (write_check.c) */
    struct volt_dir_check *dir_checks;
    int n_dir_checks, cap_dir_checks;
    bool dir_checks_open;      /* on_fit_start hooks are running: folders may be named */
};

/* SIGINT / SIGTERM (signals.c): armed for the length of fit / validate / test / predict
 * when cfg.handle_signals; the loops look at volt__signal_pending at batch ends (the evaluation
 * loops' exchange after each step, with several ranks: eval_loop.c, after_step). */
void volt__signal_arm(volt_trainer *t);
void volt__signal_disarm(volt_trainer *t);
int volt__signal_pending(void);
void volt__signal_vote(volt_trainer *t, double v[2]);
int volt__signal_from_vote(const double v[2]);
volt_status volt__signal_stop(volt_trainer *t, int sig, const char *where);
volt_status volt__signal_settle(volt_trainer *t, volt_status st, const char *what);
/* collective.c: every rank's value on every rank, in blocks of 64 (no allocation); visit
 * returns false to stop after the block. world > 1 and a strategy. what: the call site's name
 * for the comm, the same on every rank. */
volt_status volt__rank_values(volt_trainer *t, double mine, const char *what, bool (*visit)(void *ctx, int r, double v),
                              void *ctx);
/* Lightning's reduce_fx from a log call's flags (VOLT_LOG_REDUCE_*) as the collectives' op:
 * VOLT_REDUCE_MEAN when none, -1 when more than one is set. */
#define VOLT__LOG_REDUCE_MASK (VOLT_LOG_REDUCE_SUM | VOLT_LOG_REDUCE_MAX | VOLT_LOG_REDUCE_MIN)
static inline int volt__log_reduce(unsigned flags) {
    switch (flags & VOLT__LOG_REDUCE_MASK) {
    case 0: return VOLT_REDUCE_MEAN;
    case VOLT_LOG_REDUCE_SUM: return VOLT_REDUCE_SUM;
    case VOLT_LOG_REDUCE_MAX: return VOLT_REDUCE_MAX;
    case VOLT_LOG_REDUCE_MIN: return VOLT_REDUCE_MIN;
    default: return -1;
    }
}
/* v = fold(v, x) for SUM (and MEAN's sum) / MAX / MIN; NaN wins MAX and MIN, as torch.max /
 * torch.min. The one rule of volt_trainer_all_reduce, the epoch folds and the ranks' folds. */
static inline double volt__reduce_fold(int op, double v, double x) {
    if (op == VOLT_REDUCE_SUM || op == VOLT_REDUCE_MEAN) return v + x;
    if (isnan(v) || isnan(x)) return NAN;
    return op == VOLT_REDUCE_MAX ? (x > v ? x : v) : (x < v ? x : v);
}
/* Every rank's (v[i], have[i]) for i < n <= VOLT_MAX_METRICS, folded in rank order by reduce[i]
 * (SUM, MAX, MIN) over the ranks that have it, alike on every rank: all-gathers of 4096 doubles
 * at most, on the stack; exact (a fold of the very values, not of an all-reduced mean); have[i]
 * becomes 1 when any rank had it. world > 1 and a strategy. */
volt_status volt__rank_fold(volt_trainer *t, const int *reduce, double *v, double *have, int n);
/* eval_loop.c: before an evaluation loop's first batch (or fit's sanity check) the ranks agree
 * on it. mine: this rank's set-up so far (its message on t), n its batches; *fewest / *most:
 * the counts of the rank that runs the fewest / the most (n and n with one process). A rank
 * that failed makes every rank fail with its words. */
volt_status volt__eval_agree(volt_trainer *t, volt_status mine, int64_t n, const char *what, int64_t *fewest, int64_t *most);
/* The start of fit / validate / test / predict / lr_find (loop.c): signals armed, the last
 * call's interruption cleared, the call's stage and fn set; returns the fn before it (NONE,
 * unless a hook calls one inside another: lr_find from a fit hook, refused). _end at its
 * return (after on_exception): signals disarmed, fn back to prev. */
volt_trainer_fn volt__loop_call_begin(volt_trainer *t, volt_stage stage, volt_trainer_fn fn);
void volt__loop_call_end(volt_trainer *t, volt_trainer_fn prev);
/* collective.c: one verdict for every rank (as a sharded load's, checkpoint_source.c). st: this
 * rank's result so far (its message on t). When any rank's is an error, every rank returns the
 * lowest failing rank's status and message with " (rank r of N found it; <outcome>)"; VOLT_OK when
 * none failed. A comm failure: this rank's own error, else one naming `what`. One process: st. */
volt_status volt__agree_status(volt_trainer *t, volt_status st, const char *what, const char *outcome);
/* write_check.c: fit's on_fit_start hooks run between begin and run. run is collective (every
 * rank calls it, whether its hooks failed (st < 0) or not): the named folders are checked (rank 0
 * creates and probes each; under a sharding strategy every rank probes the checkpoint folders
 * too) and the ranks agree; the list is emptied. free: at destroy. */
void volt__write_check_begin(volt_trainer *t);
volt_status volt__write_check_run(volt_trainer *t, volt_status st);
void volt__write_check_free(volt_trainer *t);
/* Tests: fn(dir, rank, ctx) runs before each probe of a folder (rank 0's after creating it), e.g.
 * to take the folder away from one rank. NULL clears it. Process-wide; not thread-safe. */
void volt__write_check_set_hook(void (*fn)(const char *dir, int rank, void *ctx), void *ctx);

/* weight averaging (trainer/weight_average.c) */
volt_status volt__avg_setup(volt_trainer *t);
volt_status volt__avg_save_enter(volt_trainer *t, bool *swapped);
void volt__avg_save_leave(volt_trainer *t, bool swapped);
volt_status volt__avg_after_load(volt_trainer *t, bool present, const char *path);

#define volt__terr volt_trainer_fail   /* formats onto t->errmsg (core/err.h) */

/* metrics.c */
volt_status volt__trainer_log(void *ctx, const char *name, double value, unsigned flags);
void volt__metrics_clear_fresh(volt_trainer *t);
/* metrics_epoch.c: turn the stage's accumulators into metrics (fresh) and drop them; with
 * several ranks one reduction every rank makes, a rank that logged nothing included. what:
 * the loop, for the error. */
volt_status volt__metrics_finish_epoch(volt_trainer *t, volt_stage stage, const char *what);
/* The stage's confusion matrix named prefix (make: a new one; NULL beyond VOLT_MAX_CONFUSION),
 * and its counts grown to C classes (VOLT_ERR_NOMEM, the matrix as it was). */
volt_confusion_acc *volt__confusion_find(volt_trainer *t, volt_stage stage, const char *prefix, bool make);
volt_status volt__confusion_grow(volt_confusion_acc *m, int C);
void volt__metrics_drop_accums(volt_trainer *t, volt_stage stage);
/* VOLT_ERR_INVALID_ARG (said) when a new name finds the table full. */
volt_status volt__metric_set(volt_trainer *t, const char *name, double value, unsigned flags);
void volt__metrics_free(volt_trainer *t);
/* A public call starts (depth 0): no metric, epoch accumulator or confusion matrix of an
 * earlier call is left (Lightning's reset_metrics / reset_results at every run's start). */
void volt__metrics_reset_call(volt_trainer *t);
/* A metric a checkpoint kept (volt.tail_plateau), readable, not a fresh value for loggers. */
void volt__metric_restore(volt_trainer *t, const char *name, double value);
/* The step's logged tensor values: one device->host copy for all of them, then they become
 * metrics (and accuracy counts / confusion matrices). Called by the loop after each step. */
volt_status volt__metrics_flush(volt_trainer *t);
/* Forget logged values not flushed (a failed step). */
void volt__metrics_discard(volt_trainer *t);
/* compile: a copy of the queue a captured step left (*out malloc'd, NULL when empty; a value
 * queued from the host is refused with why), and putting it back after a replay (the graph's
 * device copies refilled log_dev at the same offsets). */
struct volt_pending_log;
volt_status volt__metrics_snapshot(volt_trainer *t, struct volt_pending_log **out, int *n, size_t *used, char *why,
                                   size_t whylen);
volt_status volt__metrics_replay(volt_trainer *t, const struct volt_pending_log *p, int n, size_t used);
/* the training step's loss, staged with its logged values when track_step_loss is on: the
 * flush sets step_loss (eager and captured steps alike) */
volt_status volt__metrics_stage_loss(volt_trainer *t, volt_step *s);

/* transfer.c: Lightning's transfer_batch_to_device. *out is the batch the step hooks see:
 * on a host-addressable device (cpu) the loader's batch itself, else a copy in device
 * buffers the trainer owns (valid until the next transfer). */
volt_status volt__transfer_batch(volt_trainer *t, const volt_batch *host, const volt_batch **out);
void volt__transfer_free(volt_trainer *t);
/* Resolve cfg.accelerator/devices into t->dev (trainer.c). */
volt_status volt__trainer_resolve_device(volt_trainer *t);

/* precision.c: the precision plugin at the loop's fixed points (precision/precision.h) */
volt_status volt__prec_create(volt_trainer *t);
/* After init_weights, before the strategy sees the params: storage dtype (true modes). */
volt_status volt__prec_setup_params(volt_trainer *t);
void volt__prec_setup_step(volt_trainer *t, volt_step *s);         /* compute dtype */
void volt__prec_setup_optim(volt_trainer *t, volt_optimizer_config *oc);   /* state dtype */
volt_tensor *volt__prec_scale_loss(volt_trainer *t, volt_step *s, volt_tensor *loss);
/* The boundary's precision steps (unscale, inf/NaN vote, scaler update) are the strategy's,
 * which owns t->prec after volt_trainer_create (strategies/boundary.c); t->prec is borrowed. */
volt_status volt__prec_ckpt_save(volt_trainer *t, volt_st_writer *w);
volt_status volt__prec_ckpt_load(volt_trainer *t, volt_st_file *f, const char *path, bool apply);

/* compile.c: compile = true (docs/CUDA.md "compile"). A graph per batch shape and kind of
 * micro-step: whether it ends an accumulation window (the optimizer boundary) and whether the
 * grads start cleared (the window's first); accumulate_grad_batches 1 needs one kind, 2 and more
 * up to all 4 (a window of one batch at an epoch's end) */
#define VOLT_COMPILE_MAX_GRAPHS 8     /* graphs kept; a shape and kind past them runs eagerly every time */
#define VOLT_COMPILE_MAX_SHAPES 16    /* shapes remembered ... */
#define VOLT_COMPILE_KINDS 4          /* ... each with up to this many kinds of micro-step */
/* At create: what compile cannot capture that the config already says (backend, ranks,
 * 16-mixed, norm clipping). */
volt_status volt__compile_check_config(volt_trainer *t);
/* At fit start: callbacks and module hooks that run inside the captured step. */
volt_status volt__compile_check_hooks(volt_trainer *t);
/* One training batch with compile on (loop.c's train_batch calls it). */
volt_status volt__compile_train_batch(volt_trainer *t, const volt_batch *b, int64_t idx, int64_t n_batches);
void volt__compile_free(volt_trainer *t);   /* drop every graph (new step, destroy) */
void volt__compile_destroy(volt_trainer *t);   /* volt__compile_free, and no longer a graph owner */

/* Batch idx of an epoch of n ends an accumulation window: the optimizer boundary follows its
 * backward (every accumulate_grad_batches-th batch, and the epoch's last; loop.c and compile.c) */
static inline bool volt__loop_ends_window(const volt_trainer *t, int64_t idx, int64_t n_batches) {
    return (idx + 1) % t->cfg.accumulate_grad_batches == 0 || idx + 1 == n_batches;
}

/* loop.c, shared with compile.c */
volt_tensor *volt__loop_backward_loss(volt_trainer *t, volt_step *s, volt_tensor *loss);   /* / accumulation, x grad scale */
volt_status volt__loop_hook_err(volt_trainer *t, volt_status st, const char *who, const char *hook);
/* setup(stage) (setup true) or teardown(stage) of every callback, then of the module (loop.c) */
volt_status volt__loop_stage_hooks(volt_trainer *t, volt_stage stage, bool setup);
volt_status volt__loop_step_err(volt_trainer *t, volt_status st, const char *what);
/* loop.c, shared with eval_loop.c: a strategy's / a loader's failure as the trainer's error;
 * the next batch on the device */
volt_status volt__loop_strategy_err(volt_trainer *t, volt_status st, const char *what);
volt_status volt__loop_loader_err(volt_trainer *t, volt_loader *l, volt_status st);
volt_status volt__loop_next_batch(volt_trainer *t, volt_loader *l, const char *prof, const volt_batch **b);
/* eval_loop.c: validation (inside fit, or standalone; sanity: `limit` batches, nothing logged;
 * *done set once its end hooks ran), and the bodies of validate / test / predict */
typedef volt_status (*volt__step_fn)(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx);
/* The loaders of an evaluation stage (Lightning's list of val / test / predict dataloaders), run
 * one after the other; n = 0: none. */
typedef struct volt__loaders { volt_loader *l[VOLT_MAX_EVAL_DATALOADERS]; int n; } volt__loaders;
/* A caller's array as a set: NULL entries, n < 0 or n > VOLT_MAX_EVAL_DATALOADERS an error naming
 * `what` ("fit", "validate", ...); n = 0 (l may be NULL) the empty set. */
volt_status volt__loaders_from(volt_trainer *t, volt_loader *const *l, int n, const char *what, volt__loaders *out);
/* With several ranks, every rank has as many loaders in set, or every rank fails naming the
 * counts (collective: fit's start and reloads, validate / test / predict after the sharding). */
volt_status volt__loaders_agree(volt_trainer *t, const volt__loaders *set, const char *what);
/* sanity: num_sanity_val_steps of each loader's batches, nothing logged. */
volt_status volt__loop_run_validation(volt_trainer *t, const volt__loaders *val, bool sanity, bool *done);
/* The batches fit's sanity check runs of one loader (after limit_val_batches), capped by
 * num_sanity_val_steps; st: the count failed. */
volt_status volt__loop_sanity_batches(volt_trainer *t, volt_loader *val, int64_t *n);
volt_status volt__eval_validate(volt_trainer *t, const volt_module_ops *ops, void *module, const volt__loaders *val,
                                const char *ckpt_path);
volt_status volt__eval_test(volt_trainer *t, const volt_module_ops *ops, void *module, const volt__loaders *test,
                            const char *ckpt_path);
volt_status volt__eval_predict(volt_trainer *t, const volt_module_ops *ops, void *module, const volt__loaders *loaders,
                               const char *ckpt_path, volt_predict_fn out, void *ctx);
/* fit's body over a set of val loaders (loop.c). */
volt_status volt__loop_fit(volt_trainer *t, const volt_module_ops *ops, void *module, volt_loader *train,
                           const volt__loaders *val, const char *ckpt_path);
/* Seconds of training in the fit running now (a resumed fit counts its checkpoint's); 0 outside fit. */
double volt__loop_fit_time(const volt_trainer *t);
/* The parameter gathers the strategy left in flight (ZeRO after a step) have completed: before
 * anything reads or writes unit values outside the tape. what: for the message. */
volt_status volt__loop_wait_params(volt_trainer *t, const char *what);
volt_status volt__loop_train_eager(volt_trainer *t, const volt_batch *b, int64_t idx, int64_t n_batches);

/* setup.c: what the loops stand on. The default callbacks (once); the model (store, strategy,
 * step; kept while the module is the same; loads: its inits skipped, a load follows); the
 * optimizer and scheduler from configure_optimizers (kept across fits; drop_optim lets the next
 * fit build them again and drops the captured graphs); the batches a stage runs after its
 * limit (a count or a fraction); ckpt_path resolved into path[VOLT__CKPT_PATH_CAP] ("" for
 * none; an error unless missing_ok) and loaded (full: optimizer and loop state too; a failed
 * load drops the model); an evaluation call's set-up; lr_find's (fit's, with a fresh optimizer). */
enum { VOLT__CKPT_PATH_CAP = 4096 };
volt_status volt__loop_add_defaults(volt_trainer *t);
volt_status volt__loop_setup_model(volt_trainer *t, const volt_module_ops *ops, void *module, bool loads);
/* At destroy: the module t holds (set up) is free for another trainer to set up. */
void volt__loop_release_module(volt_trainer *t);
volt_status volt__loop_setup_optim(volt_trainer *t, volt_loader *train);
void volt__loop_drop_optim(volt_trainer *t);
volt_status volt__loop_stage_batches(volt_trainer *t, const char *what, int64_t n, int64_t count, double frac, int64_t *out);
volt_status volt__loop_resolve(volt_trainer *t, const char *ckpt_path, bool missing_ok, const char *stage, char *path);
volt_status volt__loop_load(volt_trainer *t, const char *path, bool full);
volt_status volt__loop_prepare_eval(volt_trainer *t, const volt_module_ops *ops, void *module, const char *ckpt_path,
                                    const char *stage);
volt_status volt__loop_setup_train(volt_trainer *t, const volt_module_ops *ops, void *module, volt_loader *train);
/* module_callbacks.c: the module's configure_callbacks (module table version 4), once the model is
 * set up and before setup(stage): its callbacks replace those of the same table (one verdict
 * across ranks). At destroy: the idle ones. */
volt_status volt__loop_module_callbacks(volt_trainer *t);
/* use_distributed_sampler = false over several ranks: every rank's train batches per epoch the
 * same (n; st: this rank's count failed), or every rank fails naming the counts (loop.c). */
volt_status volt__loop_agree_train_batches(volt_trainer *t, volt_status st, int64_t n);
/* A loader cut into this rank's shard (the strategy's), unless use_distributed_sampler is false. */
static inline volt_status volt__loop_shard(volt_trainer *t, volt_loader *l) {
    return t->cfg.use_distributed_sampler ? volt__strategy_setup_loader(t->strategy, l) : VOLT_OK;
}
/* datamodule.c: fit_dm's reload_dataloaders_every_n_epochs: the datamodule's train and val
 * loaders asked for again, each new one sharded (one verdict across ranks). */
volt_status volt__dm_reload_loaders(volt_trainer *t, volt_loader **train, volt__loaders *val);
void volt__module_callbacks_free(volt_trainer *t);
/* The tuner's bodies (trainer/tuner.c), once the set-up is done: by the Tuner calls, and inside fit
 * by LearningRateFinder / BatchSizeFinder (trainer/tuner_callbacks.c). _check: the config alone. */
volt_status volt__tune_lr_check(volt_trainer *t, const volt_lr_find_config *cfg);
volt_status volt__tune_lr(volt_trainer *t, volt_loader *train, const volt_lr_find_config *cfg, volt_lr_find_result *out);
volt_status volt__tune_batch_size_check(volt_trainer *t, const volt_batch_size_config *cfg);
volt_status volt__tune_batch_size(volt_trainer *t, volt_loader *train, const volt_batch_size_config *cfg,
                                  volt_batch_size_result *out);
volt_status volt__tune_eval_batch_size(volt_trainer *t, volt_loader *l, volt_stage stage, const volt_batch_size_config *cfg,
                                       volt_batch_size_result *out);
/* validate / test / predict, once the loader is sharded and before its loop: a BatchSizeFinder
 * scales the loader (tuner_callbacks.c). */
volt_status volt__tune_eval_finder(volt_trainer *t, const volt__loaders *set, volt_stage stage);
/* fit, after setup("fit") and the loaders' sharding, before the optimizer is made: the finder
 * callbacks run (a fresh fit) or apply what the checkpoint's fit found (path: a resumed one). */
volt_status volt__tune_fit_finders(volt_trainer *t, volt_loader *train, const volt__loaders *val, const char *path);
/* A callback's state in a checkpoint, read ahead of the load (NULL *json: the checkpoint has none). */
volt_status volt__ckpt_callback_state(volt_trainer *t, const char *path, int cb_index, char **json);
/* A fresh step in place of the model's (its arena back to the initial size), the captured
 * graphs and the device batch buffers freed first: the memory a step that ran out of it had
 * grown to comes back (the batch size finder, trainer/tuner.c). */
volt_status volt__loop_renew_step(volt_trainer *t);
/* A step for the model when a renew that found no memory left none (the call goes on with it). */
volt_status volt__loop_ensure_step(volt_trainer *t);
/* The batch size fit's BatchSizeFinder found (or applied from a checkpoint) in this fit, 0 when
 * none: the loaders a datamodule reload hands out get it too (tuner_callbacks.c). */
int64_t volt__tune_fit_batch_size(const volt_trainer *t);

/* profiler.c: profiler = "simple" (t->prof); every call is a no-op when it is off */
typedef struct volt_prof volt_prof;
volt_status volt__prof_check(volt_trainer *t);   /* at create: the config's value */
void volt__prof_destroy(volt_trainer *t);
void volt__prof_stage(volt_trainer *t, const char *stage);   /* a stage starts: figures reset */
/* the time since t_start added to action "[kind]who.what" (kind NULL: "what") */
void volt__prof_record(volt_trainer *t, const char *kind, const char *who, const char *what, double t_start);
/* inline: with the profiler off an action costs this test, not a call */
static inline void volt__prof_add(volt_trainer *t, const char *kind, const char *who, const char *what, double t_start) {
    if (t->prof) volt__prof_record(t, kind, who, what, t_start);
}
void volt__prof_report(volt_trainer *t);   /* rank 0: the stage's table on stdout */
#define VOLT__PROF_T0(t) ((t)->prof ? volt__now() : 0.0)   /* core/clock.h */

/* checkpoint.c */
volt_status volt__ckpt_load(volt_trainer *t, const char *path, bool full);
const char *volt__resolve_ckpt(volt_trainer *t, const char *which);

/* Provided by the callbacks layer (callbacks/defaults.c): attaches the default callbacks the
 * config asks for. volt_trainer_create installs it as t->add_defaults; the trainer knows no
 * callback by name. */
volt_status volt__add_default_callbacks(volt_trainer *t);
/* ... and orders them: DeviceStatsMonitor and ThroughputMonitor first, ModelCheckpoint last
 * (t->order_callbacks; the defaults' hook runs it too). */
volt_status volt__order_callbacks(volt_trainer *t);
#endif
