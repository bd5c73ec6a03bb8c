/* callbacks/model_checkpoint_internal.h — ModelCheckpoint's state, shared by its files:
 * model_checkpoint.c (save points, hooks, creation), model_checkpoint_state.c (state_dict,
 * load_state_dict, "best"/"last") and model_checkpoint_async.c (background writes, the
 * sharded commit, and putting the bookkeeping back after a failed save).
 * Private to callbacks/. */
#ifndef VOLT_CALLBACKS_MODEL_CHECKPOINT_INTERNAL_H
#define VOLT_CALLBACKS_MODEL_CHECKPOINT_INTERNAL_H

#include <pthread.h>
#include "volt/trainer.h"
#include "callbacks/model_checkpoint.h"
#include "callbacks/util.h"

typedef struct mc {
    volt_trainer *t;
    char *dirpath_user, *filename, *monitor;
    volt_mode mode;
    int save_top_k;
    bool save_last, save_on_train_epoch_end;
    int64_t every_n_epochs, every_n_train_steps;

    char *dirpath;                   /* resolved at the first save point (or from a resume) */
    volt_cb_topk topk;               /* monitor: the k best; no monitor: the k most recent */
    char *best_path;
    double best_score;
    char *last_path;
    int64_t last_step_saved;         /* checkpointed: a resumed run does not save that step again */
    bool restored;
    bool pending;                    /* restored bookkeeping not yet checked against dirpath */
    char *ckpt_dir;                  /* ... and the dirpath the checkpoint recorded */
    bool val_ran_epoch, val_has_run, warned_missing;
    volt_ckpt_resolver resolver;
    char found_last[VOLT_CB_PATH_MAX];

    bool async_save;
    unsigned save_flags;             /* VOLT_CKPT_WEIGHTS_ONLY with save_weights_only */
    bool insert_names;               /* auto_insert_metric_name: "epoch=2", else "2" */
    bool version_counter;            /* enable_version_counter: -v1 beside an existing file, else overwrite */
    bool verbose;                    /* print each save point's decision (Lightning's words) */
    double train_time_interval;      /* seconds; 0 = off */
    double last_time_checked;        /* the time trigger's reference: train start, then each save it
                                        triggered (rank 0's decides); NAN before train start */
    int64_t step_seen;               /* global_step at the last train batch end (or train start) */
    volt_cb_clock_fn clock;          /* the time train_time_interval reads; NULL: CLOCK_MONOTONIC */
    void *clock_ctx;
    volt_ckpt_snapshot *snap;        /* reused from save point to save point */
    pthread_t th;
    bool running;
    struct mc_job {                  /* what the background write does, decided on the main thread */
        char topk[VOLT_CB_PATH_MAX], last[VOLT_CB_PATH_MAX];
        bool link_last;              /* last as a hard link to topk (one process, rank 0) */
        char *remove[2];             /* removed after the file replacing each was written (sharded: committed) */
        volt_status st, topk_st, last_st;   /* the first failure; each file's */
        bool reported;
        char err[VOLT_CB_PATH_MAX + 512];
        bool commit;                 /* sharded: written shards wait for volt_trainer_snapshot_commit, and
                                        until then "best" is the best committed checkpoint (undo.best) */
    } job;
    struct mc_undo {                 /* the bookkeeping the save point in flight changed, put back for a
                                        file that was not written (mc_settle) */
        char *best;                  /* best before it, and its score */
        double best_score;
        char *pushed;                /* the top-k entry it added */
        char *evicted;               /* the entry it took out, its score and place */
        double evicted_score;
        int evicted_at;
        char *replaced;              /* the entry of the path it writes again (no version counter),
                                        its score and place (taken after evicted) */
        double replaced_score;
        int replaced_at;
        char *last;                  /* last before it */
        bool topk, last_set;         /* what is still to settle */
    } undo;
} mc;

#define MC_EXT ".safetensors"

/* ---- model_checkpoint.c --------------------------------------------------------------------- */
bool volt__mc_file_exists(const char *p);
const char *volt__mc_mode_str(volt_mode m);   /* "min" / "max" */
/* *dst = a copy of src (NULL: none); the old value freed. */
void volt__mc_set_str(char **dst, const char *src);
/* Remove a checkpoint file (with its shard folder), saying so on stderr when it cannot. */
void volt__mc_remove_file(const char *p);
/* May p go: a file of this callback's that nothing in the bookkeeping names (rank 0 only). */
bool volt__mc_may_remove(mc *m, const char *p);
/* last as a hard link to the top-k file just written: one process, rank 0. */
bool volt__mc_can_link(mc *m);
/* last as an atomic hard link to src; false when the file system refuses. */
bool volt__mc_link_last(const char *src, const char *last);

/* ---- model_checkpoint_state.c --------------------------------------------------------------- */
/* The callback's state_dict / load_state_dict (the JSON a checkpoint carries). */
char *volt__mc_state_dict(void *self);
volt_status volt__mc_load_state_dict(void *self, volt_trainer *t, const char *json);
/* The resolver: best path and score (while sharded shards wait for their commit, the best
 * committed checkpoint) and Lightning's "last": the newest last*.safetensors. */
const char *volt__mc_best(void *self);
double volt__mc_best_score(void *self);
const char *volt__mc_last(void *self);

/* ---- model_checkpoint_async.c --------------------------------------------------------------- */
void volt__mc_undo_free(struct mc_undo *u);
/* The save point's files are written (or failed): put back what a failed file changed. */
void volt__mc_settle(mc *m, bool topk_failed, bool last_failed);
/* Wait for the write in flight and settle by what it wrote (sharded writes: at the commit). */
void volt__mc_wait(mc *m);
/* Wait; commit sharded writes (collective); a failure, once, as the trainer's error. */
volt_status volt__mc_join(mc *m);
void volt__mc_job_free(struct mc_job *j);
/* Snapshot the state and start the background write of topk_path and/or last_path (their
 * folders made and agreed on by the save point); takes
 * *evicted and *prev_last (removed after their replacement is written) when they may go. */
volt_status volt__mc_save_async(mc *m, const char *topk_path, const char *last_path, char **evicted, char **prev_last);

#endif
