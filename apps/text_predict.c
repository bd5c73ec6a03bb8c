/* volt-text-classification predict: texts in, one (index, label, probability) row out each. */
#include <fcntl.h>
#include "text_app.h"

/* ---- predict ----------------------------------------------------------------------------------- */

static void put_row(const pred_out *p, int64_t index, int64_t label, double prob) {
    if (p->jsonl) fprintf(p->f, "{\"index\": %lld, \"label\": %lld, \"probability\": %.6f}\n", (long long)index, (long long)label, prob);
    else fprintf(p->f, "%lld,%lld,%.6f\n", (long long)index, (long long)label, prob);
}

/* One row per text: its index, the argmax label and its softmax probability. */
volt_status text_pred_write(void *ctx, const volt_batch *b, const volt_tensor *logits) {
    pred_out *p = ctx;
    if (logits->dtype != VOLT_F32 || logits->shape.ndim != 2) return VOLT_ERR_DTYPE;
    const int64_t B = logits->shape.d[0], C = logits->shape.d[1];
    if (p->collect && !b->sample_ids) return VOLT_ERR_STATE;
    size_t bytes = volt_tensor_bytes(logits);
    if (bytes > p->cap) {   /* logits live on the device: one copy per batch into a buffer grown once */
        float *nb = realloc(p->buf, bytes);
        if (!nb) return VOLT_ERR_NOMEM;
        p->buf = nb;
        p->cap = bytes;
    }
    if (p->collect && p->n_rows + B > p->cap_rows) return VOLT_ERR_STATE;   /* sized for the whole input before predict */
    volt_status st = volt_tensor_to_host(logits, p->buf);
    if (st < 0) return st;
    const float *x = p->buf;
    for (int64_t r = 0; r < B; r++) {
        const float *row = x + r * C;
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (row[c] > row[best]) best = c;
        double z = 0;
        for (int64_t c = 0; c < C; c++) z += exp((double)row[c] - (double)row[best]);
        double prob = 1.0 / z;
        if (p->collect) p->rows[p->n_rows++] = (pred_row){ b->sample_ids[r], best, prob };
        else put_row(p, p->next, best, prob);
        p->next++;
    }
    return p->f && ferror(p->f) ? VOLT_ERR_IO : VOLT_OK;
}

static int by_index(const void *a, const void *b) {
    const int64_t x = ((const pred_row *)a)->index, y = ((const pred_row *)b)->index;
    return (x > y) - (x < y);
}

/* An allocation every rank needs before the next collective: all agree, or all stop. */
static int agree_alloc(volt_trainer *t, bool ok, const char *what) {
    bool all = false;
    volt_status st = volt_trainer_reduce_boolean_decision(t, ok, true, &all);
    if (st < 0) return app_fail_run(APP, "gathering the predictions", st, t);
    if (!all) {
        if (!ok) fprintf(stderr, APP ": rank %d: out of memory for %s\n", volt_trainer_rank(t), what);
        return 1;
    }
    return 0;
}

int text_pred_reserve(volt_trainer *t, pred_out *p, int64_t n_texts, int64_t batch) {
    const int64_t cap = n_texts + batch;   /* a rank's shard, padded, is never more than every text */
    p->rows = malloc(sizeof *p->rows * (size_t)cap);
    p->cap_rows = p->rows ? cap : 0;
    return agree_alloc(t, p->rows != NULL, "the predictions");
}

int text_pred_gather(volt_trainer *t, pred_out *p) {
    const int world = volt_trainer_world_size(t), rank = volt_trainer_rank(t);
    int64_t *cnt = calloc((size_t)world, sizeof *cnt), total = 0, most = 0;
    if (agree_alloc(t, cnt != NULL, "the ranks' prediction counts")) { free(cnt); return 1; }
    for (int r = 0; r < world; r++) {   /* every rank learns every count: the sizes of the moves below */
        int64_t v = rank == r ? p->n_rows : 0;
        volt_status st = volt_trainer_broadcast(t, &v, sizeof v, r);
        if (st < 0) { free(cnt); return app_fail_run(APP, "gathering the predictions", st, t); }
        cnt[r] = v;
        total += v;
        most = v > most ? v : most;
    }
    /* rank 0 receives into one array of them all; another rank into a buffer for the largest */
    const int64_t need = rank == 0 ? total : most;
    pred_row *in = need > 0 ? malloc(sizeof *in * (size_t)need) : NULL;
    if (agree_alloc(t, need == 0 || in != NULL, "the gathered predictions")) { free(in); free(cnt); return 1; }
    int64_t at = 0;
    for (int r = 0; r < world; r++) {
        if (cnt[r] == 0) continue;
        pred_row *buf = rank == r ? p->rows : rank == 0 ? in + at : in;
        volt_status st = volt_trainer_broadcast(t, buf, sizeof *buf * (size_t)cnt[r], r);
        if (st < 0) { free(in); free(cnt); return app_fail_run(APP, "gathering the predictions", st, t); }
        if (rank == 0 && r == 0) memcpy(in, p->rows, sizeof *in * (size_t)cnt[0]);
        at += cnt[r];
    }
    free(cnt);
    if (rank != 0) {
        free(in);
        return 0;
    }
    qsort(in, (size_t)total, sizeof *in, by_index);
    int64_t n = 0;
    for (int64_t i = 0; i < total; i++)   /* the wrap-around's repeats: the same text, once */
        if (n == 0 || in[i].index != in[n - 1].index) in[n++] = in[i];
    free(p->rows);
    p->rows = in;
    p->n_rows = p->cap_rows = n;
    for (int64_t i = 0; i < n; i++) put_row(p, p->rows[i].index, p->rows[i].label, p->rows[i].prob);
    if (ferror(p->f)) {
        fprintf(stderr, APP ": writing the predictions failed: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

/* predict.output opened for writing: "-" is stdout; a regular file (or a new one) is written
 * as a temporary file beside it (its name in tmp), which pred_commit renames over it, so a
 * predict that fails leaves an earlier output whole; the new file keeps an existing one's
 * permission bits, a new one gets fopen's (0666 less the umask). Anything else (a FIFO,
 * /dev/stderr, a symbolic link, which a rename would replace) is written in place. NULL with
 * the message printed. */
FILE *pred_open(const char *path, char *tmp, size_t tmplen) {
    tmp[0] = 0;
    if (!strcmp(path, "-")) return stdout;
    struct stat sb;
    const bool exists = lstat(path, &sb) == 0;
    if (exists && !S_ISREG(sb.st_mode)) {
        FILE *f = fopen(path, "w");
        if (!f) fprintf(stderr, APP ": predict.output '%s': %s\n", path, strerror(errno));
        return f;
    }
    int fd = -1;
    for (int k = 0; fd < 0 && k < 100; k++) {   /* O_EXCL: a name nobody else holds */
        if (snprintf(tmp, tmplen, "%s.%ld.%d.tmp", path, (long)getpid(), k) >= (int)tmplen) {
            fprintf(stderr, APP ": predict.output '%s': the path is too long\n", path);
            tmp[0] = 0;
            return NULL;
        }
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, exists ? (sb.st_mode & 07777) : 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        fprintf(stderr, APP ": predict.output '%s': %s\n", path, strerror(errno));
        tmp[0] = 0;
        return NULL;
    }
    if (exists) (void)fchmod(fd, sb.st_mode & 07777);   /* open's mode went through the umask */
    FILE *f = fdopen(fd, "w");
    if (!f) {
        fprintf(stderr, APP ": predict.output '%s': %s\n", path, strerror(errno));
        close(fd);
        unlink(tmp);
        tmp[0] = 0;
    }
    return f;
}

/* Closes f and, when pred_open gave it a temporary name, renames that over path. 0, or 1 with
 * the message printed (the temporary file removed). */
int pred_commit(FILE *f, const char *path, char *tmp) {
    int rc = fclose(f) != 0;
    if (!rc && *tmp && rename(tmp, path) != 0) rc = 1;
    if (rc) {
        fprintf(stderr, APP ": writing '%s' failed: %s\n", path, strerror(errno));
        if (*tmp) unlink(tmp);
    }
    tmp[0] = 0;
    return rc;
}

/* The texts of predict.input, one per line (CR/LF stripped, empty lines kept as empty texts
 * so output row i is input line i). */
int text_read_texts(const opts *o, app *a) {
    const int world = app_env_world();
    if (!strcmp(o->pred_in, "-") && world > 1) {   /* mpirun hands stdin to rank 0 alone */
        if (app_env_rank() == 0)
            fprintf(stderr, APP ": predict.input '-' (stdin) reaches rank 0 alone under %d ranks: give a file every rank "
                    "reads (--predict.input)\n", world);
        return 1;
    }
    FILE *f = !strcmp(o->pred_in, "-") ? stdin : fopen(o->pred_in, "r");
    if (!f) { fprintf(stderr, APP ": predict.input '%s': %s\n", o->pred_in, strerror(errno)); return 1; }
    volt_status st = volt_corpus_create("predict", &a->all);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while (st == VOLT_OK && (n = getline(&line, &cap, f)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        st = volt_corpus_add(a->all, line, (size_t)n, 0);
    }
    const int rerr = ferror(f) ? errno : 0;   /* getline's -1 is also a read error (a folder: EISDIR) */
    free(line);
    if (f != stdin) fclose(f);
    if (st < 0) return fail("reading predict.input", st, o->pred_in);
    if (rerr) { fprintf(stderr, APP ": predict.input '%s': %s\n", o->pred_in, strerror(rerr)); return 1; }
    if (volt_corpus_len(a->all) == 0) { fprintf(stderr, APP ": predict.input '%s' has no lines\n", o->pred_in); return 1; }
    return 0;
}

/* The classifier's rows in a checkpoint, single-file or sharded: its class count, from the
 * header alone (the tensors' bytes are read once, by the load). */
int text_ckpt_classes(const char *path, int64_t *n) {
    char err[PATH_N + 256] = "";
    volt_shape sh;
    volt_status st = volt_checkpoint_param_shape(path, "classifier.bias", &sh, err, sizeof err);
    if (st < 0) return fail("reading the checkpoint's class count", st, err);
    if (sh.ndim != 1 || sh.d[0] < 1) {
        fprintf(stderr, APP ": checkpoint '%s': classifier.bias is not a vector of classes\n", path);
        return 1;
    }
    *n = sh.d[0];
    return 0;
}

