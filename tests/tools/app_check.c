/* app_check: checks the app tests (tests/app_fashion_dist.sh, tests/app_text_classification.sh)
 * run on the apps' output. A helper, not a ctest of its own; C so the tests need no python.
 *
 *   app_check export REF FILE [TOL [NUMEL]]
 *       REF and FILE are valid safetensors files (volt_st_open, every crc checked) holding
 *       the same tensor names, all F32, the same shapes; with TOL >= 0 every value of FILE
 *       is within TOL of REF's (absolute); with NUMEL the tensors hold NUMEL values in all.
 *   app_check memtable LOG WORLD STATES SHARDS [REF_LOG]
 *       every memory table in LOG (volt_trainer_print_memory_report's output) has one row
 *       per rank 0..WORLD-1, and each row's optimizer column is the formula's
 *       4 bytes x STATES x padded params / SHARDS (to the printed 0.01 MiB); with REF_LOG
 *       (e.g. the ddp run's), rank 0's optimizer column over REF_LOG's is about 1/SHARDS
 *       (within 5%).
 *
 *   app_check same A B
 *       A and B (e.g. two last.safetensors checkpoints) hold the same tensors, bit for bit:
 *       names, dtypes, shapes and bytes; prints the count and a crc32 of all the bytes.
 *   app_check meta FILE KEY
 *       prints FILE's metadata value for KEY (e.g. volt.global_step); fails if absent.
 *   app_check losses A.csv B.csv RTOL [MIN_STEP [COLUMN]]
 *       the COLUMN (default train_loss) rows of two metrics.csv logs (CSVLogger: epoch,
 *       step, ...) at steps >= MIN_STEP: the same (epoch, step) pairs, one each, and each
 *       value within RTOL (relative; 0 = the same printed value). B may be several logs
 *       joined by '+' (a run and the run resumed from it, which logs into a new version).
 *
 * Prints what it checked and "ok", or "FAILED: why" and exits 1. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/core.h"
#include "volt/safetensors.h"

static int failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int failed(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("app_check: FAILED: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    return 1;
}

/* ---- export ---------------------------------------------------------------------------------- */
static int64_t shape_numel(const volt_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->d[d];
    return n;
}

static volt_st_file *open_verified(const char *path) {
    char err[1024] = "";
    volt_st_file *f = NULL;
    volt_status st = volt_st_open(path, &f, err, sizeof err);
    if (st >= 0) st = volt_st_verify_all(f, err, sizeof err);
    if (st < 0) {
        printf("app_check: FAILED: %s: %s (%s)\n", path, err, volt_status_str(st));
        volt_st_close(f);
        return NULL;
    }
    return f;
}

static int check_export(const char *ref_path, const char *path, double tol, int64_t want_numel) {
    volt_st_file *ref = open_verified(ref_path), *f = ref ? open_verified(path) : NULL;
    int rc = 1;
    if (!ref || !f) goto out;
    if (volt_st_count(f) != volt_st_count(ref)) {
        printf("app_check: FAILED: %s has %d tensors, %s has %d\n", path, volt_st_count(f), ref_path, volt_st_count(ref));
        goto out;
    }
    int64_t numel = 0;
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < volt_st_count(ref); i++) {
        const char *name = volt_st_name(ref, i);
        volt_st_info a, b;
        if (volt_st_find(ref, name, &a) < 0) { failed("%s: tensor '%s' listed but not found", ref_path, name); goto out; }
        if (volt_st_find(f, name, &b) < 0) { failed("%s: no tensor '%s'", path, name); goto out; }
        if (a.dtype != VOLT_F32 || b.dtype != VOLT_F32) { failed("tensor '%s' is not F32 in %s", name, path); goto out; }
        bool same = a.shape.ndim == b.shape.ndim;
        for (int d = 0; same && d < a.shape.ndim; d++) same = a.shape.d[d] == b.shape.d[d];
        if (!same) { failed("tensor '%s': shape differs from %s's", name, ref_path); goto out; }
        const int64_t n = shape_numel(&a.shape);
        numel += n;
        if (tol < 0) continue;
        float *x = malloc(sizeof(float) * (size_t)(n ? n : 1)), *y = malloc(sizeof(float) * (size_t)(n ? n : 1));
        char err[512] = "";
        if (!x || !y || volt_st_read_f32(ref, name, x, n, err, sizeof err) < 0 ||
            volt_st_read_f32(f, name, y, n, err, sizeof err) < 0) {
            free(x);
            free(y);
            failed("reading tensor '%s': %s", name, err);
            goto out;
        }
        for (int64_t k = 0; k < n; k++) {
            const double d = fabs((double)x[k] - (double)y[k]);
            if (!(d <= worst)) { worst = d; worst_name = name; }   /* NaN counts as worst */
        }
        free(x);
        free(y);
    }
    if (want_numel >= 0 && numel != want_numel) {
        printf("app_check: FAILED: %s holds %lld values, want %lld\n", path, (long long)numel, (long long)want_numel);
        goto out;
    }
    printf("app_check export: %s: %d tensors, %lld values, all F32, names and shapes as %s", path, volt_st_count(f),
           (long long)numel, ref_path);
    if (tol >= 0) printf("; max |diff| %.3g in '%s' (tol %.3g)", worst, worst_name, tol);
    printf("\n");
    if (tol >= 0 && !(worst <= tol)) { failed("%s: weights differ from %s's by more than the tolerance", path, ref_path); goto out; }
    rc = 0;
out:
    volt_st_close(ref);
    volt_st_close(f);
    return rc;
}

/* ---- memtable ------------------------------------------------------------------------------- */
#define MAX_RANKS 64
typedef struct memtables {
    int n_tables;
    long long padded;              /* of the first table */
    double optim0;                 /* rank 0's optimizer MiB, first table */
} memtables;

static int split_ws(char *line, char **tok, int max) {
    int n = 0;
    for (char *p = strtok(line, " \t\r\n"); p && n < max; p = strtok(NULL, " \t\r\n")) tok[n++] = p;
    return n;
}

static int parse_tables(const char *path, int world, int states, int shards, memtables *out) {
    FILE *f = fopen(path, "r");
    if (!f) return failed("cannot open '%s'", path);
    char line[4096], buf[4096];
    memset(out, 0, sizeof *out);
    int rc = 0, optim_col = -1, seen[MAX_RANKS] = { 0 }, rows = 0;
    long long padded = -1;
    bool in_table = false;
    for (;;) {
        const bool eof = !fgets(line, sizeof line, f);
        char *tok[64];
        int nt = 0;
        if (!eof) {
            snprintf(buf, sizeof buf, "%s", line);
            nt = split_ws(buf, tok, 64);
        }
        const bool is_row = in_table && optim_col >= 0 && nt > optim_col && strspn(tok[0], "0123456789") == strlen(tok[0]);
        if (in_table && !is_row && (eof || optim_col >= 0)) {   /* the table ended: all ranks, once each? */
            for (int r = 0; r < world; r++)
                if (seen[r] != 1) {
                    printf("app_check: FAILED: %s: table %d has rank %d %d times (want once; %d rows in all)\n", path,
                           out->n_tables, r, seen[r], rows);
                    rc = 1;
                }
            if (rows != world) {
                printf("app_check: FAILED: %s: table %d has %d rows, want %d\n", path, out->n_tables, rows, world);
                rc = 1;
            }
            in_table = false;
        }
        if (eof) break;
        if (!strncmp(line, "memory report:", 14)) {
            const char *pp = strchr(line, '(');
            if (!pp || sscanf(pp, "(%lld padded", &padded) != 1) { rc = failed("%s: no padded count in '%s'", path, line); break; }
            if (!out->n_tables) out->padded = padded;
            out->n_tables++;
            in_table = true;
            optim_col = -1;
            rows = 0;
            memset(seen, 0, sizeof seen);
            continue;
        }
        if (in_table && optim_col < 0) {   /* the column header line */
            for (int i = 0; i < nt; i++)
                if (!strcmp(tok[i], "optim")) { optim_col = i; break; }
            if (optim_col < 0) { rc = failed("%s: no 'optim' column in '%s'", path, line); break; }
            continue;
        }
        if (is_row) {
            const int r = atoi(tok[0]);
            const double optim = atof(tok[optim_col]);
            rows++;
            if (r < 0 || r >= MAX_RANKS || r >= world) {
                printf("app_check: FAILED: %s: row for rank %d, world is %d\n", path, r, world);
                rc = 1;
                continue;
            }
            seen[r]++;
            if (out->n_tables == 1 && r == 0) out->optim0 = optim;
            const double want = 4.0 * states * (double)padded / shards / (1024.0 * 1024.0);
            if (fabs(optim - want) > 0.006) {
                printf("app_check: FAILED: %s: rank %d optim %.2f MiB, the formula gives %.4f (4 x %d x %lld / %d)\n", path,
                       r, optim, want, states, padded, shards);
                rc = 1;
            }
        }
    }
    fclose(f);
    if (!rc && out->n_tables == 0) rc = failed("%s: no memory table", path);
    return rc;
}

static int check_memtable(const char *path, int world, int states, int shards, const char *ref_path) {
    memtables m, ref;
    if (parse_tables(path, world, states, shards, &m)) return 1;
    printf("app_check memtable: %s: %d table%s, %d row%s each (ranks 0..%d), optim %.2f MiB = 4 x %d x %lld / %d",
           path, m.n_tables, m.n_tables > 1 ? "s" : "", world, world > 1 ? "s" : "", world - 1, m.optim0, states,
           m.padded, shards);
    if (!ref_path) { printf("\n"); return 0; }
    /* the reference is unsharded (ddp): its rows hold the whole optimizer state */
    if (parse_tables(ref_path, world, states, 1, &ref)) return 1;
    const double ratio = m.optim0 / ref.optim0, want = 1.0 / shards;
    printf("; %.3f of %s's %.2f MiB (want ~%.3f)\n", ratio, ref_path, ref.optim0, want);
    if (!(fabs(ratio - want) <= 0.05 * want)) return failed("%s: optimizer state is not 1/SHARDS of %s's", path, ref_path);
    return 0;
}

/* ---- same / meta ------------------------------------------------------------------------------ */
static int check_same(const char *a_path, const char *b_path) {
    volt_st_file *a = open_verified(a_path), *b = a ? open_verified(b_path) : NULL;
    int rc = 1;
    if (!a || !b) goto out;
    if (volt_st_count(a) != volt_st_count(b)) {
        failed("%s has %d tensors, %s has %d", b_path, volt_st_count(b), a_path, volt_st_count(a));
        goto out;
    }
    uint32_t crc = 0;
    size_t bytes = 0;
    for (int i = 0; i < volt_st_count(a); i++) {
        const char *name = volt_st_name(a, i);
        volt_st_info x, y;
        if (volt_st_find(a, name, &x) < 0 || volt_st_find(b, name, &y) < 0) { failed("%s: no tensor '%s'", b_path, name); goto out; }
        bool same = x.dtype == y.dtype && x.shape.ndim == y.shape.ndim && x.nbytes == y.nbytes;
        for (int d = 0; same && d < x.shape.ndim; d++) same = x.shape.d[d] == y.shape.d[d];
        if (!same) { failed("tensor '%s': dtype or shape differs", name); goto out; }
        if (x.nbytes && memcmp(x.data, y.data, x.nbytes) != 0) {
            const float *fx = x.data, *fy = y.data;
            size_t k = 0;
            while (x.dtype == VOLT_F32 && k + 1 < x.nbytes / 4 && fx[k] == fy[k]) k++;
            if (x.dtype == VOLT_F32) failed("tensor '%s' differs: [%zu] %.9g in %s, %.9g in %s", name, k, fx[k], a_path, fy[k], b_path);
            else failed("tensor '%s' differs", name);
            goto out;
        }
        for (size_t k = 0; k < x.nbytes; k++) {   /* crc32 (bitwise), to print a checksum */
            crc ^= ((const unsigned char *)x.data)[k];
            for (int j = 0; j < 8; j++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
        }
        bytes += x.nbytes;
    }
    printf("app_check: %s and %s: %d tensors, %zu bytes, bit for bit the same (checksum %08x); ok\n", a_path, b_path,
           volt_st_count(a), bytes, (unsigned)crc);
    rc = 0;
out:
    volt_st_close(a);
    volt_st_close(b);
    return rc;
}

static int print_meta(const char *path, const char *key) {
    volt_st_file *f = open_verified(path);
    if (!f) return 1;
    const char *v = volt_st_meta(f, key);
    if (v) printf("%s\n", v);
    volt_st_close(f);
    return v ? 0 : failed("%s: no metadata '%s'", path, key);
}

/* ---- losses --------------------------------------------------------------------------------- */
enum { MAX_ROWS = 4096 };
typedef struct { long epoch, step; double loss; char text[64]; } loss_row;

/* The train_loss rows of a CSVLogger metrics.csv (header names the columns). */
static const char *g_col = "train_loss";
static int read_losses(const char *path, loss_row *rows, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) return failed("%s: cannot open", path);
    char line[4096];
    int ce = -1, cs = -1, cl = -1;
    *n = 0;
    if (fgets(line, sizeof line, f)) {
        int c = 0;
        for (char *tok = strtok(line, ",\r\n"); tok; tok = strtok(NULL, ",\r\n"), c++) {
            if (!strcmp(tok, "epoch")) ce = c;
            if (!strcmp(tok, "step")) cs = c;
            if (!strcmp(tok, g_col)) cl = c;
        }
    }
    if (ce < 0 || cs < 0 || cl < 0) { fclose(f); return failed("%s: no epoch, step and %s columns", path, g_col); }
    while (fgets(line, sizeof line, f)) {
        char *fields[64] = { 0 }, *p = line;
        int c = 0;
        while (c < 64) {   /* empty fields kept: split by hand */
            fields[c++] = p;
            char *comma = strchr(p, ',');
            if (!comma) break;
            *comma = 0;
            p = comma + 1;
        }
        for (int k = 0; k < c; k++) fields[k][strcspn(fields[k], "\r\n")] = 0;
        if (cl >= c || !fields[cl][0]) continue;
        if (*n == MAX_ROWS) { fclose(f); return failed("%s: more than %d loss rows", path, MAX_ROWS); }
        loss_row *r = &rows[(*n)++];
        r->epoch = atol(fields[ce]);
        r->step = atol(fields[cs]);
        r->loss = atof(fields[cl]);
        snprintf(r->text, sizeof r->text, "%s", fields[cl]);
    }
    fclose(f);
    return 0;
}

static int check_losses(const char *a_path, const char *b_path, double rtol, long min_step) {
    static loss_row a[MAX_ROWS], b[MAX_ROWS];
    int na = 0, nb = 0, used = 0;
    if (read_losses(a_path, a, &na)) return 1;
    char paths[4096];
    snprintf(paths, sizeof paths, "%s", b_path);
    for (char *save = NULL, *p = strtok_r(paths, "+", &save); p; p = strtok_r(NULL, "+", &save)) {
        int k = 0;
        if (read_losses(p, b + nb, &k)) return 1;
        nb += k;
        if (nb > MAX_ROWS - 1024) return failed("%s: too many loss rows", b_path);
    }
    double worst = 0;
    for (int i = 0; i < na; i++) {
        if (a[i].step < min_step) continue;
        int hits = 0, j0 = -1;
        for (int j = 0; j < nb; j++)
            if (b[j].epoch == a[i].epoch && b[j].step == a[i].step) { hits++; j0 = j; }
        if (hits != 1) return failed("epoch %ld step %ld: %d %s rows in %s, want 1", a[i].epoch, a[i].step, hits, g_col, b_path);
        const double e = fabs(a[i].loss - b[j0].loss) / fabs(a[i].loss);
        if (rtol == 0 ? strcmp(a[i].text, b[j0].text) != 0 : !(e <= rtol))
            return failed("epoch %ld step %ld: %s %s in %s, %s in %s", a[i].epoch, a[i].step, g_col, a[i].text, a_path,
                          b[j0].text, b_path);
        if (e > worst) worst = e;
        used++;
    }
    int nb_used = 0;
    for (int j = 0; j < nb; j++) nb_used += b[j].step >= min_step;
    if (nb_used != used) return failed("%s has %d %s rows from step %ld, %s has %d", b_path, nb_used, g_col, min_step, a_path, used);
    if (used == 0) return failed("no %s rows from step %ld", g_col, min_step);
    printf("app_check: %d %s rows from step %ld agree (worst relative difference %.2e); ok\n", used, g_col, min_step, worst);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 4 && !strcmp(argv[1], "export")) {
        const double tol = argc >= 5 ? atof(argv[4]) : -1.0;
        const int64_t numel = argc >= 6 ? atoll(argv[5]) : -1;
        return check_export(argv[2], argv[3], tol, numel);
    }
    if ((argc == 6 || argc == 7) && !strcmp(argv[1], "memtable")) {
        const int world = atoi(argv[3]), states = atoi(argv[4]), shards = atoi(argv[5]);
        if (world < 1 || world > MAX_RANKS || states < 0 || shards < 1) return failed("bad arguments (try without arguments for the usage)");
        return check_memtable(argv[2], world, states, shards, argc == 7 ? argv[6] : NULL);
    }
    if (argc == 4 && !strcmp(argv[1], "same")) return check_same(argv[2], argv[3]);
    if (argc == 4 && !strcmp(argv[1], "meta")) return print_meta(argv[2], argv[3]);
    if (argc >= 5 && argc <= 7 && !strcmp(argv[1], "losses")) {
        if (argc == 7) g_col = argv[6];
        return check_losses(argv[2], argv[3], atof(argv[4]), argc >= 6 ? atol(argv[5]) : 0);
    }
    fprintf(stderr, "usage: app_check export REF FILE [TOL [NUMEL]]\n"
                    "       app_check memtable LOG WORLD STATES SHARDS [REF_LOG]\n"
                    "       app_check same A B\n"
                    "       app_check meta FILE KEY\n"
                    "       app_check losses A.csv B.csv RTOL [MIN_STEP [COLUMN]]\n");
    return 2;
}
