/* volt/tokenizer.h — the BERT WordPiece tokenizer (bert-base-uncased and friends).
 *
 * Behaves like Hugging Face's BertTokenizer (BasicTokenizer + WordpieceTokenizer) over a
 * standard one-token-per-line vocab.txt (id = line number - 1): clean text (drop NUL,
 * U+FFFD and control characters; whitespace -> space), put spaces around CJK ideographs,
 * lowercase, strip accents (NFD, drop Mn marks), split on whitespace and punctuation, then
 * greedy longest-match-first WordPiece with "##" continuations; [UNK] for a word that
 * cannot be split or is longer than max_input_chars_per_word code points. The literal
 * special tokens ([CLS] [SEP] [PAD] [UNK] [MASK]) in the input map to their ids, as in
 * Hugging Face. Input is UTF-8; invalid bytes read as U+FFFD (and are then dropped).
 *
 * A loaded tokenizer is immutable: any number of threads may call tokenize/encode on the
 * same one at once. Those calls allocate nothing unless max_input_chars_per_word > 256.
 * Getting the bert-base-uncased vocab: scripts/fetch_vocab.sh (see docs/TOKENIZER.md). */
#ifndef VOLT_TOKENIZER_H
#define VOLT_TOKENIZER_H

#include "volt/export.h"

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "volt/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct volt_tokenizer volt_tokenizer;

typedef struct volt_tokenizer_config {
    uint32_t version;              /* VOLT_TOKENIZER_CONFIG_VERSION, set by _init */
    bool lowercase;                /* lowercase the text (true; false for cased vocabs) */
    bool strip_accents;            /* NFD + drop Mn marks: "Café" -> "cafe" (true) */
    bool tokenize_chinese_chars;   /* every CJK ideograph is its own word (true) */
    bool match_special_tokens;     /* literal "[CLS]" etc. in the text -> their ids (true,
                                      as HF); false tokenizes them as plain text */
    int max_input_chars_per_word;  /* longer words become [UNK] (100); must be >= 1 */
    char *errbuf;                  /* optional: volt_tokenizer_load writes its error
                                      message here (NUL-terminated) when it fails */
    size_t errbuf_size;            /* bytes at errbuf; 0 = no message */
} volt_tokenizer_config;
#define VOLT_TOKENIZER_CONFIG_VERSION 1u

VOLT_API void volt_tokenizer_config_init(volt_tokenizer_config *cfg);

/* Load vocab_txt_path (one token per line, '\n' or "\r\n"; duplicate tokens: the last id
 * wins for lookup). cfg may be NULL (defaults). Requires [UNK] [CLS] [SEP] [PAD] in the
 * vocab; [MASK] is optional. Errors: VOLT_ERR_IO (cannot open/read), VOLT_ERR_CORRUPT
 * (empty vocab, required token missing), VOLT_ERR_INVALID_ARG, VOLT_ERR_VERSION,
 * VOLT_ERR_NOMEM; the message goes to cfg->errbuf. On error *out is NULL. */
VOLT_API volt_status volt_tokenizer_load(const volt_tokenizer_config *cfg, const char *vocab_txt_path,
                                volt_tokenizer **out);
VOLT_API void volt_tokenizer_destroy(volt_tokenizer *tok);                 /* NULL-safe */

/* ---- vocabulary ------------------------------------------------------------------- */
VOLT_API int volt_tokenizer_vocab_size(const volt_tokenizer *tok);
/* Exact lookup of a vocab entry ("hello", "##ing", "[CLS]"); -1 if absent. */
VOLT_API int volt_tokenizer_token_id(const volt_tokenizer *tok, const char *token);
/* The token string of id (valid while tok lives); NULL if id is out of range. */
VOLT_API const char *volt_tokenizer_id_token(const volt_tokenizer *tok, int id);
VOLT_API int volt_tokenizer_cls_id(const volt_tokenizer *tok);
VOLT_API int volt_tokenizer_sep_id(const volt_tokenizer *tok);
VOLT_API int volt_tokenizer_pad_id(const volt_tokenizer *tok);
VOLT_API int volt_tokenizer_unk_id(const volt_tokenizer *tok);
VOLT_API int volt_tokenizer_mask_id(const volt_tokenizer *tok);           /* -1 if no [MASK] */

/* ---- text -> ids ------------------------------------------------------------------ */
/* WordPiece ids of text[0..len) without [CLS]/[SEP]. Writes the first min(n, cap) ids to
 * ids and sets *n_out = n, the full count (so cap = 0 just counts); ids past that are
 * untouched or scratch. text may be NULL when len is 0. Errors: VOLT_ERR_INVALID_ARG
 * (NULL tok/n_out, NULL ids with cap > 0, cap < 0), VOLT_ERR_NOMEM. */
VOLT_API volt_status volt_tokenizer_tokenize(const volt_tokenizer *tok, const char *text, size_t len,
                                    int32_t *ids, int cap, int *n_out);

/* [CLS] wordpieces [SEP] in input_ids[0..max_length): wordpieces past max_length - 2 are
 * dropped (so [SEP] is always last), the rest is [PAD] with attention_mask 0 (1 on real
 * tokens). attention_mask and n_tokens (the number of non-pad positions) may be NULL.
 * Errors: VOLT_ERR_INVALID_ARG (max_length < 2, NULL tok/input_ids), VOLT_ERR_NOMEM. */
VOLT_API volt_status volt_tokenizer_encode(const volt_tokenizer *tok, const char *text, size_t len,
                                  int max_length, int32_t *input_ids, int32_t *attention_mask,
                                  int *n_tokens);

#ifdef __cplusplus
}
#endif
#endif
