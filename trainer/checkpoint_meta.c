/* Checkpoint metadata checksum: one crc32 sealing the metadata of every file a checkpoint
 * writes (see below). See trainer/checkpoint_internal.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "trainer/checkpoint_internal.h"

#define META_CRC_KEY "volt.meta_crc32"

/* ---- metadata checksum -------------------------------------------------------------------
 * The tensors carry crc32 entries (core/safetensors.c); the metadata (loop state, callback
 * state, shard layout, module extras) is covered by one crc32 over every key but "format",
 * "crc32:*" and the checksum itself, in key order: "key\0value\0" for each. */
typedef struct meta_kv { const char *k, *v; } meta_kv;

static int kv_cmp(const void *a, const void *b) { return strcmp(((const meta_kv *)a)->k, ((const meta_kv *)b)->k); }

static bool meta_covered(const char *k) {
    return strcmp(k, "format") != 0 && strncmp(k, "crc32:", 6) != 0 && strcmp(k, META_CRC_KEY) != 0;
}

/* kv[0..n) is sorted in place. */
static uint32_t meta_crc(meta_kv *kv, int n) {
    qsort(kv, (size_t)n, sizeof *kv, kv_cmp);
    uLong c = crc32(0L, Z_NULL, 0);
    for (int i = 0; i < n; i++) {
        c = crc32(c, (const Bytef *)kv[i].k, (uInt)strlen(kv[i].k) + 1);
        for (const char *v = kv[i].v; ; v += 1u << 30) {   /* values can be long: chunked */
            size_t len = strlen(v), k = len < (1u << 30) ? len : (1u << 30);
            c = crc32(c, (const Bytef *)v, (uInt)k);
            if (k == len) break;
        }
        c = crc32(c, (const Bytef *)"", 1);
    }
    return (uint32_t)c;
}

/* Add the checksum of everything set on w so far (call it right before writing). */
volt_status meta_seal(volt_st_writer *w) {
    const int n = volt_st_writer_meta_count(w);
    meta_kv *kv = malloc(sizeof *kv * (size_t)(n ? n : 1));
    if (!kv) return VOLT_ERR_NOMEM;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (volt_st_writer_meta_at(w, i, &kv[m].k, &kv[m].v) == VOLT_OK && meta_covered(kv[m].k)) m++;
    char hex[16];
    snprintf(hex, sizeof hex, "%08x", (unsigned)meta_crc(kv, m));
    free(kv);
    return volt_st_writer_meta(w, META_CRC_KEY, hex);
}

/* Check the metadata checksum of an open file. required: a missing checksum is an error. */
volt_status meta_check(volt_st_file *f, const char *file, bool required, char *err, size_t errlen) {
    const char *want = volt_st_meta(f, META_CRC_KEY);
    if (!want) {
        if (!required) return VOLT_OK;
        snprintf(err, errlen, "file '%s': the metadata checksum '%s' is missing (file damaged or edited?)", file, META_CRC_KEY);
        return VOLT_ERR_CORRUPT;
    }
    const int n = volt_st_meta_count(f);
    meta_kv *kv = malloc(sizeof *kv * (size_t)(n ? n : 1));
    if (!kv) { snprintf(err, errlen, "file '%s': out of memory", file); return VOLT_ERR_NOMEM; }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (volt_st_meta_at(f, i, &kv[m].k, &kv[m].v) == VOLT_OK && meta_covered(kv[m].k)) m++;
    char hex[16];
    snprintf(hex, sizeof hex, "%08x", (unsigned)meta_crc(kv, m));
    free(kv);
    if (strcmp(hex, want) != 0) {
        snprintf(err, errlen, "file '%s': metadata checksum mismatch (file damaged or edited?): stored %.16s, computed %s",
                 file, want, hex);
        return VOLT_ERR_CORRUPT;
    }
    return VOLT_OK;
}
