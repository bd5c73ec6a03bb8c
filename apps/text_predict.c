/* volt-text-classification predict: texts in, one (index, label, probability) row out each. */
#include <fcntl.h>
#include "text_app.h"

/* ---- predict ----------------------------------------------------------------------------------- */

/* One row per text: its index, the argmax label and its softmax probability. */
volt_status text_pred_write(void *ctx, const volt_batch *b, const volt_tensor *logits) {
    pred_out *p = ctx;
    if (logits->dtype != VOLT_F32 || logits->shape.ndim != 2) return VOLT_ERR_DTYPE;
    const int64_t B = logits->shape.d[0], C = logits->shape.d[1];
    size_t bytes = volt_tensor_bytes(logits);
    if (bytes > p->cap) {   /* logits live on the device: one copy per batch into a buffer grown once */
        float *nb = realloc(p->buf, bytes);
        if (!nb) return VOLT_ERR_NOMEM;
        p->buf = nb;
        p->cap = bytes;
    }
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
        if (p->jsonl) fprintf(p->f, "{\"index\": %lld, \"label\": %lld, \"probability\": %.6f}\n", (long long)p->next, (long long)best, prob);
        else fprintf(p->f, "%lld,%lld,%.6f\n", (long long)p->next, (long long)best, prob);
        p->next++;
    }
    return ferror(p->f) ? VOLT_ERR_IO : VOLT_OK;
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

