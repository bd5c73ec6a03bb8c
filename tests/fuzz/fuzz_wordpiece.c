/* The WordPiece tokenizer (basic tokenizer: Unicode cleanup, accents, CJK, punctuation;
 * then WordPiece) on arbitrary text: ids stay in the vocab, counts agree, encode's layout
 * holds ([CLS] first, [SEP] last real token, [PAD] after). */
#include "fuzz_small_vocab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static volt_tokenizer *tok;
    if (!tok) tok = fuzz_tokenizer(1);
    int n = -1;
    if (volt_tokenizer_tokenize(tok, (const char *)data, size, NULL, 0, &n) != VOLT_OK) return 0;
    if (n < 0) abort();
    int cap = n < 4096 ? n : 4096;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(cap ? cap : 1));
    int n2 = -1;
    if (volt_tokenizer_tokenize(tok, (const char *)data, size, ids, cap, &n2) == VOLT_OK) {
        if (n2 != n) abort();
        for (int i = 0; i < cap; i++) if (ids[i] < 0 || ids[i] >= volt_tokenizer_vocab_size(tok)) abort();
    }
    free(ids);
    int32_t in[32], mask[32];
    int nt = 0;
    if (volt_tokenizer_encode(tok, (const char *)data, size, 32, in, mask, &nt) == VOLT_OK) {
        if (nt < 2 || nt > 32 || in[0] != volt_tokenizer_cls_id(tok) || in[nt - 1] != volt_tokenizer_sep_id(tok)) abort();
        for (int i = 0; i < 32; i++) if (mask[i] != (i < nt) || (i >= nt && in[i] != volt_tokenizer_pad_id(tok))) abort();
    }
    return 0;
}
