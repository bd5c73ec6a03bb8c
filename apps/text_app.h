/* apps/text_app.h — what the files of volt-text-classification share (text_classification.c:
 * options and main; text_data.c: corpus, tokenizer, datasets, loaders; text_predict.c:
 * predict's input and output). Private to the app. */
#ifndef VOLT_APP_TEXT_APP_H
#define VOLT_APP_TEXT_APP_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "volt/core.h"
#include "volt/data.h"
#include "volt/trainer.h"
#include "volt/optim.h"
#include "volt/tokenizer.h"
#include "volt/text.h"
#include "volt/distilbert.h"
#include "volt/distilbert_hf.h"
#include "volt/cli.h"
#include "volt/safetensors.h"
#include "app_common.h"


#define APP "volt-text-classification"
#define PATH_N 4096
#define TEXT_MAX_CLASSES (1 << 20)   /* model.num_classes' bound, and a corpus's */

typedef enum data_kind { DATA_IMDB, DATA_CSV, DATA_TSV, DATA_SPAM } data_kind;

typedef struct opts {
    const char *data;             /* the --data spec as given */
    data_kind kind;
    char data_path[PATH_N];       /* folder or file the spec names (resolved) */
    char vocab[PATH_N];           /* resolved: --vocab, else <pretrained>/vocab.txt, else ~/.cache */
    bool vocab_given;
    const char *preset, *pretrained, *cache_dir;
    bool no_cache;
    int max_length;
    int64_t batch_size, epochs;   /* batch_size: per rank */
    float lr, weight_decay, attention_dropout;   /* attention_dropout < 0: the model's default */
    const char *no_decay;         /* optimizer.no_decay: patterns of a weight-decay-0 group, or NULL */
    volt_optim_kind optimizer;
    const char *schedule;         /* "constant", "linear" or "plateau" */
    int64_t warmup_steps;
    int64_t plateau_patience;     /* plateau: torch's patience and factor */
    double plateau_factor;
    bool split_given, split_is_frac;
    int64_t split_n[3];
    double split_f[3];
    bool drop_last;               /* the train loader's drop_last */
    bool lowercase;               /* the tokenizer's (tokenizer_config.json's do_lower_case) */
    bool strip_accents;           /* the tokenizer's: data.strip_accents, else tokenizer_config.json's, else lowercase */
    int strip_accents_hf;         /* as given (flag or tokenizer_config.json): 1, 0, or -1 for null (follow lowercase);
                                     what --export-hf writes */
    int64_t num_classes;          /* model.num_classes; -1 = from the corpus / checkpoint */
    const char *sub;              /* fit, validate, test, predict */
    const char *ckpt;             /* ckpt_path */
    const char *pred_in, *pred_out, *pred_format;
    const char *export_hf;        /* after test: a Hugging Face folder (model.safetensors, config.json, vocab) */
    app_trainer_opts tr;          /* trainer.*, data.num_workers, ... (apps/app_common.h) */
} opts;

/* Everything main allocates, released in one place (so error paths leak nothing). */
typedef struct app {
    volt_corpus *all, *part[3];
    volt_tokenizer *tok;
    volt_dataset *ds[3];
    volt_loader *ld[3];
    void *model;
    volt_trainer *t;
    bool zero;         /* rank 0, which prints the informational lines (errors: any rank) */
    double read_s;     /* seconds text_load_corpus took (reading and parsing the files) */
    int32_t *ntok[3];  /* --throughput: each sample's non-padding tokens, per split (text_count_tokens) */
    volt_distilbert_config mc;   /* the model's config (FLOPs per batch for --throughput) */
} app;

static inline void app_free(app *a) {
    volt_trainer_destroy(a->t);
    for (int i = 0; i < 3; i++) {
        free(a->ntok[i]);
        volt_loader_destroy(a->ld[i]);
        volt_dataset_destroy(a->ds[i]);
        volt_corpus_destroy(a->part[i]);
    }
    volt_distilbert_destroy(a->model);
    volt_tokenizer_destroy(a->tok);
    volt_corpus_destroy(a->all);
}

static inline int fail(const char *what, volt_status st, const char *msg) { return app_fail(APP, what, st, msg); }


static inline bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static inline bool is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* What is wrong with a path that should be a regular file: "not found", "is a directory",
 * "is not a regular file" (a FIFO, socket or device), or why stat failed. */
static inline const char *not_file_why(const char *p) {
    struct stat st;
    if (stat(p, &st) != 0) return errno == ENOENT || errno == ENOTDIR ? "not found" : strerror(errno);
    return S_ISDIR(st.st_mode) ? "is a directory" : S_ISREG(st.st_mode) ? "is a regular file" : "is not a regular file";
}

const char *text_kind_name(data_kind k);
int text_load_corpus(const opts *o, app *a);
int text_split_corpus(const opts *o, app *a, int64_t n_out[3]);
int text_load_tokenizer(const opts *o, app *a);
int text_make_datasets(const opts *o, app *a);
int text_make_loaders(const opts *o, app *a);
/* --throughput: a->ntok from the datasets' attention masks, and the monitor's fns: items =
 * the batch's non-padding tokens (looked up by sample id: no device read), FLOPs = the
 * model's for the batch's shape (volt_distilbert_flops; training in fit, forward otherwise). */
int text_count_tokens(app *a);
int64_t text_batch_tokens(void *ctx, volt_trainer *t, const volt_batch *b);
double text_batch_flops(void *ctx, volt_trainer *t, const volt_batch *b);

/* One prediction: the text's index (its input line), the argmax label, its probability. */
typedef struct pred_row { int64_t index, label; double prob; } pred_row;
typedef struct pred_out {
    FILE *f;               /* rank 0's output (NULL on the other ranks) */
    bool jsonl;
    bool collect;          /* several ranks: rows kept for text_pred_gather, not written */
    int64_t next;          /* index of the next text (one process) */
    volt_status err;
    float *buf;            /* host copy of a batch's logits (freed by the caller) */
    size_t cap;
    pred_row *rows;        /* collect: this rank's rows; after the gather rank 0's holds them all */
    int64_t n_rows, cap_rows;
} pred_out;
volt_status text_pred_write(void *ctx, const volt_batch *b, const volt_tensor *logits);
/* Several ranks (collective): every rank's rows to rank 0, in input order and each text once
 * (a rank's shard is padded by wrapping around), written to p->f there. 0, or 1 with the
 * message printed once. */
int text_pred_gather(volt_trainer *t, pred_out *p);
/* Several ranks (collective), before predict: room for this rank's rows (every text and a batch:
 * a shard never holds more), so no rank runs out of memory alone inside predict. 0, or 1 said. */
int text_pred_reserve(volt_trainer *t, pred_out *p, int64_t n_texts, int64_t batch);
int text_read_texts(const opts *o, app *a);
FILE *pred_open(const char *path, char *tmp, size_t tmplen);
int pred_commit(FILE *f, const char *path, char *tmp);
int text_ckpt_classes(const char *path, int64_t *n);
/* apps/text_fingerprint.c: fit's run fingerprint (the data, tokenizer and --pretrained folder
 * by content; JSON) into out; and, resuming a checkpoint that records the older path-based
 * form, that form into fp when it matches this run's, else a refusal naming what differs
 * (1; printed on rank 0). Both: 0 to go on, else the exit status, message printed. */
int text_fingerprint(const opts *o, const app *a, const int64_t n_split[3], int n_classes,
                     const volt_distilbert_config *mc, char *out, size_t n);
int text_resume_legacy(const opts *o, const char *ckpt, const char *ckdir, bool anyway, const int64_t n_split[3],
                       int n_classes, const volt_distilbert_config *mc, bool zero, char *fp, size_t n);

#endif
