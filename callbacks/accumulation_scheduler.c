/* GradientAccumulationScheduler (Lightning's): the accumulation factor by epoch, e.g. 8
 * batches per optimizer step in epochs 0-3, 4 in 4-7, then 1 ({0: 8, 4: 4, 8: 1}).
 *
 * The factor is set at each train epoch start (volt_trainer_set_accumulate_grad_batches), as
 * Lightning's on_train_epoch_start does, and at train start too: a fit resumed inside an
 * epoch runs no epoch start for it, and its windows must be that epoch's. Like Lightning, the
 * trainer's own accumulate_grad_batches must be left at 1, and the estimated stepping batches
 * (a linear schedule's length) are counted with it, not with the schedule. The factor lasts for
 * the fit only (trainer/loop.c puts the trainer's back when the call ends). */
#include <stdlib.h>
#include <string.h>
#include "volt/trainer.h"

typedef struct gas {
    int n;
    int64_t *epochs, *factors;   /* sorted by epoch */
} gas;

static int64_t factor_at(const gas *g, int64_t epoch) {
    int64_t f = 1;
    for (int i = 0; i < g->n && g->epochs[i] <= epoch; i++) f = g->factors[i];
    return f;
}

static volt_status gas_set(void *self, volt_trainer *t) {
    return volt_trainer_set_accumulate_grad_batches(t, factor_at(self, volt_trainer_current_epoch(t)));
}

static void gas_destroy(void *self) {
    gas *g = self;
    if (!g) return;
    free(g->epochs);
    free(g->factors);
    free(g);
}

static const volt_callback_ops gas_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "GradientAccumulationScheduler",
    .on_train_start = gas_set,
    .on_train_epoch_start = gas_set,
    .destroy = gas_destroy,
};

volt_status volt_add_gradient_accumulation_scheduler(volt_trainer *t, const int64_t *epochs, const int64_t *factors,
                                                     int n) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (n < 1 || !epochs || !factors)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "GradientAccumulationScheduler: an empty schedule");
    const int64_t own = volt_trainer_get_config(t)->accumulate_grad_batches;
    const int64_t vci = volt_trainer_get_config(t)->val_check_interval;
    if (own != 1)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "GradientAccumulationScheduler: the trainer's "
                                 "accumulate_grad_batches is %lld: set that or the schedule, not both", (long long)own);
    for (int i = 0; i < n; i++) {
        if (epochs[i] < 0)
            return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "GradientAccumulationScheduler: epoch %lld: epochs are 0-based "
                                     "(>= 0)", (long long)epochs[i]);
        if (factors[i] < 1)
            return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "GradientAccumulationScheduler: epoch %lld: factor %lld "
                                     "(must be >= 1)", (long long)epochs[i], (long long)factors[i]);
        for (int j = 0; j < i; j++)
            if (epochs[j] == epochs[i])
                return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "GradientAccumulationScheduler: epoch %lld is given "
                                         "twice", (long long)epochs[i]);
        if (vci > 0 && vci % factors[i])
            return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "GradientAccumulationScheduler: epoch %lld: factor %lld does "
                                     "not divide val_check_interval (%lld)", (long long)epochs[i],
                                     (long long)factors[i], (long long)vci);
    }
    gas *g = calloc(1, sizeof *g);
    if (g) {
        g->epochs = malloc(sizeof *g->epochs * (size_t)n);
        g->factors = malloc(sizeof *g->factors * (size_t)n);
    }
    if (!g || !g->epochs || !g->factors) {
        gas_destroy(g);
        return volt_trainer_fail(t, VOLT_ERR_NOMEM, "GradientAccumulationScheduler: out of memory");
    }
    g->n = n;
    for (int i = 0; i < n; i++) {   /* insertion sort by epoch: schedules are a few entries */
        int j = i;
        while (j > 0 && g->epochs[j - 1] > epochs[i]) {
            g->epochs[j] = g->epochs[j - 1];
            g->factors[j] = g->factors[j - 1];
            j--;
        }
        g->epochs[j] = epochs[i];
        g->factors[j] = factors[i];
    }
    return volt_trainer_add_callback(t, &gas_ops, g);
}
