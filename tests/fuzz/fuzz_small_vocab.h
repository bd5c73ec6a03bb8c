/* A small WordPiece vocab (specials, ASCII, a few words and ## pieces, some CJK and accented
 * letters) for the targets that need a tokenizer and run without the downloaded one. */
#ifndef FUZZ_SMALL_VOCAB_H
#define FUZZ_SMALL_VOCAB_H
#include "fuzz_util.h"
#include "volt/tokenizer.h"

static inline volt_tokenizer *fuzz_tokenizer(int use_env) {
    const char *env = use_env ? getenv("VOLT_FUZZ_VOCAB") : NULL;   /* e.g. ~/.cache/volt/bert-base-uncased/vocab.txt */
    char p[300];
    if (env && *env && access(env, R_OK) == 0) snprintf(p, sizeof p, "%s", env);
    else {
        fuzz_path(p, sizeof p, "small_vocab.txt");
        FILE *f = fopen(p, "wb");
        if (!f) abort();
        fputs("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", f);
        for (int c = 33; c < 127; c++) fprintf(f, "%c\n##%c\n", c, c);
        static const char *const w[] = { "the", "un", "##aff", "##able", "hello", "world", "spam", "ham", "caf",
                                         "##\xc3\xa9", "\xe4\xb8\xad", "\xe6\x96\x87", "##ing", "play", "free", "money" };
        for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) fprintf(f, "%s\n", w[i]);
        fclose(f);
    }
    volt_tokenizer *tok = NULL;
    if (volt_tokenizer_load(NULL, p, &tok) != VOLT_OK) abort();
    return tok;
}
#endif
