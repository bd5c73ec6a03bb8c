/* The token cache reader: a fixed corpus is tokenized once into a cache folder; each input
 * replaces the cache file, and the dataset is made again: a file that does not check out
 * must be rebuilt (never trusted), so the tokens are always the computed ones. */
#include <dirent.h>
#include "fuzz_small_vocab.h"
#include "volt/text.h"
#include "volt/data.h"

static volt_tokenizer *tok;
static volt_corpus *corpus;
static char cache_dir[300], cache_file[600];
static int32_t want[3][16];

static void read_ids(volt_dataset *ds, int32_t out[3][16]) {
    for (int i = 0; i < 3; i++) {
        int32_t ids[16], mask[16];
        int64_t y;
        void *dst[3] = { ids, mask, &y };
        if (ds->ops->get(ds->self, i, dst) != VOLT_OK) abort();
        memcpy(out[i], ids, sizeof ids);
    }
}

static void setup(void) {
    tok = fuzz_tokenizer(0);   /* small: the cache key hashes the whole vocab per call */
    if (volt_corpus_create("fuzz", &corpus) != VOLT_OK) abort();
    static const char *const t[] = { "hello world, the unaffable spam", "free money \xe4\xb8\xad\xe6\x96\x87", "" };
    for (int i = 0; i < 3; i++) volt_corpus_add(corpus, t[i], strlen(t[i]), i % 2);
    fuzz_path(cache_dir, sizeof cache_dir, "tokens");
    volt_dataset *ds = NULL;
    char err[512];
    if (volt_text_dataset(corpus, tok, 16, cache_dir, &ds, NULL, err, sizeof err) != VOLT_OK) abort();
    read_ids(ds, want);
    volt_dataset_destroy(ds);
    DIR *d = opendir(cache_dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".vtok")) snprintf(cache_file, sizeof cache_file, "%s/%s", cache_dir, e->d_name);
    if (d) closedir(d);
    if (!cache_file[0]) abort();
    if (getenv("FUZZ_DUMP_SEED")) {   /* the real cache file, as a seed */
        FILE *in = fopen(cache_file, "rb"), *out = fopen(getenv("FUZZ_DUMP_SEED"), "wb");
        char b[4096];
        size_t n;
        while (in && out && (n = fread(b, 1, sizeof b, in)) > 0) fwrite(b, 1, n, out);
        if (in) fclose(in);
        if (out) fclose(out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tok) setup();
    fuzz_write(cache_file, data, size);
    volt_dataset *ds = NULL;
    char err[512];
    bool hit = false;
    if (volt_text_dataset(corpus, tok, 16, cache_dir, &ds, &hit, err, sizeof err) != VOLT_OK) abort();
    int32_t got[3][16];
    read_ids(ds, got);
    /* a rebuilt file holds the computed tokens; a loaded one (crc forged) at least valid ids */
    if (!hit && memcmp(got, want, sizeof got) != 0) abort();
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 16; k++) if (got[i][k] < 0 || got[i][k] >= volt_tokenizer_vocab_size(tok)) abort();
    volt_dataset_destroy(ds);
    return 0;
}
