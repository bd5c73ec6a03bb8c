/* volt/text.h — text classification corpora and tokenized datasets (DESIGN §8).
 *
 * A volt_corpus is texts + integer labels in memory, loaded from the IMDB aclImdb/ folder,
 * a `text,label` CSV, a `text<TAB>label` TSV or the SpamAssassin mail corpus, or built
 * with volt_corpus_add. volt_corpus_split makes a seeded train/val/test split.
 * volt_text_dataset tokenizes a corpus with the BERT WordPiece tokenizer (in parallel)
 * into a volt_dataset with fields "input_ids" i32 (L), "attention_mask" i32 (L) and
 * "y" i64 (), optionally through an on-disk cache. See docs/TEXT_DATA.md. */
#ifndef VOLT_TEXT_H
#define VOLT_TEXT_H

#include "volt/export.h"

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "volt/core.h"
#include "volt/data.h"
#include "volt/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when the token cache file layout or the key changes; old files are rebuilt. */
#define VOLT_TEXT_CACHE_VERSION 1u

typedef struct volt_corpus volt_corpus;

/* ---- corpus ------------------------------------------------------------------------- */
/* Every loader: on success *out is a new corpus (free with volt_corpus_destroy); on error
 * *out is NULL and the message, naming the file (and line where there is one), goes to
 * err (errlen bytes, NUL-terminated; err may be NULL). VOLT_ERR_IO: a file or folder that
 * cannot be opened or read; VOLT_ERR_CORRUPT: bad contents; VOLT_ERR_NOMEM. Texts are the
 * raw bytes of the source. The IMDB, CSV and TSV files must be UTF-8: an ill-formed byte is
 * VOLT_ERR_CORRUPT naming the file, line (CSV/TSV) and byte (the tokenizer would read it as
 * U+FFFD and drop it). volt_corpus_add takes any bytes. */

/* An empty corpus named `name` (copied; NULL = "corpus"), for volt_corpus_add. */
VOLT_API volt_status volt_corpus_create(const char *name, volt_corpus **out);
/* Append a copy of text[0..len) (NUL bytes are kept; text may be NULL when len is 0) with
 * label >= 0. Invalidates pointers from volt_corpus_text. */
VOLT_API volt_status volt_corpus_add(volt_corpus *c, const char *text, size_t len, int32_t label);
VOLT_API void volt_corpus_destroy(volt_corpus *c);                          /* NULL-safe */

/* The aclImdb/ folder: dir/train/pos, train/neg, test/pos, test/neg, in that order, each
 * folder's *.txt files in byte order of their names (0_9.txt, 10000_8.txt, 10001_10.txt,
 * ...); label pos = 1, neg = 0; train/unsup is not read. 50,000 reviews, kept verbatim
 * (the "<br />" tags included). A missing folder is VOLT_ERR_IO naming it. */
VOLT_API volt_status volt_corpus_load_imdb(const char *dir, volt_corpus **out, char *err, size_t errlen);
/* RFC 4180 CSV whose header row names a "text" and a "label" column (in any order; other
 * columns are ignored): quoted fields may hold commas, newlines and doubled quotes; CRLF or
 * LF; an optional UTF-8 BOM; blank lines are skipped. Labels are integers in [0, 2^31 - 1)
 * (the class count, label + 1, is an int).
 * A malformed row (wrong field count, stray or unterminated quote, bad label) is
 * VOLT_ERR_CORRUPT naming the file and the line the row starts on. */
VOLT_API volt_status volt_corpus_load_csv(const char *path, volt_corpus **out, char *err, size_t errlen);
/* One `text<TAB>label` per line (LF or CRLF), no quoting: the label follows the last tab,
 * so texts may hold tabs but not newlines. A first line "text<TAB>label" is a header and
 * skipped; blank lines are skipped; a line without a tab or with a bad label is
 * VOLT_ERR_CORRUPT naming the file and line. */
VOLT_API volt_status volt_corpus_load_tsv(const char *path, volt_corpus **out, char *err, size_t errlen);
/* The SpamAssassin public corpus as installed by scripts/fetch_spam.sh: dir holds group
 * folders (easy-ham-1 easy-ham-2 hard-ham-1 spam-1 spam-2, or the original tarballs'
 * easy_ham ... spam_2); a folder whose name starts with "spam" is spam (label 1), one whose
 * name contains "ham" is ham (0), others are ignored. Groups in byte order of their names,
 * messages (files whose name starts with a digit and does not end in .json) in byte order.
 * Each text is the message body from volt_text_mail_body: headers dropped (they leak the
 * label), MIME decoded, HTML stripped, whitespace collapsed. 6,046 messages: 4,150 ham and
 * 1,896 spam. */
VOLT_API volt_status volt_corpus_load_spam_assassin(const char *dir, volt_corpus **out, char *err, size_t errlen);

VOLT_API int64_t volt_corpus_len(const volt_corpus *c);
/* Text i (0 <= i < len), NUL-terminated; *len (may be NULL) gets its length in bytes. Valid
 * until the next volt_corpus_add or volt_corpus_destroy. NULL when i is out of range. */
VOLT_API const char *volt_corpus_text(const volt_corpus *c, int64_t i, size_t *len);
VOLT_API int32_t volt_corpus_label(const volt_corpus *c, int64_t i);        /* -1 if out of range */
/* 1 + the largest label (a split keeps its parent's count); 0 when empty. */
VOLT_API int volt_corpus_num_classes(const volt_corpus *c);
VOLT_API int64_t volt_corpus_label_count(const volt_corpus *c, int32_t label);  /* samples with it */
/* "aclImdb", the CSV's path, "spam-assassin", "<parent>/train", ... (valid while c lives) */
VOLT_API const char *volt_corpus_name(const volt_corpus *c);

/* Seeded split: shuffle the indices 0..n-1 (Fisher-Yates, draws from Philox4x32 keyed by
 * seed, so a pure function of (seed, n)), then train = the first n_train of the permutation,
 * val = the next n_val, test = the next n_test (each in permutation order). The parts are
 * disjoint; n_train + n_val + n_test <= len (when equal they cover the corpus), else
 * VOLT_ERR_INVALID_ARG. Any of train/val/test may be NULL to skip that part. The parts are
 * new corpora named "<name>/train", "/val", "/test"; the IMDB recipe is
 * volt_corpus_split(imdb, 35000, 5000, 10000, seed, ...). On error every *part is NULL. */
VOLT_API volt_status volt_corpus_split(const volt_corpus *c, int64_t n_train, int64_t n_val, int64_t n_test,
                              uint64_t seed, volt_corpus **train, volt_corpus **val, volt_corpus **test);
/* The same with fractions: n_train = round(f_train * len), n_val = round(f_val * len),
 * n_test = the rest. Requires f_train, f_val >= 0 and f_train + f_val <= 1. */
VOLT_API volt_status volt_corpus_split_frac(const volt_corpus *c, double f_train, double f_val, uint64_t seed,
                                   volt_corpus **train, volt_corpus **val, volt_corpus **test);

/* ---- mail and HTML -------------------------------------------------------------------- */
/* The readable body of an RFC 822 message: headers dropped; MIME multipart walked (the
 * text/plain leaves, else the text/html ones; attachments, signatures and other types
 * skipped; message/rfc822 parts recursed into, their headers dropped too);
 * quoted-printable and base64 decoded; HTML stripped (volt_text_html_strip); 8-bit text
 * that is not UTF-8 in a Latin-1/Windows-1252 (or unlabelled) part converted to UTF-8;
 * other invalid UTF-8 dropped; whitespace runs collapsed to one space, ends trimmed.
 * *out is malloc'ed and NUL-terminated (caller frees), *out_len its length (may be NULL).
 * Never fails on malformed mail (it recovers what it can); errors: VOLT_ERR_NOMEM,
 * VOLT_ERR_INVALID_ARG. */
VOLT_API volt_status volt_text_mail_body(const char *msg, size_t len, char **out, size_t *out_len);
/* Text of an HTML fragment: tags and comments removed (block tags such as <p> <br> <div>
 * <td> become a space, inline ones such as <b> <font> <a> nothing), <script>/<style>
 * contents dropped, entities decoded (&amp; &lt; &gt; &quot; &#39; &nbsp; &#NNN; &#xHH;
 * and common named ones), whitespace collapsed. Same ownership and errors as above. */
VOLT_API volt_status volt_text_html_strip(const char *html, size_t len, char **out, size_t *out_len);

/* ---- tokenized dataset ------------------------------------------------------------------ */
/* Tokenize every text of c with volt_tokenizer_encode(tok, ..., max_length) — OpenMP over
 * texts, omp_get_max_threads() threads — into a dataset with fields "input_ids" i32 (L),
 * "attention_mask" i32 (L) and "y" i64 () (L = max_length >= 2), named "text:<corpus>".
 * The dataset copies everything it needs: c and tok may be destroyed afterwards.
 *
 * cache_dir (created if missing; NULL = no cache): the tokens live in
 * cache_dir/<key>.vtok, keyed by the corpus contents (texts and labels), the vocabulary
 * (every token string, in id order), the tokenizer's options (detected by probing it) and
 * max_length. With a file of that key whose header, size and payload crc32 check out,
 * the tokens are loaded instead of computed and *cache_hit (may be NULL) is set true.
 * A file that does not check out is reported on stderr and rebuilt, never trusted. Files
 * are written to a temporary name and renamed, so readers and concurrent writers never
 * see a partial file; a cache that cannot be written is reported on stderr and otherwise
 * ignored. Errors: VOLT_ERR_INVALID_ARG, VOLT_ERR_NOMEM; the message goes to err. */
VOLT_API volt_status volt_text_dataset(const volt_corpus *c, const volt_tokenizer *tok, int max_length,
                              const char *cache_dir, volt_dataset **out, bool *cache_hit,
                              char *err, size_t errlen);
/* What the cache key above is made of, for an app that identifies its data by content (e.g.
 * a resume fingerprint): a 64-bit hash of the corpus's texts and labels in order (equal for
 * the same content however its files were named or reached), and of the tokenizer (every
 * token string in id order and its options, probed). Not cryptographic. Errors:
 * VOLT_ERR_INVALID_ARG (NULL), VOLT_ERR_NOMEM. */
VOLT_API volt_status volt_corpus_hash(const volt_corpus *c, uint64_t *out);
VOLT_API volt_status volt_text_tokenizer_hash(const volt_tokenizer *tok, uint64_t *out);
/* The default cache folder: $XDG_CACHE_HOME/volt/tokens, else $HOME/.cache/volt/tokens,
 * written into buf (NUL-terminated). VOLT_ERR_NOT_FOUND if neither variable is set,
 * VOLT_ERR_INVALID_ARG if buf is too small. */
VOLT_API volt_status volt_text_default_cache_dir(char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
