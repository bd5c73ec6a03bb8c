/* The safetensors reader on arbitrary bytes: open, list, verify every crc, read every
 * tensor as f32 where the dtype allows, read the metadata. */
#include "fuzz_util.h"
#include "volt/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char p[300], err[512];
    fuzz_path(p, sizeof p, "in.safetensors");
    fuzz_write(p, data, size);
    volt_st_file *f = NULL;
    if (volt_st_open(p, &f, err, sizeof err) != VOLT_OK) return 0;
    volt_st_verify_all(f, err, sizeof err);
    for (int i = 0; i < volt_st_count(f); i++) {
        volt_st_info in;
        if (volt_st_find(f, volt_st_name(f, i), &in) != VOLT_OK) abort();
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
    return 0;
}
