/* Datamodules: prepare_data once on rank 0, setup(stage) on every rank, run, teardown; during the
 * run the trainer knows the datamodule, whose state checkpoints keep (version 2). */
#include <string.h>
#include "trainer/trainer_internal.h"

static volt_status dm_begin(volt_trainer *t, const volt_datamodule_ops *dm, void *self, volt_stage stage) {
    if (!dm || !VOLT_VERSION_OK(dm->version, VOLT_DATAMODULE_OPS_VERSION))
        return volt__terr(t, VOLT_ERR_VERSION, "datamodule: unknown table version %u", dm ? dm->version : 0);
    volt_status st = VOLT_OK;
    if (dm->prepare_data && t->rank == 0) st = dm->prepare_data(self);
    if (t->world > 1) {   /* the others wait for rank 0's downloads, and learn if they failed */
        double f = st < 0 ? 1.0 : 0.0;
        volt_status st2 = volt__strategy_all_reduce_mean(t->strategy, &f, 1, "prepare_data vote");
        if (st2 < 0) return volt__terr(t, st2, "datamodule '%s': prepare_data sync failed", dm->name);
        if (f > 0 && st >= 0)
            return volt__terr(t, VOLT_ERR_IO, "datamodule '%s': prepare_data failed on rank 0", dm->name);
    }
    if (st < 0) return t->errmsg[0] ? st : volt__terr(t, st, "datamodule '%s': prepare_data failed", dm->name);
    if (dm->setup && (st = dm->setup(self, stage)) < 0)
        return t->errmsg[0] ? st : volt__terr(t, st, "datamodule '%s': setup failed", dm->name);
    return VOLT_OK;
}

static volt_status dm_end(volt_trainer *t, const volt_datamodule_ops *dm, void *self, volt_stage stage, volt_status st) {
    t->dm = NULL;
    t->dm_self = NULL;
    if (dm->teardown) dm->teardown(self, stage);
    return st;
}

/* The call's datamodule, for checkpoints it writes and reads (trainer/checkpoint.c). */
static void dm_run(volt_trainer *t, const volt_datamodule_ops *dm, void *self) {
    t->dm = dm;
    t->dm_self = self;
}

static volt_loader *get(volt_loader *(*fn)(void *), void *self) { return fn ? fn(self) : NULL; }

/* A stage's evaluation loaders: version 3's list hook when the table has it, else the single one. */
static volt_status get_set(volt_trainer *t, const volt_datamodule_ops *dm, void *self, volt_stage stage, volt__loaders *out) {
    int (*many)(void *, volt_loader **, int) = NULL;
    volt_loader *(*one)(void *) = NULL;
    const char *hook = "val_loaders";
    switch (stage) {
    case VOLT_STAGE_TEST: one = dm->test_loader; hook = "test_loaders"; if (dm->version >= 3u) many = dm->test_loaders; break;
    case VOLT_STAGE_PREDICT: one = dm->predict_loader; hook = "predict_loaders"; if (dm->version >= 3u) many = dm->predict_loaders; break;
    default: one = dm->val_loader; if (dm->version >= 3u) many = dm->val_loaders; break;
    }
    out->n = 0;
    if (!many) {
        if ((out->l[0] = get(one, self)) != NULL) out->n = 1;
        return VOLT_OK;
    }
    volt_loader *l[VOLT_MAX_EVAL_DATALOADERS] = { 0 };
    const int n = many(self, l, VOLT_MAX_EVAL_DATALOADERS);
    if (n < 0)
        return t->errmsg[0] ? (volt_status)n : volt__terr(t, (volt_status)n, "datamodule '%s': %s failed (%s)",
                                                          dm->name ? dm->name : "?", hook, volt_status_str((volt_status)n));
    char what[96];
    snprintf(what, sizeof what, "datamodule '%s': %s", dm->name ? dm->name : "?", hook);
    return volt__loaders_from(t, l, n, what, out);
}

/* get_set at a call's start: one rank's failure fails every rank (the others would wait in the
 * call's first collective). */
static volt_status loaders_of(volt_trainer *t, const volt_datamodule_ops *dm, void *self, volt_stage stage, volt__loaders *out) {
    return volt__agree_status(t, get_set(t, dm, self, stage, out), "datamodule loaders", "no rank ran the call");
}

volt_status volt__dm_reload_loaders(volt_trainer *t, volt_loader **train, volt__loaders *val) {
    const volt_datamodule_ops *dm = t->dm;
    volt_loader *nt = get(dm->train_loader, t->dm_self);
    volt__loaders nv = { .n = 0 };
    volt_status st = VOLT_OK;
    if (!nt)
        st = volt__terr(t, VOLT_ERR_INVALID_ARG, "datamodule '%s': train_loader returned no loader when fit reloaded it at "
                        "epoch %lld (reload_dataloaders_every_n_epochs=%lld)", dm->name ? dm->name : "?", (long long)t->epoch,
                        (long long)t->cfg.reload_dataloaders_every_n_epochs);
    if (st >= 0) st = get_set(t, dm, t->dm_self, VOLT_STAGE_VALIDATE, &nv);
    /* fit's BatchSizeFinder's size on the new loaders too (Lightning keeps it in the datamodule's
     * batch_size, which its loaders are made with) */
    const int64_t bs = volt__tune_fit_batch_size(t);
    for (int k = 0; k <= nv.n && st >= 0 && bs > 0; k++) {
        volt_loader *l = k ? nv.l[k - 1] : nt;
        if (volt_loader_batch_size(l) != bs && (st = volt_loader_set_batch_size(l, bs)) < 0) {
            char which[32] = "train";   /* one of several val loaders by its index, as their metrics */
            if (k && nv.n > 1) snprintf(which, sizeof which, "val (dataloader_idx %d)", k - 1);
            else if (k) snprintf(which, sizeof which, "val");
            st = volt__terr(t, st, "datamodule '%s': the reloaded %s loader could not be set to BatchSizeFinder's batch size "
                            "%lld: %s", dm->name ? dm->name : "?", which, (long long)bs, volt_loader_errmsg(l));
        }
    }
    if (st >= 0 && nt != *train && (st = volt__loop_shard(t, nt)) < 0)
        st = volt__loop_strategy_err(t, st, "data sharding");
    for (int k = 0; k < nv.n && st >= 0; k++) {
        bool was = false;   /* a loader fit runs already is sharded */
        for (int j = 0; j < val->n; j++) was |= val->l[j] == nv.l[k];
        if (!was && (st = volt__loop_shard(t, nv.l[k])) < 0) st = volt__loop_strategy_err(t, st, "data sharding");
    }
    /* every rank goes on with its new loaders, or every rank stops; their batches are counted
     * (and, unsharded, agreed) by the loop next, as at fit's start */
    VOLT_TRY(volt__agree_status(t, st, "reload_dataloaders_every_n_epochs", "no rank trained the epoch"));
    VOLT_TRY(volt__loaders_agree(t, &nv, "reload_dataloaders_every_n_epochs"));
    *train = nt;
    *val = nv;
    return VOLT_OK;
}

volt_status volt_trainer_fit_dm(volt_trainer *t, const volt_module_ops *ops, void *module,
                                const volt_datamodule_ops *dm, void *self, const char *ckpt_path) {
    t->errmsg[0] = 0;
    VOLT_TRY(dm_begin(t, dm, self, VOLT_STAGE_FIT));
    dm_run(t, dm, self);
    volt__loaders val;
    volt_status st = loaders_of(t, dm, self, VOLT_STAGE_VALIDATE, &val);
    if (st >= 0) st = volt__loop_fit(t, ops, module, get(dm->train_loader, self), &val, ckpt_path);
    return dm_end(t, dm, self, VOLT_STAGE_FIT, st);
}

volt_status volt_trainer_validate_dm(volt_trainer *t, const volt_module_ops *ops, void *module,
                                     const volt_datamodule_ops *dm, void *self, const char *ckpt_path) {
    t->errmsg[0] = 0;
    VOLT_TRY(dm_begin(t, dm, self, VOLT_STAGE_VALIDATE));
    dm_run(t, dm, self);
    volt__loaders val;
    volt_status st = loaders_of(t, dm, self, VOLT_STAGE_VALIDATE, &val);
    if (st >= 0) st = volt_trainer_validate_loaders(t, ops, module, val.l, val.n, ckpt_path);
    return dm_end(t, dm, self, VOLT_STAGE_VALIDATE, st);
}

volt_status volt_trainer_test_dm(volt_trainer *t, const volt_module_ops *ops, void *module,
                                 const volt_datamodule_ops *dm, void *self, const char *ckpt_path) {
    t->errmsg[0] = 0;
    VOLT_TRY(dm_begin(t, dm, self, VOLT_STAGE_TEST));
    dm_run(t, dm, self);
    volt__loaders test;
    volt_status st = loaders_of(t, dm, self, VOLT_STAGE_TEST, &test);
    if (st >= 0) st = volt_trainer_test_loaders(t, ops, module, test.l, test.n, ckpt_path);
    return dm_end(t, dm, self, VOLT_STAGE_TEST, st);
}

volt_status volt_trainer_predict_dm(volt_trainer *t, const volt_module_ops *ops, void *module,
                                    const volt_datamodule_ops *dm, void *self, const char *ckpt_path,
                                    volt_predict_fn out, void *ctx) {
    t->errmsg[0] = 0;
    VOLT_TRY(dm_begin(t, dm, self, VOLT_STAGE_PREDICT));
    dm_run(t, dm, self);
    volt__loaders pl;
    volt_status st = loaders_of(t, dm, self, VOLT_STAGE_PREDICT, &pl);
    if (st >= 0) st = volt_trainer_predict_loaders(t, ops, module, pl.l, pl.n, ckpt_path, out, ctx);
    return dm_end(t, dm, self, VOLT_STAGE_PREDICT, st);
}
