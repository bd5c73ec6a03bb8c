/* CSV and TSV corpus readers: the first byte picks the format, the rest is the file. */
#include "fuzz_util.h"
#include "volt/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char p[300], err[512];
    fuzz_path(p, sizeof p, "corpus.txt");
    fuzz_write(p, data + 1, size - 1);
    volt_corpus *c = NULL;
    volt_status st = data[0] & 1 ? volt_corpus_load_tsv(p, &c, err, sizeof err) : volt_corpus_load_csv(p, &c, err, sizeof err);
    if (st == VOLT_OK) {
        if (volt_corpus_num_classes(c) < 0) abort();
        for (int64_t i = 0; i < volt_corpus_len(c); i++) {
            size_t n;
            const char *t = volt_corpus_text(c, i, &n);
            if (!t || t[n] != 0 || volt_corpus_label(c, i) < 0 || volt_corpus_label(c, i) >= volt_corpus_num_classes(c)) abort();
        }
    }
    volt_corpus_destroy(c);
    return 0;
}
