/* The IDX reader (plain or gzip): the input is split at its first byte's fraction into an
 * images file and a labels file. */
#include "fuzz_util.h"
#include "volt/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t cut = 1 + (size - 1) * data[0] / 256;
    char img[300], lab[300], err[512];
    fuzz_path(img, sizeof img, "images.idx");
    fuzz_path(lab, sizeof lab, "labels.idx");
    fuzz_write(img, data + 1, cut - 1);
    fuzz_write(lab, data + cut, size - cut);
    volt_dataset *ds = NULL;
    if (volt_idx_dataset(img, lab, 0.5f, 0.25f, &ds, err, sizeof err) == VOLT_OK) {
        int64_t n = volt_dataset_len(ds);
        int64_t px = ds->fields[0].shape.d[0];
        float *x = malloc(sizeof(float) * (size_t)(px ? px : 1));
        int64_t y;
        void *dst[2] = { x, &y };
        for (int64_t i = 0; i < n && i < 4; i++) ds->ops->get(ds->self, i, dst);
        free(x);
        volt_dataset_destroy(ds);
    }
    return 0;
}
