/* The default callbacks: what the trainer config's enable_* flags attach (Lightning's
 * defaults), unless one of that name was added already, and the order callbacks run in.
 * volt_trainer_create installs these as the trainer's hooks: the defaults once, before the
 * first loop; the order then and after a module's configure_callbacks added its own. The
 * trainer itself knows no callback by name. Written against the public API only. */
#include <string.h>
#include "volt/trainer.h"
#include "callbacks/util.h"

/* The trainer's hooks (declared for it in trainer/trainer_internal.h). */
volt_status volt__add_default_callbacks(volt_trainer *t);
volt_status volt__order_callbacks(volt_trainer *t);

volt_status volt__add_default_callbacks(volt_trainer *t) {
    const volt_trainer_config *cfg = volt_trainer_get_config(t);
    /* the logger first, so it has chosen the log dir before checkpoint callbacks need it */
    if (cfg->enable_logger && !volt__cb_has(t, "CSVLogger")) {
        volt_status st = volt_add_csv_logger(t);
        if (st < 0) return st;
        VOLT_TRY(volt_trainer_move_callback(t, volt_trainer_num_callbacks(t) - 1, 0));   /* to the front */
    }
    if (cfg->enable_logger && cfg->enable_tensorboard && !volt__cb_has(t, "TensorBoardLogger"))
        VOLT_TRY(volt_add_tensorboard_logger(t));     /* after the CSV logger: it uses its log dir */
    if (cfg->enable_logger && cfg->enable_plots && !volt__cb_has(t, "MetricPlots")) VOLT_TRY(volt_add_metric_plots(t));
    if (cfg->enable_checkpointing && !volt__cb_has(t, "ModelCheckpoint")) {
        volt_checkpoint_config cc;
        volt_checkpoint_config_init(&cc);
        VOLT_TRY(volt_add_model_checkpoint(t, &cc));
    }
    if (cfg->enable_progress_bar && !volt__cb_has(t, "ProgressBar")) VOLT_TRY(volt_add_progress_bar(t));
    if (cfg->enable_model_summary && !volt__cb_has(t, "ModelSummary")) VOLT_TRY(volt_add_model_summary(t));
    return volt__order_callbacks(t);
}

volt_status volt__order_callbacks(volt_trainer *t) {
    /* ThroughputMonitor, DeviceStatsMonitor and LearningRateMonitor run first (in that order):
     * what they log at a train batch end (an epoch end: LearningRateMonitor's epoch lr) must be
     * there when the loggers (first among the others) read that step's metrics in the same hook */
    static const char *const first[] = { "LearningRateMonitor", "DeviceStatsMonitor", "ThroughputMonitor" };
    for (int k = 0; k < 3; k++)
        for (int i = 1; i < volt_trainer_num_callbacks(t); i++) {
            const char *name = volt_trainer_callback_name(t, i);
            if (!strcmp(name ? name : "", first[k])) VOLT_TRY(volt_trainer_move_callback(t, i, 0));
        }
    /* checkpointing callbacks run last (as in Lightning), so a checkpoint holds the state
     * the other callbacks reached in the same hook (e.g. EarlyStopping's wait count); the
     * others keep their order, and so do the ModelCheckpoints among themselves */
    int n = volt_trainer_num_callbacks(t);
    for (int seen = 0, i = 0; seen < n; seen++) {
        const char *name = volt_trainer_callback_name(t, i);
        if (!strcmp(name ? name : "", "ModelCheckpoint")) VOLT_TRY(volt_trainer_move_callback(t, i, n - 1));
        else i++;
    }
    return VOLT_OK;
}
