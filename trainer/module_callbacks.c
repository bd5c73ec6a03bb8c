/* LightningModule.configure_callbacks (module table version 4): the module adds its own
 * callbacks at the start of every call; each replaces the callbacks of the same table the
 * trainer had (Lightning: of the same class), as Lightning's _attach_model_callbacks. The
 * trainer's replaced callbacks stay owned, idle, until the trainer is destroyed (the user may
 * hold handles to them); the module's from an earlier call are destroyed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trainer/trainer_internal.h"

/* cb leaves the callbacks that run: "best"/"last" go with it when it answered them. */
static void leave(volt_trainer *t, const volt_cb *cb) {
    if (t->has_resolver && t->resolver.self == cb->self) t->has_resolver = false;
}

static void destroy_cb(volt_trainer *t, const volt_cb *cb) {
    leave(t, cb);
    if (cb->ops->destroy) cb->ops->destroy(cb->self);
}

/* Entry i leaves the list: destroyed (the module's) or kept idle (the trainer's; room for it was
 * made before); neither when the module added the same object again (a callback it builds once
 * and adds at every call, as a Lightning module returns the same instance): the new entry has it. */
static void retire(volt_trainer *t, int i, bool again) {
    volt_cb cb = t->cbs[i];
    memmove(&t->cbs[i], &t->cbs[i + 1], sizeof(volt_cb) * (size_t)(t->n_cbs - i - 1));
    t->n_cbs--;
    if (again) return;
    if (cb.from_module) destroy_cb(t, &cb);
    else {
        leave(t, &cb);
        t->idle_cbs[t->n_idle_cbs++] = cb;
    }
}

/* The callbacks the module's hook added (from n0 on) are dropped: a failed configure_callbacks. */
static void drop_added(volt_trainer *t, int n0) {
    while (t->n_cbs > n0) {
        volt_cb cb = t->cbs[--t->n_cbs];
        destroy_cb(t, &cb);
    }
}

volt_status volt__loop_module_callbacks(volt_trainer *t) {
    const volt_module_ops *m = t->mops;
    /* a call made from a hook of another runs with that call's callbacks (their loop is running) */
    if (!m || m->version < 4u || !m->configure_callbacks || t->call_depth > 1) return VOLT_OK;
    const int n0 = t->n_cbs;
    const volt_optim_average avg_mode = t->avg_mode;   /* a WeightAveraging it adds renews the request */
    const float avg_decay = t->avg_decay;
    t->configuring_cbs = true;
    t->cbs_first_module = n0;
    t->has_pending_resolver = false;
    const double p0 = VOLT__PROF_T0(t);
    volt_status st = m->configure_callbacks(t->module, t);
    volt__prof_add(t, "LightningModule", m->name, "configure_callbacks", p0);
    t->configuring_cbs = false;
    if (st < 0) volt__loop_hook_err(t, st, m->name, "configure_callbacks");
    else st = VOLT_OK;
    if (st >= 0 && t->n_cbs > n0) {   /* room for every callback the trainer may put aside: nothing fails past the verdict */
        volt_cb *grown = realloc(t->idle_cbs, sizeof *grown * (size_t)(t->n_idle_cbs + n0 + 1));
        if (grown) t->idle_cbs = grown;
        else st = volt__terr(t, VOLT_ERR_NOMEM, "module '%s': configure_callbacks: out of memory", m->name ? m->name : "?");
    }
    st = volt__agree_status(t, st, "configure_callbacks", "no rank ran the call");
    if (st < 0) {
        drop_added(t, n0);
        t->has_pending_resolver = false;
        t->avg_mode = avg_mode;
        t->avg_decay = avg_decay;
        return st;
    }
    for (int i = n0; i < t->n_cbs; i++) t->cbs[i].from_module = true;
    /* the callbacks before n0 whose table one of the new ones has: replaced */
    char names[256];
    size_t nl = 0;
    names[0] = 0;
    int added = t->n_cbs - n0;
    for (int i = 0; i < t->n_cbs - added;) {
        bool same = false, again = false;
        for (int j = t->n_cbs - added; j < t->n_cbs; j++)
            if (t->cbs[j].ops == t->cbs[i].ops) {
                same = true;
                again = again || t->cbs[j].self == t->cbs[i].self;
            }
        if (!same) { i++; continue; }
        if (!t->cbs[i].from_module && !again && nl + 48 < sizeof names) {
            const char *n = t->cbs[i].ops->name ? t->cbs[i].ops->name : "?";
            if (!strstr(names, n)) nl += (size_t)snprintf(names + nl, sizeof names - nl, "%s%.40s", nl ? ", " : "", n);
        }
        retire(t, i, again);
    }
    if (names[0] && t->rank == 0)   /* Lightning says the same (rank_zero_info) */
        fprintf(stderr, "volt: module '%s': the callbacks configure_callbacks returned replace the trainer's of the same "
                "kind: %s\n", m->name ? m->name : "?", names);
    /* "best" / "last" follow the first ModelCheckpoint the module added when the trainer's went
     * (or it had none) */
    if (!t->has_resolver && t->has_pending_resolver) {
        t->resolver = t->pending_resolver;
        t->has_resolver = true;
    }
    t->has_pending_resolver = false;
    return added > 0 && t->order_callbacks ? t->order_callbacks(t) : VOLT_OK;
}

void volt__module_callbacks_free(volt_trainer *t) {
    for (int i = 0; i < t->n_idle_cbs; i++)
        if (t->idle_cbs[i].ops->destroy) t->idle_cbs[i].ops->destroy(t->idle_cbs[i].self);
    free(t->idle_cbs);
    t->idle_cbs = NULL;
    t->n_idle_cbs = 0;
}
