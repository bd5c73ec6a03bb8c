/* Tokenized text datasets and their on-disk cache. See volt/text.h, docs/TEXT_DATA.md.
 *
 * In memory: ids i32 (n, L), the number of real tokens per row i32 (n) and the labels
 * i64 (n); get() expands the mask from the length (mask[j] = j < len), so the mask costs
 * no memory and the cache file no bytes.
 *
 * Cache file, little-endian, written by this library only (so native order + a marker):
 *   0  char[8] magic "VOLTTOK\0"      40 u64 vocab_hash (every token string, id order)
 *   8  u32 version                   48 u64 tokenizer fingerprint (options, by probing)
 *  12  u32 header bytes (80)         56 i32 vocab_size
 *  16  u32 byte-order mark 0x01020304 60 u32 reserved (0)
 *  20  i32 max_length L              64 u64 payload bytes = n*L*4 + n*4 + n*8
 *  24  i64 n                         72 u32 crc32 of the payload
 *  32  u64 corpus_hash               76 u32 crc32 of bytes 0..75
 * then ids i32[n*L], lens i32[n], labels i64[n]. The file is named after a hash of the key
 * (<16 hex>.vtok); the header holds the whole key, so a file-name collision is a miss. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "volt/text.h"
#include "core/err.h"
#include "core/fsutil.h"

#define CACHE_MAGIC "VOLTTOK"
#define CACHE_HEADER_BYTES 80u
#define CACHE_BOM 0x01020304u
#define MAX_LENGTH_LIMIT (1 << 20)
#define CRC_CHUNK ((size_t)1 << 30)

/* ---- the dataset -------------------------------------------------------------------------- */

typedef struct text_ds {
    volt_dataset_ops ops;      /* per-instance copy, for the name */
    char name[128];
    int64_t n;
    int L;
    int32_t *ids;              /* (n, L) */
    int32_t *lens;             /* (n) tokens before padding, [CLS] and [SEP] included */
    int64_t *labels;           /* (n) */
} text_ds;

static void text_ds_free(text_ds *t) {
    if (!t) return;
    free(t->ids);
    free(t->lens);
    free(t->labels);
    free(t);
}

static int64_t text_ds_len(void *self) { return ((text_ds *)self)->n; }

static volt_status text_ds_get(void *self, int64_t i, void *const *dst) {
    const text_ds *t = self;
    if (i < 0 || i >= t->n) return VOLT_ERR_INVALID_ARG;
    int L = t->L, len = t->lens[i];
    memcpy(dst[0], t->ids + (size_t)i * (size_t)L, (size_t)L * sizeof(int32_t));
    int32_t *mask = dst[1];
    for (int j = 0; j < L; j++) mask[j] = j < len;
    *(int64_t *)dst[2] = t->labels[i];
    return VOLT_OK;
}

static void text_ds_destroy(void *self) { text_ds_free(self); }

static text_ds *text_ds_alloc(const volt_corpus *c, int64_t n, int L) {
    text_ds *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->n = n;
    t->L = L;
    size_t rows = (size_t)(n ? n : 1);
    t->ids = malloc(rows * (size_t)L * sizeof *t->ids);
    t->lens = malloc(rows * sizeof *t->lens);
    t->labels = malloc(rows * sizeof *t->labels);
    if (!t->ids || !t->lens || !t->labels) { text_ds_free(t); return NULL; }
    snprintf(t->name, sizeof t->name, "text:%s", volt_corpus_name(c));
    t->ops = (volt_dataset_ops){ .version = VOLT_DATASET_OPS_VERSION, .name = t->name,
                                 .len = text_ds_len, .get = text_ds_get, .destroy = text_ds_destroy };
    return t;
}

/* ---- hashing ------------------------------------------------------------------------------- */

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33; x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33; x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    return x;
}

/* A 64-bit MurmurHash3-style hash (8 bytes a step); not cryptographic, but the key also
 * holds n and L, and a false match needs a 64-bit collision. */
static uint64_t hash_bytes(const void *p, size_t n, uint64_t seed) {
    const unsigned char *s = p;
    uint64_t h = seed ^ ((uint64_t)n * 0x9E3779B97F4A7C15ull);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t k;
        memcpy(&k, s + i, 8);
        k *= 0x87C37B91114253D5ull; k = rotl64(k, 31); k *= 0x4CF5AD432745937Full;
        h ^= k;
        h = rotl64(h, 27) * 5 + 0x52DCE729;
    }
    uint64_t k = 0;
    for (size_t j = 0; i + j < n; j++) k |= (uint64_t)s[i + j] << (8 * j);
    h ^= mix64(k ^ 0x2545F4914F6CDD1Dull);
    return mix64(h);
}

static uint64_t corpus_hash(const volt_corpus *c, uint64_t *scratch) {
    int64_t n = volt_corpus_len(c);
    #pragma omp parallel for schedule(dynamic, 256)
    for (int64_t i = 0; i < n; i++) {
        size_t len;
        const char *t = volt_corpus_text(c, i, &len);
        scratch[i] = hash_bytes(t, len, 0x7E47) ^ mix64((uint64_t)volt_corpus_label(c, i) + 0x1AB31);
    }
    return hash_bytes(scratch, (size_t)n * sizeof *scratch, (uint64_t)n);
}

static uint64_t vocab_hash(const volt_tokenizer *tok) {
    int v = volt_tokenizer_vocab_size(tok);
    uint64_t h = (uint64_t)v;
    for (int i = 0; i < v; i++) {
        const char *s = volt_tokenizer_id_token(tok, i);
        h = mix64(h ^ hash_bytes(s ? s : "", s ? strlen(s) : 0, (uint64_t)i));
    }
    return h;
}

/* The tokenizer does not expose its options, so probe them: texts whose ids depend on
 * lowercase, strip_accents, tokenize_chinese_chars and match_special_tokens, and a
 * bisection for max_input_chars_per_word. Built from the vocab itself so that the probes
 * hit real tokens. -1 on allocation failure. */
static int probe_hash(const volt_tokenizer *tok, const char *text, size_t len, uint64_t *h) {
    int32_t ids[64];
    int n = 0;
    if (volt_tokenizer_tokenize(tok, text, len, ids, 64, &n) != VOLT_OK) return -1;
    *h = mix64(*h ^ hash_bytes(ids, (size_t)(n < 64 ? n : 64) * sizeof *ids, (uint64_t)n));
    return 0;
}

static volt_status tokenizer_fingerprint(const volt_tokenizer *tok, uint64_t *out) {
    uint64_t h = 0xF1A9;
    int v = volt_tokenizer_vocab_size(tok);
    const char *word = "the";
    for (int i = 0; i < v; i++) {
        const char *s = volt_tokenizer_id_token(tok, i);
        size_t l = s ? strlen(s) : 0;
        if (l < 3 || l > 20) continue;
        size_t k = 0;
        while (k < l && s[k] >= 'a' && s[k] <= 'z') k++;
        if (k == l) { word = s; break; }
    }
    char buf[96];
    size_t wl = strlen(word);
    static const char *const fixed[] = {
        "\xE4\xB8\x80\xE4\xB8\x81",                       /* CJK: split or one word */
        "[CLS][MASK] [SEP] [PAD] [UNK]",                  /* special tokens */
        "Hello, World! \xC3\x87" "a va? na\xC3\xAF" "ve caf\xC3\xA9 \xE6\x9D\xB1\xE4\xBA\xAC",
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (probe_hash(tok, fixed[i], strlen(fixed[i]), &h)) return VOLT_ERR_NOMEM;
    /* word, WORD, Word, w\u0301ord */
    memcpy(buf, word, wl);
    if (probe_hash(tok, buf, wl, &h)) return VOLT_ERR_NOMEM;
    for (size_t k = 0; k < wl; k++) buf[k] = (char)(word[k] - 32);
    if (probe_hash(tok, buf, wl, &h)) return VOLT_ERR_NOMEM;
    memcpy(buf + 1, word + 1, wl - 1);
    if (probe_hash(tok, buf, wl, &h)) return VOLT_ERR_NOMEM;
    buf[0] = word[0];
    buf[1] = '\xCC'; buf[2] = '\x81';
    memcpy(buf + 3, word + 1, wl - 1);
    if (probe_hash(tok, buf, wl + 2, &h)) return VOLT_ERR_NOMEM;
    /* max_input_chars_per_word: with "c" and "##c" in the vocab, "cc...c" (k letters)
     * splits for k <= limit and is one [UNK] above it. */
    int64_t limit = -1;
    char two[4] = { 0 }, cont[8] = { '#', '#', 0, 0 };
    for (char ch = 'a'; ch <= 'z' && limit < 0; ch++) {
        two[0] = ch;
        cont[2] = ch;
        if (volt_tokenizer_token_id(tok, two) < 0 || volt_tokenizer_token_id(tok, cont) < 0) continue;
        const int64_t hi_cap = (int64_t)1 << 16;
        char *w = malloc((size_t)hi_cap + 1);
        if (!w) return VOLT_ERR_NOMEM;
        memset(w, ch, (size_t)hi_cap);
        int64_t lo = 1, hi = hi_cap + 1;                  /* lo splits; hi is [UNK] (or past the cap) */
        while (hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;
            int32_t id0 = -1;
            int n = 0;
            if (volt_tokenizer_tokenize(tok, w, (size_t)mid, &id0, 1, &n) != VOLT_OK) { free(w); return VOLT_ERR_NOMEM; }
            if (n == 1 && id0 == volt_tokenizer_unk_id(tok)) hi = mid; else lo = mid;
        }
        free(w);
        limit = lo;
    }
    *out = mix64(h ^ (uint64_t)limit);
    return VOLT_OK;
}

/* ---- cache file ----------------------------------------------------------------------------- */

typedef struct cache_key {
    uint64_t corpus_hash, vocab_hash, tok_fp;
    int64_t n;
    int32_t L, vocab_size;
} cache_key;

static uint32_t crc_update(uint32_t crc, const void *p, size_t n) {
    const unsigned char *s = p;
    while (n) {
        size_t k = n < CRC_CHUNK ? n : CRC_CHUNK;
        crc = (uint32_t)crc32(crc, s, (uInt)k);
        s += k;
        n -= k;
    }
    return crc;
}

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static uint64_t payload_bytes(int64_t n, int L) {
    return (uint64_t)n * (uint64_t)L * 4 + (uint64_t)n * 4 + (uint64_t)n * 8;
}

static uint32_t payload_crc(const text_ds *t) {
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    crc = crc_update(crc, t->ids, (size_t)t->n * (size_t)t->L * sizeof *t->ids);
    crc = crc_update(crc, t->lens, (size_t)t->n * sizeof *t->lens);
    return crc_update(crc, t->labels, (size_t)t->n * sizeof *t->labels);
}

static void header_encode(unsigned char h[CACHE_HEADER_BYTES], const cache_key *k, uint32_t pcrc) {
    memset(h, 0, CACHE_HEADER_BYTES);
    memcpy(h, CACHE_MAGIC, 8);
    put32(h + 8, VOLT_TEXT_CACHE_VERSION);
    put32(h + 12, CACHE_HEADER_BYTES);
    put32(h + 16, CACHE_BOM);
    put32(h + 20, (uint32_t)k->L);
    put64(h + 24, (uint64_t)k->n);
    put64(h + 32, k->corpus_hash);
    put64(h + 40, k->vocab_hash);
    put64(h + 48, k->tok_fp);
    put32(h + 56, (uint32_t)k->vocab_size);
    put64(h + 64, payload_bytes(k->n, k->L));
    put32(h + 72, pcrc);
    put32(h + 76, (uint32_t)crc32(crc32(0L, Z_NULL, 0), h, 76));
}

/* 1: loaded into *out; 0: no file; -1: a file that does not check out (why says how);
 * -2: out of memory. */
static int cache_load(const char *path, const cache_key *k, const volt_corpus *c, text_ds **out,
                      char *why, size_t whylen) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT || errno == ENOTDIR) return 0;
        snprintf(why, whylen, "cannot open: %s", strerror(errno));
        return -1;
    }
    int rc = -1;
    text_ds *t = NULL;
    unsigned char h[CACHE_HEADER_BYTES];
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) { snprintf(why, whylen, "cannot stat: %s", strerror(errno)); goto done; }
    if (fread(h, 1, sizeof h, f) != sizeof h) { snprintf(why, whylen, "truncated header (%lld bytes)", (long long)sb.st_size); goto done; }
    if (memcmp(h, CACHE_MAGIC, 8) != 0) { snprintf(why, whylen, "bad magic (not a volt token cache)"); goto done; }
    if (get32(h + 8) != VOLT_TEXT_CACHE_VERSION) { snprintf(why, whylen, "version %u, expected %u", get32(h + 8), VOLT_TEXT_CACHE_VERSION); goto done; }
    if (get32(h + 12) != CACHE_HEADER_BYTES || get32(h + 16) != CACHE_BOM) { snprintf(why, whylen, "bad header size or byte order"); goto done; }
    if (get32(h + 76) != (uint32_t)crc32(crc32(0L, Z_NULL, 0), h, 76)) { snprintf(why, whylen, "header crc mismatch (file corrupt?)"); goto done; }
    if ((int32_t)get32(h + 20) != k->L || (int64_t)get64(h + 24) != k->n || get64(h + 32) != k->corpus_hash ||
        get64(h + 40) != k->vocab_hash || get64(h + 48) != k->tok_fp || (int32_t)get32(h + 56) != k->vocab_size) {
        snprintf(why, whylen, "key mismatch (a different corpus, vocab, tokenizer or max_length)");
        goto done;
    }
    uint64_t pb = payload_bytes(k->n, k->L);
    if (get64(h + 64) != pb || (uint64_t)sb.st_size != CACHE_HEADER_BYTES + pb) {
        snprintf(why, whylen, "size %lld bytes, expected %llu (truncated?)", (long long)sb.st_size,
                 (unsigned long long)(CACHE_HEADER_BYTES + pb));
        goto done;
    }
    if (!(t = text_ds_alloc(c, k->n, k->L))) { rc = -2; goto done; }
    size_t nid = (size_t)k->n * (size_t)k->L, n = (size_t)k->n;
    if (fread(t->ids, sizeof *t->ids, nid, f) != nid || fread(t->lens, sizeof *t->lens, n, f) != n ||
        fread(t->labels, sizeof *t->labels, n, f) != n) {
        snprintf(why, whylen, "read error or short file");
        goto done;
    }
    if (payload_crc(t) != get32(h + 72)) { snprintf(why, whylen, "payload crc mismatch (file corrupt?)"); goto done; }
    for (size_t i = 0; i < n; i++) {                  /* belt and braces after the crc */
        if (t->lens[i] < 2 || t->lens[i] > k->L || t->labels[i] != volt_corpus_label(c, (int64_t)i)) {
            snprintf(why, whylen, "row %zu inconsistent with the corpus", i);
            goto done;
        }
    }
    for (size_t i = 0; i < nid; i++) {
        if (t->ids[i] < 0 || t->ids[i] >= k->vocab_size) { snprintf(why, whylen, "token id out of range"); goto done; }
    }
    *out = t;
    t = NULL;
    rc = 1;
done:
    fclose(f);
    text_ds_free(t);
    return rc;
}

static bool write_all(int fd, const void *p, size_t n) {
    const char *s = p;
    while (n) {
        ssize_t w = write(fd, s, n > CRC_CHUNK ? CRC_CHUNK : n);
        if (w < 0) { if (errno == EINTR) continue; return false; }
        s += w;
        n -= (size_t)w;
    }
    return true;
}

/* Write to a unique temporary name in the same folder, fsync, rename over path. Returns
 * false with why set; the temporary file never outlives a failure. */
static bool cache_store(const char *path, const cache_key *k, const text_ds *t, char *why, size_t whylen) {
    size_t pl = strlen(path) + 8;
    char *tmp = malloc(pl);
    if (!tmp) { snprintf(why, whylen, "out of memory"); return false; }
    snprintf(tmp, pl, "%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) { snprintf(why, whylen, "cannot create a temporary file: %s", strerror(errno)); free(tmp); return false; }
    unsigned char h[CACHE_HEADER_BYTES];
    header_encode(h, k, payload_crc(t));
    bool ok = fchmod(fd, 0644) == 0 && write_all(fd, h, sizeof h) &&
              write_all(fd, t->ids, (size_t)t->n * (size_t)t->L * sizeof *t->ids) &&
              write_all(fd, t->lens, (size_t)t->n * sizeof *t->lens) &&
              write_all(fd, t->labels, (size_t)t->n * sizeof *t->labels) && fsync(fd) == 0;
    int e = errno;
    if (close(fd) != 0 && ok) { ok = false; e = errno; }
    if (ok && rename(tmp, path) != 0) { ok = false; e = errno; }
    if (!ok) {
        snprintf(why, whylen, "write failed: %s", strerror(e));
        unlink(tmp);
    }
    free(tmp);
    return ok;
}

volt_status volt_text_default_cache_dir(char *buf, size_t n) {
    if (!buf || !n) return VOLT_ERR_INVALID_ARG;
    buf[0] = '\0';
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int w;
    if (x && x[0]) w = snprintf(buf, n, "%s/volt/tokens", x);
    else if (home && home[0]) w = snprintf(buf, n, "%s/.cache/volt/tokens", home);
    else return VOLT_ERR_NOT_FOUND;
    if (w < 0 || (size_t)w >= n) { buf[0] = '\0'; return VOLT_ERR_INVALID_ARG; }
    return VOLT_OK;
}

/* ---- tokenize ----------------------------------------------------------------------------------- */

static volt_status tokenize_all(const volt_corpus *c, const volt_tokenizer *tok, text_ds *t, int64_t *bad) {
    volt_status first = VOLT_OK;
    int64_t first_i = -1;
    int L = t->L;
    #pragma omp parallel for schedule(dynamic, 32)
    for (int64_t i = 0; i < t->n; i++) {
        size_t len;
        const char *s = volt_corpus_text(c, i, &len);
        int nt = 0;
        volt_status st = volt_tokenizer_encode(tok, s, len, L, t->ids + (size_t)i * (size_t)L, NULL, &nt);
        t->lens[i] = nt;
        t->labels[i] = volt_corpus_label(c, i);
        if (st != VOLT_OK) {
            #pragma omp critical(volt_text_tokenize_err)
            if (first_i < 0 || i < first_i) { first = st; first_i = i; }
        }
    }
    *bad = first_i;
    return first;
}

/* The token cache's own key parts, for apps that identify a run by its data (a resume
 * fingerprint): the same values the cache file's header holds. */
volt_status volt_corpus_hash(const volt_corpus *c, uint64_t *out) {
    if (!c || !out) return VOLT_ERR_INVALID_ARG;
    int64_t n = volt_corpus_len(c);
    uint64_t *scratch = malloc((size_t)(n ? n : 1) * sizeof *scratch);
    if (!scratch) return VOLT_ERR_NOMEM;
    *out = corpus_hash(c, scratch);
    free(scratch);
    return VOLT_OK;
}

volt_status volt_text_tokenizer_hash(const volt_tokenizer *tok, uint64_t *out) {
    if (!tok || !out) return VOLT_ERR_INVALID_ARG;
    uint64_t fp;
    if (tokenizer_fingerprint(tok, &fp) != VOLT_OK) return VOLT_ERR_NOMEM;
    *out = mix64(vocab_hash(tok) ^ rotl64(fp, 29) ^ (uint64_t)volt_tokenizer_vocab_size(tok));
    return VOLT_OK;
}

volt_status volt_text_dataset(const volt_corpus *c, const volt_tokenizer *tok, int max_length,
                              const char *cache_dir, volt_dataset **out, bool *cache_hit,
                              char *err, size_t errlen) {
    if (out) *out = NULL;
    if (cache_hit) *cache_hit = false;
    if (!c || !tok || !out) return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "text dataset: NULL corpus, tokenizer or out");
    if (max_length < 2 || max_length > MAX_LENGTH_LIMIT)
        return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "text dataset '%s': max_length %d not in [2, %d]",
                       volt_corpus_name(c), max_length, MAX_LENGTH_LIMIT);
    int64_t n = volt_corpus_len(c);
    if (n > 0 && (uint64_t)n * (uint64_t)max_length > ((uint64_t)1 << 40))
        return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "text dataset '%s': %lld x %d tokens is too many",
                       volt_corpus_name(c), (long long)n, max_length);
    text_ds *t = NULL;
    char *path = NULL;
    cache_key key = { 0 };
    bool hit = false;
    if (cache_dir) {
        uint64_t *scratch = malloc((size_t)(n ? n : 1) * sizeof *scratch);
        if (!scratch) return volt__errf(err, errlen, VOLT_ERR_NOMEM, "text dataset: out of memory");
        key.corpus_hash = corpus_hash(c, scratch);
        free(scratch);
        key.vocab_hash = vocab_hash(tok);
        if (tokenizer_fingerprint(tok, &key.tok_fp) != VOLT_OK) return volt__errf(err, errlen, VOLT_ERR_NOMEM, "text dataset: out of memory");
        key.n = n;
        key.L = max_length;
        key.vocab_size = volt_tokenizer_vocab_size(tok);
        uint64_t kh = hash_bytes(&key, sizeof key, VOLT_TEXT_CACHE_VERSION);
        size_t pl = strlen(cache_dir) + 32;
        if (!(path = malloc(pl))) return volt__errf(err, errlen, VOLT_ERR_NOMEM, "text dataset: out of memory");
        snprintf(path, pl, "%s/%016llx.vtok", cache_dir, (unsigned long long)kh);
        char why[256];
        int rc = cache_load(path, &key, c, &t, why, sizeof why);
        if (rc == -2) { free(path); return volt__errf(err, errlen, VOLT_ERR_NOMEM, "text dataset: out of memory"); }
        if (rc < 0) fprintf(stderr, "volt: token cache '%s': %s; rebuilding it\n", path, why);
        hit = rc == 1;
    }
    if (!hit) {
        if (!(t = text_ds_alloc(c, n, max_length))) { free(path); return volt__errf(err, errlen, VOLT_ERR_NOMEM, "text dataset: out of memory"); }
        int64_t bad;
        volt_status st = tokenize_all(c, tok, t, &bad);
        if (st != VOLT_OK) {
            text_ds_free(t);
            free(path);
            return volt__errf(err, errlen, st, "text dataset '%s': tokenizing text %lld failed: %s",
                           volt_corpus_name(c), (long long)bad, volt_status_str(st));
        }
        if (path) {
            char why[256];
            if (volt__mkdirs(cache_dir, why, sizeof why) < 0) fprintf(stderr, "volt: token cache folder: %s; not caching\n", why);
            else if (!cache_store(path, &key, t, why, sizeof why))
                fprintf(stderr, "volt: token cache '%s': %s; not caching\n", path, why);
        }
    }
    free(path);
    static const volt_field proto[3] = {
        { "input_ids", VOLT_I32, { 1, { 0 } } }, { "attention_mask", VOLT_I32, { 1, { 0 } } }, { "y", VOLT_I64, { 0, { 0 } } } };
    volt_field fields[3] = { proto[0], proto[1], proto[2] };
    fields[0].shape.d[0] = max_length;
    fields[1].shape.d[0] = max_length;
    volt_status st = volt_dataset_create(&t->ops, t, 3, fields, out);   /* takes t, even on failure */
    if (st != VOLT_OK) return volt__errf(err, errlen, st, "text dataset '%s': %s", volt_corpus_name(c), volt_status_str(st));
    if (cache_hit) *cache_hit = hit;
    return VOLT_OK;
}
