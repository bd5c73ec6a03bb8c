/* The vocab loader on arbitrary bytes; a vocab that loads must tokenize a fixed text. */
#include "fuzz_util.h"
#include "volt/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char p[300], eb[512];
    fuzz_path(p, sizeof p, "vocab.txt");
    fuzz_write(p, data, size);
    volt_tokenizer_config tc;
    volt_tokenizer_config_init(&tc);
    tc.errbuf = eb;
    tc.errbuf_size = sizeof eb;
    tc.lowercase = size & 1;
    volt_tokenizer *tok = NULL;
    if (volt_tokenizer_load(&tc, p, &tok) == VOLT_OK) {
        int32_t ids[64], mask[64];
        static const char text[] = "Hello, world! [CLS] caf\xc3\xa9 unaffable \xe4\xb8\xad";
        int nt = 0;
        volt_tokenizer_encode(tok, text, sizeof text - 1, 64, ids, mask, &nt);
        if (nt < 2 || nt > 64) abort();
        volt_tokenizer_destroy(tok);
    }
    return 0;
}
