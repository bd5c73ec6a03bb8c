/* SIGINT / SIGTERM during fit, validate, test and predict: Lightning's graceful shutdown
 * (docs/TRAINER.md, "Interrupting a run").
 *
 * While a run is armed (cfg.handle_signals, the default), the first SIGINT or SIGTERM only
 * records itself; the loops look at the record at batch ends (training: at optimizer-step
 * boundaries, where a checkpoint holds no half-accumulated grads), stop there and return
 * VOLT_ERR_INTERRUPTED after the callbacks' on_exception (OnExceptionCheckpoint saves then).
 * A second signal while the first is pending gets the default action: the process ends at
 * once, as a second Ctrl-C does in Lightning's shutdown. A disposition the program set itself
 * (its own handler, or SIG_IGN) is left alone: the trainer only takes signals nobody handles.
 *
 * Several processes: every rank must stop at the same step (a sharded save, the next
 * collectives), so the training loop folds the record into the stop flag it already
 * all-reduces at each boundary, and each call ends with one more exchange of it
 * (volt__signal_settle). The evaluation loops (validation inside fit and its sanity check,
 * validate, test, predict) have no exchange of their own per batch, so they make one for the
 * vote: an all-reduce of the same two doubles (and a "this rank's step failed" flag) right after
 * every batch's step (after_step, eval_loop.c), and every rank stops after the same batch. A
 * signal that arrives later in a batch (its logged values' sync, its batch-end hooks) is
 * acted on after the next one. That exchange must be made by every rank or by none
 * (one made alone waits until the comm's timeout), so a loop first agrees on how many batches
 * every rank runs (volt__eval_agree, eval_loop.c): with one dataset the distributed sampler
 * gives every rank the same count (padded, or cut with drop_last), but a rank given a dataset of
 * its own may run more, fewer or none; batches past the fewest any rank runs are not voted on,
 * and a signal there is acted on where the ranks next vote (the end of the call, or fit's next
 * boundary).
 *
 * Rank 0 writes the note ("volt: interrupted ...", its stderr is the one users watch) when the
 * signal reaches it, from the handler; when another rank got it, rank 0 learns of it at the
 * exchange that stops the run and writes the note there (volt__signal_stop). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "trainer/trainer_internal.h"

static const int k_sigs[2] = { SIGINT, SIGTERM };
static volatile sig_atomic_t g_pending;   /* the first signal of the armed run, 0 = none */
static volatile sig_atomic_t g_say;       /* write the note (rank 0) */
static volatile sig_atomic_t g_noted;     /* the handler wrote it for the pending signal */
static struct sigaction g_old[2];
static bool g_ours[2];
static int g_depth;

static void on_signal(int sig) {
    if (g_pending) {   /* the second one: what it would have done without us */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    g_pending = sig;
    if (g_say) {
        static const char note[] = "\nvolt: interrupted: stopping at the next batch end (again to stop at once)\n";
        ssize_t w = write(STDERR_FILENO, note, sizeof note - 1);
        (void)w;
        g_noted = 1;
    }
}

void volt__signal_arm(volt_trainer *t) {
    if (!t->cfg.handle_signals || g_depth++ > 0) return;
    g_say = t->rank == 0;
    for (int i = 0; i < 2; i++) {
        struct sigaction cur;
        g_ours[i] = false;
        if (sigaction(k_sigs[i], NULL, &cur) != 0) continue;
        if ((cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL) continue;   /* the program's own */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        if (sigaction(k_sigs[i], &sa, &g_old[i]) == 0) g_ours[i] = true;
    }
}

void volt__signal_disarm(volt_trainer *t) {
    if (!t->cfg.handle_signals || g_depth == 0 || --g_depth > 0) return;
    for (int i = 0; i < 2; i++)
        if (g_ours[i]) sigaction(k_sigs[i], &g_old[i], NULL);
    g_ours[0] = g_ours[1] = false;
}

int volt__signal_pending(void) { return (int)g_pending; }

static const char *sig_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }

/* The run stops: the record is consumed (the next run starts clean) and kept on the trainer.
 * Rank 0 writes the note for a signal another rank got (its own wrote it from the handler). */
volt_status volt__signal_stop(volt_trainer *t, int sig, const char *where) {
    if (t->rank == 0 && t->world > 1 && !t->interrupted_local && !g_noted)
        fprintf(stderr, "\nvolt: interrupted: %s on another rank: %s (every rank stops here)\n", sig_name(sig), where);
    g_pending = 0;
    g_noted = 0;
    t->interrupted = sig;
    return volt__terr(t, VOLT_ERR_INTERRUPTED, "%s (%s): %s at epoch %lld, step %lld", sig_name(sig),
                      t->world > 1 && !t->interrupted_local ? "on another rank" : "received", where,
                      (long long)t->epoch, (long long)t->global_step);
}

/* Folded into an exchange the caller makes anyway: v[0] = SIGINT here, v[1] = SIGTERM here. */
void volt__signal_vote(volt_trainer *t, double v[2]) {
    const int s = (int)g_pending;
    t->interrupted_local = s != 0;
    v[0] = s == SIGINT;
    v[1] = s == SIGTERM;
}

int volt__signal_from_vote(const double v[2]) { return v[0] > 0 ? SIGINT : v[1] > 0 ? SIGTERM : 0; }

/* The end of a call. One that ran to completion (st >= 0): a signal that came after the last
 * look still stops the program's next stage; several processes make one exchange, so every
 * rank answers alike. One that failed keeps its own error, and a signal that came meanwhile
 * is consumed there (volt_trainer_interrupted names it), so the next call starts clean. */
volt_status volt__signal_settle(volt_trainer *t, volt_status st, const char *what) {
    if (!t->cfg.handle_signals) return st;
    if (st < 0) {
        if (g_pending) t->interrupted = (int)g_pending;
        g_pending = 0;
        g_noted = 0;
        return st;
    }
    double v[2];
    volt__signal_vote(t, v);
    if (t->world > 1 && t->strategy) {
        volt_status s2 = volt__strategy_all_reduce_mean(t->strategy, v, 2, "interrupt vote");
        if (s2 < 0) return volt__terr(t, s2, "%s: agreeing on an interruption across ranks: %s", what, volt__strategy_errmsg(t->strategy));
    }
    const int sig = volt__signal_from_vote(v);
    if (!sig) return st;
    char where[96];
    snprintf(where, sizeof where, "%s had finished", what);
    return volt__signal_stop(t, sig, where);
}

int volt_trainer_interrupted(const volt_trainer *t) { return t ? t->interrupted : 0; }
