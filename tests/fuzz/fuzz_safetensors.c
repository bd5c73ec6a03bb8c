/* The safetensors reader on arbitrary bytes: open, list, verify every crc, read every
 * tensor as f32 where the dtype allows, read the metadata; then the same through
 * volt_st_open_some with every other tensor left unread (its reads must fail cleanly); then
 * through volt_st_open_deferred with every other tensor left in the file: a read before the
 * check must fail, a tensor the check passed reads back (the file does not change here). */
#include "fuzz_util.h"
#include "volt/safetensors.h"

static bool every_other(const char *name, void *ctx) {
    (void)name;
    return (*(int *)ctx)++ % 2 == 0;
}

static void exercise(const char *p, bool some) {
    char err[512];
    volt_st_file *f = NULL;
    int k = 0;
    if ((some ? volt_st_open_some(p, every_other, &k, &f, err, sizeof err) : volt_st_open(p, &f, err, sizeof err)) != VOLT_OK)
        return;
    volt_st_verify_all(f, err, sizeof err);
    for (int i = 0; i < volt_st_count(f); i++) {
        volt_st_info in;
        if (volt_st_find(f, volt_st_name(f, i), &in) != VOLT_OK) abort();
        if ((in.data == NULL) != (some && i % 2 == 1)) abort();   /* read exactly what was asked for */
        int64_t n = 1;
        for (int d = 0; d < in.shape.ndim; d++) n *= in.shape.d[d];
        if (n < (1 << 20)) {
            float *dst = malloc(sizeof(float) * (size_t)(n ? n : 1));
            volt_st_read_f32(f, volt_st_name(f, i), dst, n, err, sizeof err);
            free(dst);
        }
        volt_st_verify(f, volt_st_name(f, i), err, sizeof err);
    }
    for (int i = 0; i < volt_st_meta_count(f); i++) {
        const char *k, *v;
        if (volt_st_meta_at(f, i, &k, &v) == VOLT_OK && (!k || !v)) abort();
    }
    volt_st_close(f);
}

static void exercise_deferred(const char *p) {
    char err[512];
    volt_st_file *f = NULL;
    int k = 0;
    if (volt_st_open_deferred(p, NULL, every_other, &k, &f, err, sizeof err) != VOLT_OK) return;
    size_t cap = 0;
    for (int i = 0; i < volt_st_count(f); i++) {
        volt_st_info in;
        if (volt_st_find(f, volt_st_name(f, i), &in) != VOLT_OK) abort();
        if (!in.data && in.nbytes > cap) cap = in.nbytes;
    }
    unsigned char *buf = cap < (16u << 20) ? malloc(cap ? cap : 1) : NULL;
    for (int i = 0; buf && i < volt_st_count(f); i++) {
        volt_st_info in;
        volt_st_find(f, volt_st_name(f, i), &in);
        if (!in.data && in.nbytes && volt_st_read_deferred(f, volt_st_name(f, i), buf, cap, err, sizeof err) != VOLT_ERR_STATE)
            abort();   /* not checked yet */
    }
    bool ok = volt_st_check(f, err, sizeof err) == VOLT_OK;
    for (int i = 0; ok && buf && i < volt_st_count(f); i++) {
        volt_st_info in;
        volt_st_find(f, volt_st_name(f, i), &in);
        if (!in.data && in.nbytes && volt_st_read_deferred(f, volt_st_name(f, i), buf, cap, err, sizeof err) != VOLT_OK)
            abort();   /* checked, unchanged: it reads */
    }
    free(buf);
    volt_st_close(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char p[300];
    fuzz_path(p, sizeof p, "in.safetensors");
    fuzz_write(p, data, size);
    exercise(p, false);
    exercise(p, true);
    exercise_deferred(p);
    return 0;
}
