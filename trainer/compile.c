/* compile = true: the training step as a device graph (docs/CUDA.md, "compile").
 *
 * A graph per batch shape (the fields' dtypes, shapes and device addresses) and kind of
 * micro-step, the two host decisions a step's graph freezes besides its inputs:
 *  - whether it ends an accumulation window (volt__loop_ends_window): forward + backward with
 *    the strategy's sync on, then the optimizer boundary; or forward + backward accumulating
 *    into the grads, the strategy's sync off (ddp's no_sync: no collective in the graph);
 *  - whether the grads start cleared (volt__params_grads_cleared: the window's first
 *    micro-step, after the boundary's clear_grad): backward stores into a cleared grad and adds
 *    to a written one (core/step.c prepare_grads).
 * accumulate_grad_batches 1 has one kind from its second step on; k > 1 has "first", "middle"
 * (k > 2) and "last" of a window, and a window of one batch (an epoch's last when n_batches is
 * 1 more than a multiple of k) is "first and last". The loss is divided by k in every window,
 * the shorter last one too, as eagerly (volt__loop_backward_loss): a constant of the fit.
 *
 * Per batch shape and boundary or not, the first such micro-step runs eagerly — the arena, the
 * grad pool, kernel scratch, the log staging and what the boundary allocates once (the
 * optimizer's states, the norm's device word) grow to the step's size, so the same step again
 * allocates nothing and lands on the same addresses (core/arena.c, core/pool.c). The next of
 * the shape and kind is captured (cleared or not makes no difference to memory): graph_begin,
 * volt_step_begin, training_step, backward (and the optimizer boundary), graph_end; the graph
 * is then launched once to run that step. From then on the host does only a step's host half —
 * the RNG offset, at a boundary the optimizer's scalars written at the fixed host addresses the
 * launch copies from and the on_before_optimizer_step hooks — launches the graph, and restores
 * what the captured step left for the host: the index checks (volt_step_check), the queue of
 * logged values (one device->host read, as eager) and the grads' cleared marks (written after
 * a backward, cleared after a boundary). Tape building and op dispatch are not redone.
 *
 * The batch is copied to the trainer's device buffers before each step (transfer.c, also on
 * a host-addressable device), which are the addresses the graph reads. A captured step's
 * memory must not move: the graphs keep the addresses of the step arena, grad pool, scratch
 * and log staging they were captured with, and when any of them was reallocated since (a
 * larger eager step, a validation step that logged more) every graph is dropped and shapes
 * start again with an eager step. So are they when a parameter was frozen or thawed since
 * (volt_param_set_requires_grad between steps, as Lightning's BackboneFinetuning does): a
 * graph's backward and updates are those of the parameters trained at its capture. At most VOLT_COMPILE_MAX_GRAPHS graphs; a shape and kind
 * past that (and past VOLT_COMPILE_MAX_SHAPES x VOLT_COMPILE_KINDS remembered) runs eagerly
 * each time, counted in volt_trainer_compile_stats. So does a step whose grads are cleared in
 * part (a callback read some units' grads between steps). Validation, test and predict steps
 * run eagerly.
 *
 * The boundary runs with nothing read on the host (volt_boundary.on_device): norm clipping
 * takes its coefficient from the device norm (volt_params_clip_grad_norm: the formula the
 * boundary computes on the host), and 16-mixed's inf/NaN skip is the scaler's device flag,
 * which the optimizer's updates and the scaler update read; the host reads the scaler state
 * once after each launch and, on a skipped step, sets the optimizer's step count back and
 * leaves global_step and the scheduler (after_boundary), as an eager step does.
 *
 * Several processes (ddp, deepspeed_stage_1 over nccl): the step's collectives are captured
 * with it (docs/NCCL.md, "compile over several processes"); the boundary sums the inf flag and
 * the sharded grad norm over ranks on the device, and each launch is followed by the comm's
 * bounded wait (volt__strategy_drain), so a dead rank ends the run at the comm's deadline. A
 * micro-step inside a window captures no collective (begin_backward(false)).
 *
 * What a replay cannot redo is refused, never silently run eagerly: at create, a backend
 * without graph capture and a strategy whose step cannot be captured
 * (volt__strategy_check_capture: device memory mapped and unmapped in the step, collectives
 * from the host); at fit start, callbacks with on_before_backward / on_after_backward (they
 * would see a replay's tensors, or none); at capture, a host read of device memory, an
 * allocation or a synchronize anywhere in the step (the backend names it and what was
 * running), and a metric logged from a host value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trainer/trainer_internal.h"
#include "strategies/comm/comm.h"

typedef struct volt_mem_sig {   /* where the step's memory is: what a graph's addresses point into */
    const void *arena, *pool, *scratch[VOLT_SCRATCH_SLOTS], *log_dev;
    size_t arena_cap, pool_cap, log_cap;
    uint64_t trainable_gen;        /* ... and which parameters are trained (volt_param_set_requires_grad) */
} volt_mem_sig;

typedef struct volt_compiled {
    int n_fields;                     /* the key: the batch ... */
    volt_dtype dt[VOLT_MAX_FIELDS];
    volt_shape sh[VOLT_MAX_FIELDS];
    const void *data[VOLT_MAX_FIELDS];
    bool boundary;                    /* ... and the kind: ends a window (the optimizer boundary) */
    bool cleared;                     /* the grads start cleared (backward stores) */
    bool ends_cleared;                /* what the captured step leaves: the boundary's clear_grad */
    volt_device_graph *g;             /* NULL: seen (its eager step warmed the memory), not captured */
    volt_mem_sig sig;
    volt_deferred_check *deferred;    /* the captured step's index checks */
    int n_deferred;
    struct volt_pending_log *logs;    /* and its queue of logged values */
    int n_logs;
    size_t log_used;
} volt_compiled;

static void mem_sig(const volt_trainer *t, volt_mem_sig *m) {
    const volt_step *s = t->step;
    memset(m, 0, sizeof *m);
    m->arena = s->arena.base;
    m->arena_cap = s->arena.cap;
    m->pool = s->grads.base;
    m->pool_cap = s->grads.cap;
    for (int i = 0; i < VOLT_SCRATCH_SLOTS; i++) m->scratch[i] = s->scratch[i];
    m->log_dev = t->log_dev;
    m->log_cap = t->log_cap;
    m->trainable_gen = volt__params_trainable_gen();
}

static bool same_shape(volt_shape a, volt_shape b) {
    if (a.ndim != b.ndim) return false;
    for (int i = 0; i < a.ndim; i++)
        if (a.d[i] != b.d[i]) return false;
    return true;
}

static bool same_batch(const volt_compiled *e, const volt_batch *b) {
    bool same = e->n_fields == b->n_fields;
    for (int f = 0; same && f < b->n_fields; f++)
        same = e->dt[f] == b->fields[f].dtype && same_shape(e->sh[f], b->fields[f].shape) && e->data[f] == b->fields[f].data;
    return same;
}

/* b's entry of this kind; cleared < 0: any entry of b at this boundary or not (the memory of
 * such a step is warm: cleared grads or not, a step allocates the same) */
static volt_compiled *find(volt_trainer *t, const volt_batch *b, bool boundary, int cleared) {
    for (int i = 0; i < t->n_compiled; i++) {
        volt_compiled *e = &t->compiled[i];
        if (e->boundary == boundary && (cleared < 0 || e->cleared == (cleared != 0)) && same_batch(e, b)) return e;
    }
    return NULL;
}

static void entry_clear(volt_trainer *t, volt_compiled *e) {
    if (e->g && t->dev) t->dev->be->graph_destroy(t->dev, e->g);
    free(e->deferred);
    free(e->logs);
    e->g = NULL;
    e->deferred = NULL;
    e->logs = NULL;
    e->n_deferred = e->n_logs = 0;
}

void volt__compile_free(volt_trainer *t) {
    for (int i = 0; i < t->n_compiled; i++) entry_clear(t, &t->compiled[i]);
    free(t->compiled);
    t->compiled = NULL;
    t->n_compiled = 0;
}

/* A comm about to abort (a dead rank, a timeout): the graphs go first (comm.h). Called from
 * inside the comm's wait, also the wait after a launch (launch() touches no entry after it). */
static void release_graphs(void *ctx) { volt__compile_free(ctx); }

void volt__compile_destroy(volt_trainer *t) {
    if (t->graph_owner) volt__comm_graph_owner_remove(t);   /* first: no release after this */
    t->graph_owner = false;
    volt__compile_free(t);
}

void volt_trainer_compile_stats(const volt_trainer *t, int64_t *eager, int64_t *captured, int64_t *replayed) {
    if (eager) *eager = t ? t->compile_eager : 0;
    if (captured) *captured = t ? t->compile_captured : 0;
    if (replayed) *replayed = t ? t->compile_replayed : 0;
}

/* ---- what cannot be captured ------------------------------------------------------------- */
volt_status volt__compile_check_config(volt_trainer *t) {
    const volt_trainer_config *c = &t->cfg;
    if (!c->compile) return VOLT_OK;
    if (c->detect_anomaly)
        return volt__terr(t, VOLT_ERR_UNSUPPORTED, "trainer: detect_anomaly reads every op's values back on the host, which a "
                          "captured step cannot: turn off compile or detect_anomaly");
    if (!volt__dev_has_graphs(t->dev))
        return volt__terr(t, VOLT_ERR_UNSUPPORTED, "trainer: compile needs a backend with graph capture: '%s' has none "
                          "(compile replays the training step as a CUDA graph: use accelerator 'cuda', or leave compile off)",
                          t->dev->be->name);
    if (volt__strategy_check_capture(t->strategy) < 0)
        return volt__terr(t, VOLT_ERR_UNSUPPORTED, "trainer: compile: %s", volt__strategy_errmsg(t->strategy));
    const volt_precision_ops *po = t->prec ? t->prec->ops : NULL;
    if (po && po->unscale_grads && !(po->skip_flag && po->update_on_device && po->read_back))
        return volt__terr(t, VOLT_ERR_UNSUPPORTED, "trainer: compile: precision '%s' cannot decide its inf/NaN skip on "
                          "the device", c->precision);
    return VOLT_OK;
}

volt_status volt__compile_check_hooks(volt_trainer *t) {
    for (int i = 0; i < t->n_cbs; i++) {
        const volt_callback_ops *o = t->cbs[i].ops;
        const char *h = o->on_before_backward ? "on_before_backward" : o->on_after_backward ? "on_after_backward"
                      : o->version >= 6u && o->on_before_zero_grad ? "on_before_zero_grad" : NULL;
        if (h)
            return volt__terr(t, VOLT_ERR_UNSUPPORTED, "trainer: compile: callback '%s' has %s, which runs inside the "
                              "captured step (a replay would not run it where it belongs: the optimizer step is part "
                              "of the graph); remove the callback or set compile = false", o->name ? o->name : "?", h);
    }
    const volt_module_ops *m = t->mops;   /* the same hooks of the module (its table's version 2) */
    const char *h = m->version < 2u ? NULL : m->on_before_backward ? "on_before_backward"
                  : m->on_after_backward ? "on_after_backward"
                  : m->version >= 5u && m->on_before_zero_grad ? "on_before_zero_grad"
                  : m->version >= 6u && m->configure_gradient_clipping ? "configure_gradient_clipping" : NULL;
    if (h)
        return volt__terr(t, VOLT_ERR_UNSUPPORTED, "trainer: compile: module '%s' has %s, which runs inside the captured "
                          "step (a replay would not run it); remove the hook or set compile = false",
                          m->name ? m->name : "?", h);
    return VOLT_OK;
}

/* ---- the step ---------------------------------------------------------------------------- */
/* on_before_optimizer_step: inside the boundary while capturing (a device read there fails
 * the capture, naming the hook), before the launch on a replay (host work only). The device's
 * capture_note names the hook only while a capture is open: a replay's hooks leave it NULL. */
static void note(volt_trainer *t, const char *what) {
    if (t->dev && t->dev->capturing) t->dev->capture_note = what;
}

static volt_status before_step_hooks(void *ctx) {
    volt_trainer *t = ctx;
    for (int i = 0; i < t->n_cbs; i++) {
        const volt_cb *cb = &t->cbs[i];
        if (!cb->ops->on_before_optimizer_step) continue;
        note(t, "a callback's on_before_optimizer_step");
        volt_status st = cb->ops->on_before_optimizer_step(cb->self, t);
        if (st == VOLT_STOP) t->should_stop = true;
        else if (st < 0) return volt__loop_hook_err(t, st, cb->ops->name, "on_before_optimizer_step");
    }
    if (t->mops->on_before_optimizer_step) {
        note(t, "the module's on_before_optimizer_step");
        volt_status st = t->mops->on_before_optimizer_step(t->module, t);
        if (st == VOLT_STOP) t->should_stop = true;
        else if (st < 0) return volt__loop_hook_err(t, st, t->mops->name, "on_before_optimizer_step");
    }
    note(t, "the optimizer step");
    return VOLT_OK;
}

/* After the launch: the loop's counters (loop.c's optimizer_step). 16-mixed's step skipped
 * on the device (inf/NaN grads) is learnt here, with the scaler's host copy (one read):
 * then, as eagerly, the optimizer's step count, global_step and the scheduler stay. */
static void after_boundary(volt_trainer *t) {
    const volt_precision_ops *po = t->prec ? t->prec->ops : NULL;
    if (po && po->unscale_grads) {
        bool skipped = false;
        po->read_back(t->prec, &skipped);
        if (skipped) {
            t->prec->skipped_steps++;
            volt__optimizer_unstep(t->opt);   /* advanced before: the step count and the average's n_averaged */
            return;
        }
    }
    t->global_step++;
    if (t->sched && volt_scheduler_get_config(t->sched)->interval == VOLT_SCHED_EVERY_STEP) volt_scheduler_step(t->sched);
}

/* Launch e's graph and finish the step on the host: deferred index checks, logged values,
 * counters. The step's deferred list and the log queue hold what the captured step left. */
static volt_status launch(volt_trainer *t, volt_compiled *e, const char *what) {
    volt_step *s = t->step;
    char err[512] = "";
    volt_status st = t->dev->be->graph_launch(t->dev, e->g, err, sizeof err);
    if (st < 0) {
        volt__metrics_discard(t);
        return volt__terr(t, st, "compile: %s the training step: %s", what, err);
    }
    /* several processes: the graph's collectives wait for the other ranks; a dead or hung
     * rank ends the wait at the comm's deadline (the communicator aborted) instead of
     * leaving the read below blocked forever */
    if (t->world > 1 && (st = volt__strategy_drain(t->strategy, "the captured training step")) < 0) {
        volt__metrics_discard(t);
        return volt__terr(t, st, "compile: %s the training step: %s", what, volt__strategy_errmsg(t->strategy));
    }
    if ((st = volt_step_check(s)) < 0) {   /* the one synchronising read of the step (with the logs') */
        volt__metrics_discard(t);
        return volt__loop_step_err(t, st, "training_step (replayed)");
    }
    VOLT_TRY(volt__metrics_flush(t));
    if (e->boundary) after_boundary(t);
    return VOLT_OK;
}

static volt_status capture(volt_trainer *t, volt_compiled *e, const volt_batch *b, int64_t idx) {
    volt_step *s = t->step;
    volt_device *d = t->dev;
    char err[512] = "", why[sizeof t->errmsg] = "";
    /* nothing of the eager steps still in flight (ZeRO's gathers after the step): the capture
     * must not depend on work issued before it */
    volt_status st = volt__strategy_wait_params(t->strategy);
    if (st < 0) return volt__terr(t, st, "compile: %s", volt__strategy_errmsg(t->strategy));
    st = volt__dev_graph_begin(d, err, sizeof err);
    if (st < 0) return volt__terr(t, st, "compile: %s", err);
    d->capture_note = "volt_step_begin";
    volt_step_begin(s, true, (uint64_t)t->micro_step++);   /* its RNG-offset copy is re-issued per launch */
    d->capture_note = "training_step";
    t->in_step = true;
    st = t->mops->training_step(t->module, s, b, idx);
    t->in_step = false;
    const char *where = "training_step";
    if (st >= 0 && volt_step_status(s) < 0) st = volt_step_status(s);
    if (st >= 0 && !s->loss) {
        st = VOLT_ERR_STATE;
        snprintf(why, sizeof why, "module '%s': training_step did not set a loss (volt_step_set_loss)", t->mops->name);
    }
    if (st >= 0) st = volt__metrics_stage_loss(t, s);   /* read back with the logs at every launch */
    if (st >= 0) {
        where = "backward";
        d->capture_note = "backward";
        volt_tensor *loss = volt__loop_backward_loss(t, s, s->loss);
        volt__strategy_begin_backward(t->strategy, e->boundary);   /* inside a window: no collective */
        st = volt_step_backward(s, loss);
    }
    bool skip = false;
    if (st >= 0 && e->boundary) {
        /* on the device: the clip by norm's coefficient, 16-mixed's skip (volt_boundary) */
        where = "the optimizer step";
        d->capture_note = "the optimizer step";
        const volt_boundary bd = { .clip_val = t->cfg.gradient_clip_val,
                                   .clip_by_value = !strcmp(t->cfg.gradient_clip_algorithm, "value"),
                                   .before_step = before_step_hooks, .ctx = t, .on_device = true };
        char berr[512] = "";
        bool ended;
        st = volt__strategy_optimizer_boundary(t->strategy, &bd, &skip, &ended, berr, sizeof berr);
        if (st < 0 && berr[0]) snprintf(why, sizeof why, "%s", berr);
        else if (st < 0) snprintf(why, sizeof why, "%s", t->errmsg);   /* a hook's message */
    }
    volt_device_graph *g = NULL;
    char gerr[512] = "";
    volt_status ge = volt__dev_graph_end(d, &g, gerr, sizeof gerr);
    d->capture_note = NULL;
    if (ge < 0 || st < 0) {
        const char *m = why[0] ? why : volt_step_errmsg(s);
        volt_step_end(s);
        volt__metrics_discard(t);
        d->be->graph_destroy(d, g);
        if (ge < 0)   /* the capture's own reason first: the step's failure is usually its fallout */
            return volt__terr(t, ge, "compile: the training step cannot be captured: %s%s%s", gerr,
                              st < 0 && m[0] ? "; the step then failed: " : "", st < 0 ? m : "");
        return volt__terr(t, st, "module '%s': %s (while capturing): %s", t->mops->name, where, m[0] ? m : volt_status_str(st));
    }
    /* what the host needs after each launch */
    st = volt__metrics_snapshot(t, &e->logs, &e->n_logs, &e->log_used, why, sizeof why);
    if (st >= 0 && s->n_deferred) {
        if (!(e->deferred = malloc(sizeof *e->deferred * (size_t)s->n_deferred))) {
            st = VOLT_ERR_NOMEM;
            snprintf(why, sizeof why, "out of memory keeping the step's index checks");
        } else {
            memcpy(e->deferred, s->deferred, sizeof *e->deferred * (size_t)s->n_deferred);
        }
    }
    if (st < 0) {
        volt_step_end(s);
        volt__metrics_discard(t);
        d->be->graph_destroy(d, g);
        entry_clear(t, e);
        return volt__terr(t, st, "compile: the training step cannot be captured: %s", why);
    }
    e->n_deferred = s->n_deferred;
    e->g = g;
    e->ends_cleared = volt__params_grads_cleared(t->ps) > 0;
    mem_sig(t, &e->sig);
    t->compile_captured++;
    if (t->world > 1 && !t->graph_owner) {   /* its comm's collectives are in the graph */
        const volt_comm *comm = volt__strategy_comm(t->strategy);
        if (comm && !volt__comm_graph_owner_add(comm, release_graphs, t)) {
            volt_step_end(s);
            volt__metrics_discard(t);
            entry_clear(t, e);   /* without the registration an abort would wait on this graph forever */
            return volt__terr(t, VOLT_ERR_NOMEM, "compile: out of memory registering the captured step's graph");
        }
        t->graph_owner = comm != NULL;
    }
    /* run the captured step once: the deferred checks and log queue are still the step's */
    st = launch(t, e, "running the just captured");
    volt_step_end(s);
    return st;
}

static volt_status replay(volt_trainer *t, volt_compiled *e) {
    volt_step *s = t->step;
    /* an eager step before (another shape) may have left ZeRO's gathers in flight: the graph
     * reads the parameters without the tape's unit_use that would wait for them */
    volt_status ws = volt__strategy_wait_params(t->strategy);
    if (ws < 0) return volt__terr(t, ws, "compile: %s", volt__strategy_errmsg(t->strategy));
    /* the step's host half: this step's inputs at the addresses the launch copies from */
    s->rng_offset = (uint64_t)t->micro_step++;
    t->dev->capture_note = NULL;
    if (e->boundary) {
        /* the graph's update skips volt_optimizer_step and its refusal of an lr a scheduler
         * overflowed (inf: NaN weights): refused here alike */
        const volt_status ls = volt_optimizer_check_lr(t->opt);
        if (ls < 0) return volt__terr(t, ls, "optimizer step: %s", volt_optimizer_errmsg(t->opt));
        volt__optimizer_advance(t->opt);
        const volt_compiled *kept = t->compiled;
        VOLT_TRY(before_step_hooks(t));
        if (t->compiled != kept)   /* a hook's collective failed and its comm dropped the graphs (e with them) */
            return volt__terr(t, VOLT_ERR_COMM, "compile: the step's graph was dropped during on_before_optimizer_step "
                              "(its comm failed and aborted)");
    }
    /* what the captured step left for the host: the grads written by its backward (and cleared
     * by its boundary), its index checks, its logged values */
    volt__params_mark_grads_cleared(t->ps, e->ends_cleared);
    s->status = VOLT_OK;
    s->errmsg[0] = 0;
    if (e->n_deferred) memcpy(s->deferred, e->deferred, sizeof *e->deferred * (size_t)e->n_deferred);   /* none: both NULL */
    s->n_deferred = e->n_deferred;
    VOLT_TRY(volt__metrics_replay(t, e->logs, e->n_logs, e->log_used));
    t->compile_replayed++;
    return launch(t, e, "replaying");
}

static int n_graphs(const volt_trainer *t) {
    int n = 0;
    for (int i = 0; i < t->n_compiled; i++) n += t->compiled[i].g != NULL;
    return n;
}

/* Several processes: a step's collectives are captured or not on every rank alike (NCCL: the
 * capture of a collective, and the launch of a graph holding one, are collective properties).
 * Each rank's plan follows from the batch shapes and its step memory, the same everywhere in
 * practice; one host all-reduce per step checks it. When the ranks differ (a rank whose step
 * memory moved, e.g. after validating in larger batches than the others), every rank drops its
 * graphs and runs this step eagerly, as for memory that moved (never a mix, which could hang):
 * the next step of the shape is captured everywhere. */
enum { PLAN_REPLAY, PLAN_CAPTURE, PLAN_EAGER };
static volt_status agree(volt_trainer *t, int *plan) {
    double v[3] = { *plan == PLAN_REPLAY, *plan == PLAN_CAPTURE, *plan == PLAN_EAGER };
    volt_status st = volt__strategy_all_reduce_mean(t->strategy, v, 3, "compile step plan");
    if (st < 0) return volt__terr(t, st, "compile: agreeing on the step's plan across ranks: %s", volt__strategy_errmsg(t->strategy));
    if (v[*plan] != 1.0) *plan = -1;   /* not unanimous: eager everywhere */
    return VOLT_OK;
}

/* The plan of a step of b (boundary: it ends a window; cleared: volt__params_grads_cleared)
 * and its entry: the graph to replay, the entry to capture into (made here when the shape
 * and boundary are warm but this kind is new), or none (eager: *e is the entry to make for a
 * new shape and kind, when *make). */
static int plan_of(volt_trainer *t, const volt_batch *b, bool boundary, int cleared, volt_compiled **e, bool *make) {
    *e = NULL;
    *make = false;
    if (cleared < 0) return PLAN_EAGER;   /* cleared in part: no graph's kind */
    volt_compiled *x = find(t, b, boundary, cleared);
    if (x && x->g) { *e = x; return PLAN_REPLAY; }
    const bool room = x || t->n_compiled < VOLT_COMPILE_MAX_SHAPES * VOLT_COMPILE_KINDS;
    if (!x && !find(t, b, boundary, -1)) {   /* a new shape (or boundary kind): one eager step warms the memory for it */
        *make = room;
        return PLAN_EAGER;
    }
    if (!room || n_graphs(t) >= VOLT_COMPILE_MAX_GRAPHS) return PLAN_EAGER;   /* past the bound: eager, every time */
    *e = x;   /* NULL: made at the capture */
    return PLAN_CAPTURE;
}

static volt_compiled *entry_new(volt_trainer *t, const volt_batch *b, bool boundary, bool cleared) {
    if (!t->compiled && !(t->compiled = calloc(VOLT_COMPILE_MAX_SHAPES * VOLT_COMPILE_KINDS, sizeof *t->compiled))) {
        volt__terr(t, VOLT_ERR_NOMEM, "compile: out of memory");
        return NULL;
    }
    volt_compiled *e = &t->compiled[t->n_compiled++];
    memset(e, 0, sizeof *e);
    e->n_fields = b->n_fields;
    for (int f = 0; f < b->n_fields; f++) {
        e->dt[f] = b->fields[f].dtype;
        e->sh[f] = b->fields[f].shape;
        e->data[f] = b->fields[f].data;
    }
    e->boundary = boundary;
    e->cleared = cleared;
    return e;
}

volt_status volt__compile_train_batch(volt_trainer *t, const volt_batch *b, int64_t idx, int64_t n_batches) {
    t->cur_batch_size = b->size;
    const bool boundary = volt__loop_ends_window(t, idx, n_batches);
    const int cleared = volt__params_grads_cleared(t->ps);
    /* the step's memory moved, or a parameter was frozen or thawed, since the graphs were
     * captured (all with the same memory: a capture follows a check that dropped any other):
     * every graph is stale */
    bool stale = false;
    volt_mem_sig now;
    mem_sig(t, &now);
    for (int i = 0; i < t->n_compiled && !stale; i++)
        stale = t->compiled[i].g && memcmp(&now, &t->compiled[i].sig, sizeof now) != 0;
    volt_compiled *e = NULL;
    bool make = false;
    int plan = stale ? PLAN_EAGER : plan_of(t, b, boundary, cleared, &e, &make);
    if (t->world > 1) VOLT_TRY(agree(t, &plan));
    if (plan < 0) stale = true;   /* the ranks' plans differ: all start again from an eager step */
    if (stale) {
        volt__compile_free(t);
        plan = plan_of(t, b, boundary, cleared, &e, &make);   /* nothing left: eager, a new entry */
    }
    if (plan == PLAN_REPLAY) return replay(t, e);
    if (plan == PLAN_CAPTURE) {
        if (!e && !(e = entry_new(t, b, boundary, cleared != 0))) return VOLT_ERR_NOMEM;
        return capture(t, e, b, idx);
    }
    if (make && !entry_new(t, b, boundary, cleared != 0)) return VOLT_ERR_NOMEM;
    t->compile_eager++;
    return volt__loop_train_eager(t, b, idx, n_batches);
}
