/* trainer/loop_hooks.h — the hook calls of the loops (loop.c, eval_loop.c): every callback's
 * hook, then the module's of the same name (DESIGN §4). Each returns from the calling
 * function on a hook's error, after volt__loop_hook_err names it. */
#ifndef VOLT_TRAINER_LOOP_HOOKS_H
#define VOLT_TRAINER_LOOP_HOOKS_H
#include "trainer/trainer_internal.h"

/* Run a callback hook on every callback whose table (volt_callback_ops, append-only) is of
 * version `ver` or later: errors abort, VOLT_STOP requests a stop. CB_HOOK: the hooks every
 * version has; CB_HOOK3: version 3's (older tables do not have them). */
#define CB_HOOK_V(t, ver, hook, ...) do { \
    for (int cb_i_ = 0; cb_i_ < (t)->n_cbs; cb_i_++) { \
        const volt_cb *cb_ = &(t)->cbs[cb_i_]; \
        if (cb_->ops->version < (ver) || !cb_->ops->hook) continue; \
        const double p0_ = VOLT__PROF_T0(t); \
        volt_status st_ = cb_->ops->hook(cb_->self, (t), ##__VA_ARGS__); \
        volt__prof_add((t), "Callback", cb_->ops->name, #hook, p0_); \
        if (st_ == VOLT_STOP) (t)->should_stop = true; \
        else if (st_ < 0) return volt__loop_hook_err((t), st_, cb_->ops->name, #hook); \
    } } while (0)
#define CB_HOOK(t, hook, ...) CB_HOOK_V(t, 1u, hook, ##__VA_ARGS__)
#define CB_HOOK3(t, hook, ...) CB_HOOK_V(t, 3u, hook, ##__VA_ARGS__)
/* The module's hook of the same name, after the callbacks' (version `ver` of its table or later). */
#define MOD_HOOK_V(t, ver, hook, ...) do { \
    if ((t)->mops->version >= (ver) && (t)->mops->hook) { \
        const double p0_ = VOLT__PROF_T0(t); \
        volt_status st_ = (t)->mops->hook((t)->module, (t), ##__VA_ARGS__); \
        volt__prof_add((t), "LightningModule", (t)->mops->name, #hook, p0_); \
        if (st_ == VOLT_STOP) (t)->should_stop = true; \
        else if (st_ < 0) return volt__loop_hook_err((t), st_, (t)->mops->name, #hook); \
    } } while (0)
#define MOD_HOOK(t, hook, ...) MOD_HOOK_V(t, 1u, hook, ##__VA_ARGS__)
#define MOD_HOOK2(t, hook, ...) MOD_HOOK_V(t, 2u, hook, ##__VA_ARGS__)

#endif
