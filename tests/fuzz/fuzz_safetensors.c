/* The safetensors reader on arbitrary bytes: open, list, verify every crc, read every
 * tensor as f32 where the dtype allows, read the metadata; then the same through
 * volt_st_open_some with every other tensor left unread (its reads must fail cleanly). */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char p[300];
    fuzz_path(p, sizeof p, "in.safetensors");
    fuzz_write(p, data, size);
    exercise(p, false);
    exercise(p, true);
    return 0;
}
