/* safetensors I/O: round trip, byte-level layout, corrupted/truncated/hostile files,
 * atomic writes, f16/bf16 -> f32 conversion, and (when python3 is present) a check of our
 * files against the reference format rules written independently in Python. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include <zlib.h>
#include "volt/safetensors.h"
#include "core/safetensors_internal.h"   /* volt__st_keep_range, volt__st_read_peak */
#include "vtest.h"

static char g_dir[1024];

static const char *tpath(const char *name) {
    static char buf[8][1200];
    static int k;
    char *p = buf[k++ & 7];
    snprintf(p, sizeof buf[0], "%s/%s", g_dir, name);
    return p;
}

static void spit(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) { fprintf(stderr, "cannot write %s\n", path); exit(1); }
    if (n) fwrite(data, 1, n, fp);
    fclose(fp);
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* A hand-made file: 8-byte length, `json` padded with spaces, then `data`. */
static void make_file(const char *path, const char *json, const void *data, size_t dn) {
    size_t jl = strlen(json), hl = (jl + 7) & ~(size_t)7;
    unsigned char *b = calloc(1, 8 + hl + dn + 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, json, jl);
    memset(b + 8 + jl, ' ', hl - jl);
    if (dn) memcpy(b + 8 + hl, data, dn);
    spit(path, b, 8 + hl + dn);
    free(b);
}

/* Open must fail with `want`, and the message must contain `needle` (and the file name). */
static void expect_open_fail(const char *path, volt_status want, const char *needle, int line) {
    volt_st_file *f = (volt_st_file *)1;
    char err[512] = "";
    volt_status st = volt_st_open(path, &f, err, sizeof err);
    CHECK(st == want, "line %d: open returned %s, want %s (%s)", line, volt_status_str(st),
          volt_status_str(want), err);
    CHECK(f == NULL, "line %d: out not NULL on failure", line);
    CHECK(needle == NULL || strstr(err, needle), "line %d: message '%s' lacks '%s'", line, err,
          needle);
    CHECK(strstr(err, path) != NULL, "line %d: message '%s' does not name the file", line, err);
    if (st == VOLT_OK) volt_st_close(f);
}
#define EXPECT_OPEN_FAIL(p, st, needle) expect_open_fail(p, st, needle, __LINE__)

/* ---- data used by several tests ---- */
static float g_f32[6] = { 1.5f, -2.25f, 3.0f, 0.0f, 1e-30f, -7.0f };
static uint16_t g_bf16[4] = { 0x3F80, 0xC000, 0x7F80, 0x0001 };
static uint16_t g_f16[4] = { 0x3C00, 0x0001, 0x7BFF, 0xFC00 };
static int32_t g_i32[3] = { -1, 0, 2147483647 };
static int64_t g_i64[2] = { INT64_MIN, 1234567890123LL };
static uint8_t g_u8[5] = { 0, 1, 127, 128, 255 };
static float g_scalar = 42.0f;

static volt_st_writer *make_writer(void) {
    volt_st_writer *w = NULL;
    CHECK_OK(volt_st_writer_create(&w));
    CHECK_OK(volt_st_writer_add(w, "u8", VOLT_U8, VOLT_SHAPE(5), g_u8));     /* size 1 first */
    CHECK_OK(volt_st_writer_add(w, "fc1.weight", VOLT_F32, VOLT_SHAPE(2, 3), g_f32));
    CHECK_OK(volt_st_writer_add_copy(w, "bf16", VOLT_BF16, VOLT_SHAPE(2, 2), g_bf16));
    CHECK_OK(volt_st_writer_add(w, "f16", VOLT_F16, VOLT_SHAPE(1, 1, 2, 2), g_f16));
    CHECK_OK(volt_st_writer_add(w, "i32", VOLT_I32, VOLT_SHAPE(3), g_i32));
    CHECK_OK(volt_st_writer_add(w, "i64", VOLT_I64, VOLT_SHAPE(2), g_i64));
    CHECK_OK(volt_st_writer_add(w, "scalar", VOLT_F32, VOLT_SCALAR, &g_scalar));
    CHECK_OK(volt_st_writer_add(w, "empty", VOLT_F32, VOLT_SHAPE(0), NULL));
    CHECK_OK(volt_st_writer_add(w, "empty2", VOLT_I64, VOLT_SHAPE(3, 0), NULL));
    CHECK_OK(volt_st_writer_meta(w, "epoch", "3"));
    CHECK_OK(volt_st_writer_meta(w, "note", "h\xc3\xa9llo \"quoted\"\n"));
    CHECK_OK(volt_st_writer_meta(w, "epoch", "4"));                         /* replaces */
    return w;
}

static void check_tensor(volt_st_file *f, const char *name, volt_dtype dt, volt_shape sh,
                         const void *want, size_t nbytes) {
    volt_st_info info;
    memset(&info, 0xAB, sizeof info);
    volt_status st = volt_st_find(f, name, &info);
    CHECK(st == VOLT_OK, "find %s: %s", name, volt_status_str(st));
    if (st != VOLT_OK) return;
    CHECK(info.dtype == dt, "%s dtype %d", name, (int)info.dtype);
    CHECK(volt_shape_eq(info.shape, sh), "%s ndim %d", name, (int)info.shape.ndim);
    CHECK(info.nbytes == nbytes, "%s nbytes %zu want %zu", name, info.nbytes, nbytes);
    CHECK(nbytes == 0 || memcmp(info.data, want, nbytes) == 0, "%s data differs", name);
    CHECK((uintptr_t)info.data % volt_dtype_size(dt) == 0, "%s data unaligned", name);
}

static void test_roundtrip(void) {
    const char *p = tpath("rt.safetensors");
    volt_st_writer *w = make_writer();
    char err[512] = "";
    volt_status st = volt_st_writer_write(w, p, err, sizeof err);
    CHECK(st == VOLT_OK, "write: %s", err);
    volt_st_writer_destroy(w);
    CHECK(!exists(tpath("rt.safetensors.tmp")), "tmp left behind");

    volt_st_file *f = NULL;
    st = volt_st_open(p, &f, err, sizeof err);
    CHECK(st == VOLT_OK, "open: %s", err);
    if (!f) return;
    CHECK(volt_st_count(f) == 9, "count %d", volt_st_count(f));
    check_tensor(f, "fc1.weight", VOLT_F32, VOLT_SHAPE(2, 3), g_f32, sizeof g_f32);
    check_tensor(f, "bf16", VOLT_BF16, VOLT_SHAPE(2, 2), g_bf16, sizeof g_bf16);
    check_tensor(f, "f16", VOLT_F16, VOLT_SHAPE(1, 1, 2, 2), g_f16, sizeof g_f16);
    check_tensor(f, "i32", VOLT_I32, VOLT_SHAPE(3), g_i32, sizeof g_i32);
    check_tensor(f, "i64", VOLT_I64, VOLT_SHAPE(2), g_i64, sizeof g_i64);
    check_tensor(f, "u8", VOLT_U8, VOLT_SHAPE(5), g_u8, sizeof g_u8);
    check_tensor(f, "scalar", VOLT_F32, VOLT_SCALAR, &g_scalar, 4);
    check_tensor(f, "empty", VOLT_F32, VOLT_SHAPE(0), NULL, 0);
    check_tensor(f, "empty2", VOLT_I64, VOLT_SHAPE(3, 0), NULL, 0);
    volt_st_info info;
    CHECK(volt_st_find(f, "nope", &info) == VOLT_ERR_NOT_FOUND, "find missing");
    CHECK(volt_st_name(f, 9) == NULL && volt_st_name(f, -1) == NULL, "name out of range");
    /* Names enumerate in data order: the two 8-byte tensors first. */
    CHECK(volt_st_name(f, 0) && strcmp(volt_st_name(f, 0), "i64") == 0, "first is %s",
          volt_st_name(f, 0));
    int seen = 0;
    for (int i = 0; i < volt_st_count(f); i++) {
        CHECK(volt_st_find(f, volt_st_name(f, i), &info) == VOLT_OK, "find by enumerated name");
        seen++;
    }
    CHECK(seen == 9, "enumerated %d", seen);

    /* metadata */
    CHECK(volt_st_meta(f, "epoch") && strcmp(volt_st_meta(f, "epoch"), "4") == 0, "epoch meta");
    CHECK(volt_st_meta(f, "note") && strcmp(volt_st_meta(f, "note"), "h\xc3\xa9llo \"quoted\"\n") == 0,
          "note meta");
    CHECK(volt_st_meta(f, "format") && strcmp(volt_st_meta(f, "format"), "volt") == 0, "format");
    CHECK(volt_st_meta(f, "missing") == NULL, "missing meta");
    CHECK(volt_st_meta_count(f) == 3 + 9, "meta count %d", volt_st_meta_count(f));
    int ncrc = 0;
    for (int i = 0; i < volt_st_meta_count(f); i++) {
        const char *k = NULL, *v = NULL;
        CHECK_OK(volt_st_meta_at(f, i, &k, &v));
        if (k && strncmp(k, "crc32:", 6) == 0) {
            ncrc++;
            CHECK(strlen(v) == 8 && strspn(v, "0123456789abcdef") == 8, "crc '%s'", v);
        }
    }
    CHECK(ncrc == 9, "crc entries %d", ncrc);
    const char *k, *v;
    CHECK(volt_st_meta_at(f, 12, &k, &v) == VOLT_ERR_INVALID_ARG, "meta_at out of range");
    char want[16];
    snprintf(want, sizeof want, "%08lx", crc32(crc32(0, Z_NULL, 0), (const Bytef *)g_f32, sizeof g_f32));
    CHECK(volt_st_meta(f, "crc32:fc1.weight") && strcmp(volt_st_meta(f, "crc32:fc1.weight"), want) == 0,
          "crc of fc1.weight %s want %s", volt_st_meta(f, "crc32:fc1.weight"), want);
    CHECK(volt_st_meta(f, "crc32:empty") && strcmp(volt_st_meta(f, "crc32:empty"), "00000000") == 0,
          "crc of empty");

    st = volt_st_verify_all(f, err, sizeof err);
    CHECK(st == VOLT_OK, "verify_all: %s", err);
    CHECK_OK(volt_st_verify(f, "fc1.weight", err, sizeof err));
    CHECK(volt_st_verify(f, "nope", err, sizeof err) == VOLT_ERR_NOT_FOUND, "verify missing");
    volt_st_close(f);
    volt_st_close(NULL);
}

/* The byte layout, checked by hand against the format: no volt code involved. */
static void test_byte_layout(void) {
    size_t n = 0;
    unsigned char *b = vtest_slurp(tpath("rt.safetensors"), &n);
    CHECK(b && n >= 8, "read back");
    if (!b) return;
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)b[i] << (8 * i);
    CHECK(hl % 8 == 0, "header length %llu not a multiple of 8", (unsigned long long)hl);
    CHECK(8 + hl <= n, "header length beyond file");
    if (8 + hl > n) { free(b); return; }
    CHECK(b[8] == '{', "header starts with '%c'", b[8]);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts((const char *)b + 8, (size_t)hl, &end, 0);
    CHECK(root != NULL, "header JSON parses");
    if (!root) { free(b); return; }
    for (const char *p = end; p < (const char *)b + 8 + hl; p++)
        CHECK(*p == ' ', "padding byte 0x%02x is not a space", (unsigned char)*p);
    uint64_t data_len = n - 8 - hl;
    uint64_t begins[16], ends[16];
    int nt = 0;
    for (cJSON *x = root->child; x; x = x->next) {
        if (strcmp(x->string, "__metadata__") == 0) {
            for (cJSON *m = x->child; m; m = m->next) CHECK(cJSON_IsString(m), "meta not string");
            continue;
        }
        cJSON *o = cJSON_GetObjectItem(x, "data_offsets");
        cJSON *dt = cJSON_GetObjectItem(x, "dtype");
        CHECK(cJSON_IsString(dt), "dtype");
        CHECK(cJSON_GetArraySize(o) == 2, "offsets size");
        if (nt < 16 && cJSON_GetArraySize(o) == 2) {
            begins[nt] = (uint64_t)o->child->valuedouble;
            ends[nt] = (uint64_t)o->child->next->valuedouble;
            /* each tensor starts aligned to its element size */
            size_t es = strcmp(dt->valuestring, "I64") == 0 ? 8 : strcmp(dt->valuestring, "U8") == 0 ? 1
                      : (strcmp(dt->valuestring, "F32") == 0 || strcmp(dt->valuestring, "I32") == 0) ? 4 : 2;
            CHECK(begins[nt] % es == 0, "%s starts at %llu", x->string, (unsigned long long)begins[nt]);
            nt++;
        }
    }
    CHECK(nt == 9, "tensors in header %d", nt);
    /* contiguous from 0 to the end of the file, as the reference loader requires */
    for (int i = 0; i < nt; i++)
        for (int j = i + 1; j < nt; j++)
            if (begins[j] < begins[i] || (begins[j] == begins[i] && ends[j] < ends[i])) {
                uint64_t t = begins[i]; begins[i] = begins[j]; begins[j] = t;
                t = ends[i]; ends[i] = ends[j]; ends[j] = t;
            }
    uint64_t pos = 0;
    for (int i = 0; i < nt; i++) {
        CHECK(begins[i] == pos, "gap/overlap at %llu (begin %llu)", (unsigned long long)pos,
              (unsigned long long)begins[i]);
        pos = ends[i];
    }
    CHECK(pos == data_len, "data ends at %llu, file data is %llu", (unsigned long long)pos,
          (unsigned long long)data_len);
    /* the scalar has shape [] */
    cJSON *sc = cJSON_GetObjectItem(root, "scalar");
    cJSON *shape = cJSON_GetObjectItem(sc, "shape");
    CHECK(cJSON_IsArray(shape) && cJSON_GetArraySize(shape) == 0, "scalar shape []");
    cJSON_Delete(root);
    free(b);
}

static void test_writer_errors(void) {
    volt_st_writer *w = NULL;
    CHECK_OK(volt_st_writer_create(&w));
    float x[2] = { 1, 2 };
    CHECK_OK(volt_st_writer_add(w, "a", VOLT_F32, VOLT_SHAPE(2), x));
    CHECK(volt_st_writer_add(w, "a", VOLT_F32, VOLT_SHAPE(2), x) == VOLT_ERR_INVALID_ARG, "dup");
    CHECK(strstr(volt_st_writer_errmsg(w), "'a'") != NULL, "dup message '%s'", volt_st_writer_errmsg(w));
    CHECK(volt_st_writer_add_copy(w, "a", VOLT_F32, VOLT_SHAPE(2), x) == VOLT_ERR_INVALID_ARG, "dup copy");
    CHECK(volt_st_writer_add(w, "", VOLT_F32, VOLT_SHAPE(2), x) == VOLT_ERR_INVALID_ARG, "empty name");
    CHECK(volt_st_writer_add(w, NULL, VOLT_F32, VOLT_SHAPE(2), x) == VOLT_ERR_INVALID_ARG, "NULL name");
    CHECK(volt_st_writer_add(w, "__metadata__", VOLT_F32, VOLT_SHAPE(2), x) == VOLT_ERR_INVALID_ARG,
          "reserved name");
    CHECK(volt_st_writer_add(w, "bad\xff", VOLT_F32, VOLT_SHAPE(2), x) == VOLT_ERR_INVALID_ARG, "utf8");
    CHECK(volt_st_writer_add(w, "b", VOLT_DTYPE_COUNT, VOLT_SHAPE(2), x) == VOLT_ERR_INVALID_ARG, "dtype");
    volt_shape bad = { 5, { 1, 1, 1, 1 } };
    CHECK(volt_st_writer_add(w, "b", VOLT_F32, bad, x) == VOLT_ERR_INVALID_ARG, "ndim 5");
    CHECK(volt_st_writer_add(w, "b", VOLT_F32, VOLT_SHAPE(-1), x) == VOLT_ERR_INVALID_ARG, "neg dim");
    CHECK(volt_st_writer_add(w, "b", VOLT_F32, VOLT_SHAPE(2), NULL) == VOLT_ERR_INVALID_ARG, "NULL data");
    CHECK(volt_st_writer_meta(w, "format", "x") == VOLT_ERR_INVALID_ARG, "format other than volt / pt");
    {   /* "pt" (what HF's from_pretrained takes): written as the header's format, crcs kept and checked */
        volt_st_writer *pw = NULL;
        CHECK_OK(volt_st_writer_create(&pw));
        CHECK_OK(volt_st_writer_add(pw, "a", VOLT_F32, VOLT_SHAPE(2), x));
        CHECK_OK(volt_st_writer_meta(pw, "format", "pt"));
        char path[1024], err[512] = "";
        snprintf(path, sizeof path, "%s/format_pt.safetensors", vtest_tmpdir());
        CHECK_OK(volt_st_writer_write(pw, path, err, sizeof err));
        volt_st_file *pf = NULL;
        CHECK(volt_st_open(path, &pf, err, sizeof err) == VOLT_OK && volt_st_meta(pf, "format") &&
              !strcmp(volt_st_meta(pf, "format"), "pt") && volt_st_meta(pf, "crc32:a") &&
              volt_st_verify_all(pf, err, sizeof err) == VOLT_OK, "format pt: %s", err);
        volt_st_close(pf);
        volt_st_writer_destroy(pw);
    }
    CHECK(volt_st_writer_meta(w, "crc32:a", "x") == VOLT_ERR_INVALID_ARG, "reserved crc");
    CHECK(volt_st_writer_meta(w, NULL, "x") == VOLT_ERR_INVALID_ARG, "NULL key");
    CHECK(volt_st_writer_add(NULL, "z", VOLT_F32, VOLT_SHAPE(2), x) == VOLT_ERR_INVALID_ARG, "NULL w");
    CHECK(volt_st_writer_create(NULL) == VOLT_ERR_INVALID_ARG, "create NULL");
    volt_st_writer_destroy(w);
    volt_st_writer_destroy(NULL);
}

static void test_crc_corruption(void) {
    const char *p = tpath("crc.safetensors");
    float wv[64], bv[4] = { 1, 2, 3, 4 };
    for (int i = 0; i < 64; i++) wv[i] = (float)i * 0.5f;
    volt_st_writer *w = NULL;
    char err[512] = "";
    CHECK_OK(volt_st_writer_create(&w));
    CHECK_OK(volt_st_writer_add(w, "fc1.weight", VOLT_F32, VOLT_SHAPE(8, 8), wv));
    CHECK_OK(volt_st_writer_add(w, "fc1.bias", VOLT_F32, VOLT_SHAPE(4), bv));
    CHECK_OK(volt_st_writer_write(w, p, err, sizeof err));
    volt_st_writer_destroy(w);

    size_t n = 0;
    unsigned char *b = vtest_slurp(p, &n);
    if (!b) { CHECK(0, "read back"); return; }
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)b[i] << (8 * i);
    b[8 + hl + 17] ^= 0x04;                 /* inside fc1.weight (laid out first) */
    spit(p, b, n);
    free(b);

    volt_st_file *f = NULL;
    CHECK_OK(volt_st_open(p, &f, err, sizeof err));   /* structure is intact */
    if (!f) return;
    volt_status st = volt_st_verify(f, "fc1.weight", err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT, "verify flipped: %s", volt_status_str(st));
    CHECK(strstr(err, "tensor 'fc1.weight' crc mismatch (file corrupt?)") && strstr(err, p),
          "message: %s", err);
    CHECK_OK(volt_st_verify(f, "fc1.bias", err, sizeof err));
    err[0] = 0;
    st = volt_st_verify_all(f, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "fc1.weight"), "verify_all: %s", err);
    volt_st_close(f);
    /* both tensors damaged: verify_all (tensors on several threads) names the first in file order */
    b = vtest_slurp(p, &n);
    if (b) {
        b[8 + hl + 256 + 2] ^= 0x04;          /* inside fc1.bias, right after the weight */
        spit(p, b, n);
        free(b);
        CHECK_OK(volt_st_open(p, &f, err, sizeof err));
        st = f ? volt_st_verify_all(f, err, sizeof err) : VOLT_ERR_IO;
        CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "fc1.weight") && !strstr(err, "fc1.bias"), "two damaged: %s", err);
        CHECK(f && volt_st_verify(f, "fc1.bias", err, sizeof err) == VOLT_ERR_CORRUPT, "fc1.bias damaged too");
        volt_st_close(f);
    }

    /* A malformed crc entry is reported, not ignored. */
    float one = 1;
    make_file(tpath("badcrc.safetensors"),
              "{\"__metadata__\":{\"crc32:a\":\"0xZZ\"},\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
              "\"data_offsets\":[0,4]}}", &one, 4);
    f = NULL;
    CHECK_OK(volt_st_open(tpath("badcrc.safetensors"), &f, err, sizeof err));
    if (f) {
        st = volt_st_verify(f, "a", err, sizeof err);
        CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "malformed"), "bad crc entry: %s", err);
        volt_st_close(f);
    }
}

/* A tensor whose crc entry is gone: in a volt file (every tensor has one) that is damage,
 * VOLT_ERR_CORRUPT naming the tensor; a foreign file without any crc still verifies. */
static void test_crc_missing(void) {
    const char *p = tpath("nocrc.safetensors");
    float wv[6] = { 1, 2, 3, 4, 5, 6 }, bv[2] = { 7, 8 };
    volt_st_writer *w = NULL;
    char err[512] = "";
    CHECK_OK(volt_st_writer_create(&w));
    CHECK_OK(volt_st_writer_add(w, "fc1.weight", VOLT_F32, VOLT_SHAPE(2, 3), wv));
    CHECK_OK(volt_st_writer_add(w, "fc1.bias", VOLT_F32, VOLT_SHAPE(2), bv));
    CHECK_OK(volt_st_writer_write(w, p, err, sizeof err));
    volt_st_writer_destroy(w);
    size_t n = 0;
    unsigned char *b = vtest_slurp(p, &n);
    if (!b) { CHECK(0, "read back"); return; }
    /* rename the key "crc32:fc1.bias" -> "crc32:fc1.biaz": same length, offsets unchanged */
    unsigned char *hit = NULL;
    for (size_t i = 8; i + 14 <= n && !hit; i++)
        if (memcmp(b + i, "crc32:fc1.bias", 14) == 0) hit = b + i;
    CHECK(hit != NULL, "crc key in the header");
    if (hit) hit[13] = 'z';
    spit(p, b, n);
    free(b);
    volt_st_file *f = NULL;
    CHECK_OK(volt_st_open(p, &f, err, sizeof err));
    if (f) {
        CHECK_OK(volt_st_verify(f, "fc1.weight", err, sizeof err));
        err[0] = 0;
        volt_status st = volt_st_verify(f, "fc1.bias", err, sizeof err);
        CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "tensor 'fc1.bias' has no crc32 entry") && strstr(err, p),
              "missing crc: %s %s", volt_status_str(st), err);
        err[0] = 0;
        st = volt_st_verify_all(f, err, sizeof err);
        CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "fc1.bias"), "verify_all, missing crc: %s", err);
        volt_st_close(f);
    }
    /* "format": "volt" and no crc at all: every tensor is missing its crc */
    float one = 1;
    make_file(tpath("volt_nocrc.safetensors"),
              "{\"__metadata__\":{\"format\":\"volt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
              "\"data_offsets\":[0,4]}}", &one, 4);
    f = NULL;
    CHECK_OK(volt_st_open(tpath("volt_nocrc.safetensors"), &f, err, sizeof err));
    if (f) {
        volt_status st = volt_st_verify_all(f, err, sizeof err);
        CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "tensor 'a' has no crc32 entry"), "volt file, no crc: %s", err);
        volt_st_close(f);
    }
    /* a file from elsewhere (no format, no crcs): nothing to check, verifies OK */
    make_file(tpath("foreign.safetensors"),
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", &one, 4);
    f = NULL;
    CHECK_OK(volt_st_open(tpath("foreign.safetensors"), &f, err, sizeof err));
    if (f) {
        CHECK_OK(volt_st_verify_all(f, err, sizeof err));
        volt_st_close(f);
    }
}

static void test_truncation(void) {
    size_t n = 0;
    unsigned char *b = vtest_slurp(tpath("rt.safetensors"), &n);
    if (!b) { CHECK(0, "read back"); return; }
    const char *p = tpath("trunc.safetensors");
    int bad = 0;
    for (size_t cut = 0; cut < n; cut++) {   /* every truncation point, header included */
        spit(p, b, cut);
        volt_st_file *f = NULL;
        char err[512] = "";
        volt_status st = volt_st_open(p, &f, err, sizeof err);
        if (st != VOLT_ERR_CORRUPT || f || !strstr(err, "truncated")) {
            if (bad++ < 5)
                CHECK(0, "cut at %zu: %s '%s'", cut, volt_status_str(st), err);
        }
        volt_st_close(f);
    }
    CHECK(bad == 0, "%d truncation points misreported", bad);
    free(b);
}

static bool want_only_a(const char *name, void *ctx) { (void)ctx; return !strcmp(name, "a"); }

static void test_hostile_headers(void) {
    /* header length huge */
    unsigned char huge[64];
    memset(huge, 0xFF, 8);
    memcpy(huge + 8, "{\"a\":1}                                                 ", 56);
    spit(tpath("huge.safetensors"), huge, sizeof huge);
    EXPECT_OPEN_FAIL(tpath("huge.safetensors"), VOLT_ERR_CORRUPT, "not a safetensors");
    uint64_t big = 200000000;
    for (int i = 0; i < 8; i++) huge[i] = (unsigned char)(big >> (8 * i));
    spit(tpath("huge2.safetensors"), huge, sizeof huge);
    EXPECT_OPEN_FAIL(tpath("huge2.safetensors"), VOLT_ERR_CORRUPT, "exceeds");
    uint64_t past = 1000;
    for (int i = 0; i < 8; i++) huge[i] = (unsigned char)(past >> (8 * i));
    spit(tpath("huge3.safetensors"), huge, sizeof huge);
    EXPECT_OPEN_FAIL(tpath("huge3.safetensors"), VOLT_ERR_CORRUPT, "truncated");

    /* text and other non-safetensors files */
    const char *txt = "hello, this is a plain text file\nnot tensors at all\n";
    spit(tpath("text.txt"), txt, strlen(txt));
    EXPECT_OPEN_FAIL(tpath("text.txt"), VOLT_ERR_CORRUPT, "not a safetensors");
    spit(tpath("empty.bin"), "", 0);
    EXPECT_OPEN_FAIL(tpath("empty.bin"), VOLT_ERR_CORRUPT, "not a safetensors");
    unsigned char zeros[32] = { 0 };
    spit(tpath("zeros.bin"), zeros, sizeof zeros);
    EXPECT_OPEN_FAIL(tpath("zeros.bin"), VOLT_ERR_CORRUPT, "not a safetensors");

    /* missing file and directories */
    EXPECT_OPEN_FAIL(tpath("does_not_exist.safetensors"), VOLT_ERR_IO, strerror(ENOENT));
    EXPECT_OPEN_FAIL(g_dir, VOLT_ERR_IO, "regular file");

    float d[4] = { 1, 2, 3, 4 };
#define HDR(name, json, st, needle) do { make_file(tpath(name), json, d, sizeof d); \
        EXPECT_OPEN_FAIL(tpath(name), st, needle); } while (0)
    HDR("overlap.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", VOLT_ERR_CORRUPT, "overlap");
    HDR("exceed.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}",
        VOLT_ERR_CORRUPT, "'a'");
    HDR("exceed2.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4294967296,4294967300]}}",
        VOLT_ERR_CORRUPT, "exceed");
    HDR("size.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
        VOLT_ERR_CORRUPT, "tensor 'a'");
    HDR("backwards.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}",
        VOLT_ERR_CORRUPT, "data_offsets");
    HDR("offs3.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}",
        VOLT_ERR_CORRUPT, "data_offsets");
    HDR("dtype.st", "{\"a\":{\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        VOLT_ERR_CORRUPT, "unknown dtype");
    HDR("f64.st", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}",
        VOLT_ERR_UNSUPPORTED, "F64");
    /* dtypes volt lacks beside one it has: the open fails only when it would read them; left
     * out (open_some), they stay listed and find says UNSUPPORTED; sub-byte ones are sized in
     * whole bytes (F4 x 3 = 2 bytes) and their offsets checked as any */
    make_file(tpath("mixed.st"), "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[8,11]},"
              "\"c\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[11,13]}}", d, sizeof d);
    EXPECT_OPEN_FAIL(tpath("mixed.st"), VOLT_ERR_UNSUPPORTED, "tensor 'b': dtype BOOL");
    {
        volt_st_file *mf = NULL;
        volt_st_info mi;
        char merr[512] = "";
        CHECK(volt_st_open_some(tpath("mixed.st"), want_only_a, NULL, &mf, merr, sizeof merr) == VOLT_OK, "mixed, a only: %s", merr);
        CHECK(mf && volt_st_count(mf) == 3 && volt_st_find(mf, "b", &mi) == VOLT_ERR_UNSUPPORTED &&
              volt_st_find(mf, "c", &mi) == VOLT_ERR_UNSUPPORTED && volt_st_find(mf, "a", &mi) == VOLT_OK && mi.data &&
              !memcmp(mi.data, d, 8), "mixed: the foreign tensors listed, not described; a read");
        volt_st_close(mf);
    }
    HDR("f4size.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"c\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[8,11]}}", VOLT_ERR_CORRUPT, "F4 (3) needs 2");
    HDR("dims5.st", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,4],\"data_offsets\":[0,4]}}",
        VOLT_ERR_UNSUPPORTED, "dims");
    HDR("neg.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}",
        VOLT_ERR_CORRUPT, "shape");
    HDR("frac.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}",
        VOLT_ERR_CORRUPT, "shape");
    HDR("strshape.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}",
        VOLT_ERR_CORRUPT, "shape");
    HDR("overflow.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
        "\"data_offsets\":[0,4]}}", VOLT_ERR_CORRUPT, "too large");
    HDR("nodtype.st", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", VOLT_ERR_CORRUPT, "lacks");
    HDR("notobj.st", "{\"a\":5}", VOLT_ERR_CORRUPT, "'a'");
    HDR("badjson.st", "{\"a\": {\"dtype\": ", VOLT_ERR_CORRUPT, "JSON");
    HDR("array.st", "[1, 2, 3]", VOLT_ERR_CORRUPT, "not a safetensors");
    HDR("trailing.st", "{} x", VOLT_ERR_CORRUPT, "trailing");
    HDR("meta.st", "{\"__metadata__\":{\"k\":5}}", VOLT_ERR_CORRUPT, "__metadata__");
    HDR("meta2.st", "{\"__metadata__\":[1]}", VOLT_ERR_CORRUPT, "__metadata__");
    HDR("dup.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", VOLT_ERR_CORRUPT, "twice");
#undef HDR
    /* An embedded NUL inside the header is not JSON. */
    char nul[] = "{\"a\":1}\0 trailing";
    {
        unsigned char b[8 + 24] = { 24 };
        memcpy(b + 8, nul, sizeof nul);
        memset(b + 8 + sizeof nul, ' ', 24 - sizeof nul);
        spit(tpath("nul.st"), b, sizeof b);
        EXPECT_OPEN_FAIL(tpath("nul.st"), VOLT_ERR_CORRUPT, NULL);
    }

    /* A file from another writer: no __metadata__, entries not in data order, a gap-free
     * layout different from ours, no crcs -> opens and verifies OK. */
    uint16_t h[2] = { 0x3C00, 0xC000 };
    unsigned char data[12];
    memcpy(data, h, 4);
    memcpy(data + 4, d, 8);
    make_file(tpath("foreign.st"), "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
              "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", data, sizeof data);
    volt_st_file *f = NULL;
    char err[512] = "";
    volt_status st = volt_st_open(tpath("foreign.st"), &f, err, sizeof err);
    CHECK(st == VOLT_OK, "foreign: %s", err);
    if (f) {
        CHECK(volt_st_meta_count(f) == 0, "no metadata");
        CHECK_OK(volt_st_verify_all(f, err, sizeof err));
        CHECK(volt_st_name(f, 0) && strcmp(volt_st_name(f, 0), "h") == 0, "data order");
        float out[2] = { 0, 0 };
        CHECK_OK(volt_st_read_f32(f, "h", out, 2, err, sizeof err));
        CHECK(out[0] == 1.0f && out[1] == -2.0f, "h = %g %g", out[0], out[1]);
        CHECK_OK(volt_st_read_f32(f, "w", out, 2, err, sizeof err));
        CHECK(out[0] == 1.0f && out[1] == 2.0f, "w = %g %g", out[0], out[1]);
        volt_st_close(f);
    }
    /* Empty header object: a valid file with no tensors. */
    make_file(tpath("none.st"), "{}", NULL, 0);
    f = NULL;
    CHECK_OK(volt_st_open(tpath("none.st"), &f, err, sizeof err));
    CHECK(volt_st_count(f) == 0, "no tensors");
    volt_st_close(f);
}

static bool same_file(const char *path, const unsigned char *b, size_t n) {
    size_t m = 0;
    unsigned char *c = vtest_slurp(path, &m);
    bool same = c && m == n && memcmp(b, c, n) == 0;
    free(c);
    return same;
}

static void test_atomic(void) {
    char err[512] = "";
    const char *p = tpath("atomic.bin");
    const char *msg = "first version";
    CHECK_OK(volt_file_write_atomic(p, msg, strlen(msg), err, sizeof err));
    CHECK(same_file(p, (const unsigned char *)msg, strlen(msg)), "first content");
    CHECK(!exists(tpath("atomic.bin.tmp")), "tmp left");
    const char *msg2 = "second, longer version";
    CHECK_OK(volt_file_write_atomic(p, msg2, strlen(msg2), err, sizeof err));
    CHECK(same_file(p, (const unsigned char *)msg2, strlen(msg2)), "replaced content");
    CHECK_OK(volt_file_write_atomic(tpath("atomic0.bin"), NULL, 0, err, sizeof err));
    CHECK(exists(tpath("atomic0.bin")), "empty file written");

    /* the target is a directory: fails, no tmp, the directory stays */
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", tpath("adir"));
    mkdir(dir, 0755);
    volt_status st = volt_file_write_atomic(dir, msg, strlen(msg), err, sizeof err);
    CHECK(st == VOLT_ERR_IO && strstr(err, dir), "write over a directory: %s '%s'",
          volt_status_str(st), err);
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    CHECK(!exists(tmp), "tmp left after failed rename");
    struct stat sb;
    CHECK(stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode), "directory untouched");

    /* the target directory does not exist */
    st = volt_file_write_atomic(tpath("no_such_dir/x.bin"), msg, strlen(msg), err, sizeof err);
    CHECK(st == VOLT_ERR_IO && strstr(err, "no_such_dir"), "missing dir: %s '%s'",
          volt_status_str(st), err);

    /* the writer, failing mid-write (file size limit -> EFBIG): the old checkpoint stays
     * byte-identical and no .tmp is left. Works as root too, unlike permission tests. */
    const char *ck = tpath("ck.safetensors");
    volt_st_writer *w = make_writer();
    CHECK_OK(volt_st_writer_write(w, ck, err, sizeof err));
    volt_st_writer_destroy(w);
    size_t on = 0;
    unsigned char *old = vtest_slurp(ck, &on);
    static float bigdata[4096];
    for (int i = 0; i < 4096; i++) bigdata[i] = (float)i;
    CHECK_OK(volt_st_writer_create(&w));
    CHECK_OK(volt_st_writer_add(w, "big", VOLT_F32, VOLT_SHAPE(64, 64), bigdata));
    struct rlimit saved, lim;
    getrlimit(RLIMIT_FSIZE, &saved);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = saved;
    lim.rlim_cur = 1024;
    if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
        err[0] = 0;
        st = volt_st_writer_write(w, ck, err, sizeof err);
        setrlimit(RLIMIT_FSIZE, &saved);
        CHECK(st == VOLT_ERR_IO && strstr(err, ck), "write past limit: %s '%s'",
              volt_status_str(st), err);
        CHECK(strstr(volt_st_writer_errmsg(w), ck) != NULL, "errmsg kept: '%s'",
              volt_st_writer_errmsg(w));
        CHECK(old && same_file(ck, old, on), "old checkpoint changed by a failed write");
        CHECK(!exists(tpath("ck.safetensors.tmp")), "tmp left after failed write");
        volt_st_file *f = NULL;
        CHECK_OK(volt_st_open(ck, &f, err, sizeof err));
        CHECK_OK(volt_st_verify_all(f, err, sizeof err));
        volt_st_close(f);
    } else {
        printf("note: setrlimit failed, mid-write failure case skipped\n");
    }
    signal(SIGXFSZ, prev);
    /* and the same writer succeeds once the limit is gone */
    CHECK_OK(volt_st_writer_write(w, ck, err, sizeof err));
    volt_st_writer_destroy(w);
    volt_st_file *f = NULL;
    CHECK_OK(volt_st_open(ck, &f, err, sizeof err));
    check_tensor(f, "big", VOLT_F32, VOLT_SHAPE(64, 64), bigdata, sizeof bigdata);
    volt_st_close(f);
    free(old);
}

/* Reference half -> float computed a different way (ldexp), for all 65536 inputs. */
static float ref_f16(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    float v;
    if (e == 0) v = ldexpf((float)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexpf((float)(1024 + m), e - 25);
    return s ? -v : v;
}

static void test_read_f32(void) {
    static uint16_t all[65536];
    for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    uint16_t bf[6] = { 0x3F80, 0xC000, 0x7F80, 0xFF80, 0x0001, 0x7FC0 };
    float f32[3] = { 0.1f, -0.0f, 3e38f };
    int32_t ints[2] = { 1, 2 };
    volt_st_writer *w = NULL;
    char err[512] = "";
    CHECK_OK(volt_st_writer_create(&w));
    CHECK_OK(volt_st_writer_add(w, "f16_all", VOLT_F16, VOLT_SHAPE(65536), all));
    CHECK_OK(volt_st_writer_add(w, "bf16", VOLT_BF16, VOLT_SHAPE(2, 3), bf));
    CHECK_OK(volt_st_writer_add(w, "f32", VOLT_F32, VOLT_SHAPE(3), f32));
    CHECK_OK(volt_st_writer_add(w, "ints", VOLT_I32, VOLT_SHAPE(2), ints));
    CHECK_OK(volt_st_writer_write(w, tpath("conv.safetensors"), err, sizeof err));
    volt_st_writer_destroy(w);
    volt_st_file *f = NULL;
    CHECK_OK(volt_st_open(tpath("conv.safetensors"), &f, err, sizeof err));
    if (!f) return;

    static float out[65536];
    CHECK_OK(volt_st_read_f32(f, "f16_all", out, 65536, err, sizeof err));
    int bad = 0;
    for (int i = 0; i < 65536; i++) {
        float r = ref_f16((uint16_t)i);
        bool ok = isnan(r) ? isnan(out[i]) : (out[i] == r && signbit(out[i]) == signbit(r));
        if (!ok && bad++ < 5) CHECK(0, "f16 0x%04x -> %g, want %g", i, out[i], r);
    }
    CHECK(bad == 0, "%d f16 values wrong", bad);
    /* spot values */
    CHECK(out[0x3C00] == 1.0f && out[0xC000] == -2.0f && out[0x7BFF] == 65504.0f, "f16 normals");
    CHECK(out[0x0001] == 5.9604644775390625e-08f && out[0x0400] == 6.103515625e-05f, "f16 subnormal");
    CHECK(out[0x03FF] == 6.097555160522461e-05f, "largest subnormal %g", out[0x03FF]);
    CHECK(isinf(out[0x7C00]) && out[0x7C00] > 0 && isinf(out[0xFC00]) && out[0xFC00] < 0, "f16 inf");
    CHECK(isnan(out[0x7E00]) && out[0x8000] == 0 && signbit(out[0x8000]), "f16 nan, -0");

    float b[6];
    CHECK_OK(volt_st_read_f32(f, "bf16", b, 6, err, sizeof err));
    CHECK(b[0] == 1.0f && b[1] == -2.0f, "bf16 %g %g", b[0], b[1]);
    CHECK(isinf(b[2]) && b[2] > 0 && isinf(b[3]) && b[3] < 0, "bf16 inf");
    CHECK(b[4] == ldexpf(1.0f, -133), "bf16 subnormal %g", b[4]);
    CHECK(isnan(b[5]), "bf16 nan");

    float c[3];
    CHECK_OK(volt_st_read_f32(f, "f32", c, 3, err, sizeof err));
    CHECK(memcmp(c, f32, sizeof c) == 0, "f32 passthrough");

    volt_status st = volt_st_read_f32(f, "bf16", b, 5, err, sizeof err);
    CHECK(st == VOLT_ERR_SHAPE && strstr(err, "(2, 3)") && strstr(err, "6 elements") &&
          strstr(err, "expected 5") && strstr(err, "'bf16'"), "numel mismatch: %s", err);
    st = volt_st_read_f32(f, "ints", b, 2, err, sizeof err);
    CHECK(st == VOLT_ERR_DTYPE && strstr(err, "I32"), "int dtype: %s", err);
    st = volt_st_read_f32(f, "nope", b, 2, err, sizeof err);
    CHECK(st == VOLT_ERR_NOT_FOUND && strstr(err, "'nope'"), "missing: %s", err);
    volt_st_close(f);

    /* a foreign file may put 16-bit tensors at odd offsets: read element by element */
    const unsigned char odd[11] = { 0xAA, 0x00, 0x3C, 0x00, 0xC0, 0x01, 0x00, 0x80, 0x3F, 0x00, 0xC0 };
    make_file(tpath("odd.safetensors"),
              "{\"u8\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
              "\"h\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[1,7]},"
              "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[7,11]}}", odd, sizeof odd);
    f = NULL;
    CHECK_OK(volt_st_open(tpath("odd.safetensors"), &f, err, sizeof err));
    if (!f) return;
    float h[3] = { 0 }, bb[2] = { 0 };
    CHECK_OK(volt_st_read_f32(f, "h", h, 3, err, sizeof err));
    CHECK(h[0] == 1.0f && h[1] == -2.0f && h[2] == 5.9604644775390625e-08f, "odd-offset f16 %g %g %g", h[0], h[1], h[2]);
    CHECK_OK(volt_st_read_f32(f, "b", bb, 2, err, sizeof err));
    CHECK(bb[0] == 1.0f && bb[1] == -2.0f, "odd-offset bf16 %g %g", bb[0], bb[1]);
    volt_st_close(f);
}

/* python3 (stdlib only) re-checks our file with the reference loader's rules; if the real
 * `safetensors` package and numpy are importable it also loads our file and writes one
 * for us to read. Skipped when python3 is absent. */
static void test_python(void) {
    if (system("python3 -c 'import json, struct' >/dev/null 2>&1") != 0) {
        printf("note: python3 not available, cross-check skipped\n");
        return;
    }
    const char *script = tpath("check.py");
    const char *py =
        "import json, struct, sys\n"
        "path, out = sys.argv[1], sys.argv[2]\n"
        "b = open(path, 'rb').read()\n"
        "(n,) = struct.unpack('<Q', b[:8])\n"
        "assert n <= 100_000_000 and 8 + n <= len(b) and n % 8 == 0\n"
        "hdr = b[8:8 + n].decode('utf-8')\n"
        "assert hdr.startswith('{')\n"
        "h = json.loads(hdr)\n"
        "meta = h.pop('__metadata__', {})\n"
        "assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())\n"
        "size = {'F32': 4, 'BF16': 2, 'F16': 2, 'I32': 4, 'I64': 8, 'U8': 1}\n"
        "pos = 0\n"
        "for name, t in sorted(h.items(), key=lambda kv: kv[1]['data_offsets']):\n"
        "    s, e = t['data_offsets']\n"
        "    assert type(s) is int and type(e) is int, name\n"
        "    assert all(type(d) is int and d >= 0 for d in t['shape']), name\n"
        "    numel = 1\n"
        "    for d in t['shape']: numel *= d\n"
        "    assert s == pos and e - s == numel * size[t['dtype']], name\n"
        "    pos = e\n"
        "assert pos == len(b) - 8 - n\n"
        "import zlib\n"
        "for name, t in h.items():\n"
        "    s, e = t['data_offsets']\n"
        "    assert meta['crc32:' + name] == '%08x' % zlib.crc32(b[8 + n + s:8 + n + e]), name\n"
        "try:\n"
        "    import numpy as np\n"
        "    from safetensors.numpy import load_file, save_file\n"
        "except Exception:\n"
        "    sys.exit(0)\n"
        "d = load_file(path)\n"
        "assert d['fc1.weight'].shape == (2, 3) and float(d['fc1.weight'][0, 1]) == -2.25\n"
        "assert d['scalar'].shape == () and float(d['scalar']) == 42.0\n"
        "assert d['empty2'].shape == (3, 0)\n"
        "save_file({'a': np.arange(6, dtype=np.float32).reshape(2, 3),\n"
        "           'b': np.array([1, 2], dtype=np.int64)}, out, metadata={'k': 'v'})\n"
        "sys.exit(10)\n";
    spit(script, py, strlen(py));
    char cmd[4096];
    const char *pyout = tpath("from_python.safetensors");
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s' '%s'", script, tpath("rt.safetensors"), pyout);
    int rc = system(cmd);
    int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    CHECK(code == 0 || code == 10, "python format check failed (exit %d)", code);
    if (code != 10) {
        printf("note: python 'safetensors' not importable; checked the layout with the stdlib only\n");
        return;
    }
    volt_st_file *f = NULL;
    char err[512] = "";
    CHECK_OK(volt_st_open(pyout, &f, err, sizeof err));
    if (!f) return;
    float a[6];
    CHECK_OK(volt_st_read_f32(f, "a", a, 6, err, sizeof err));
    CHECK(a[0] == 0 && a[5] == 5, "python tensor a");
    CHECK(volt_st_meta(f, "k") && strcmp(volt_st_meta(f, "k"), "v") == 0, "python meta");
    CHECK_OK(volt_st_verify_all(f, err, sizeof err));
    volt_st_close(f);
}

/* Random byte mutations (fixed seed), mostly in the header: open either fails cleanly or
 * yields a file whose every tensor can be verified and read. ASan/UBSan catch the rest. */
static void test_mutations(void) {
    size_t n = 0;
    unsigned char *orig = vtest_slurp(tpath("rt.safetensors"), &n);
    if (!orig) { CHECK(0, "read back"); return; }
    unsigned char *b = malloc(n);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)orig[i] << (8 * i);
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    const char *p = tpath("mut.safetensors");
    int opened = 0, failed = 0, other = 0;
    static const char subst[] = "{}[]\",:0123456789-.e \\u";
    for (int it = 0; it < 3000; it++) {
        memcpy(b, orig, n);
        int k = 1 + (int)(rng >> 62);
        for (int j = 0; j < k; j++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            size_t pos = (rng >> 33) % 8 == 0 ? (size_t)((rng >> 20) % n)
                                              : 8 + (size_t)((rng >> 20) % hl);
            b[pos] = (rng >> 13) & 1 ? (unsigned char)subst[(rng >> 5) % (sizeof subst - 1)]
                                     : (unsigned char)(rng >> 40);
        }
        spit(p, b, n);
        volt_st_file *f = NULL;
        char err[512] = "";
        volt_status st = volt_st_open(p, &f, err, sizeof err);
        if (st == VOLT_OK) {
            opened++;
            for (int i = 0; i < volt_st_count(f); i++) {
                volt_st_info info;
                const char *nm = volt_st_name(f, i);
                if (volt_st_find(f, nm, &info) != VOLT_OK) { other++; continue; }
                (void)volt_st_verify(f, nm, err, sizeof err);
                int64_t ne = volt_shape_numel(info.shape);
                float *dst = malloc((size_t)(ne ? ne : 1) * sizeof *dst);
                (void)volt_st_read_f32(f, nm, dst, ne, err, sizeof err);
                free(dst);
            }
            volt_st_close(f);
        } else if (st == VOLT_ERR_CORRUPT || st == VOLT_ERR_UNSUPPORTED) {
            failed++;
            if (f != NULL || !strstr(err, p)) {
                if (other++ < 5) fprintf(stderr, "mutation %d: message '%s'\n", it, err);
            }
        } else {
            other++;
        }
    }
    CHECK(other == 0, "%d mutations gave another status or a bad message", other);
    CHECK(opened + failed == 3000, "opened %d failed %d", opened, failed);
    printf("mutations: %d opened, %d rejected\n", opened, failed);
    free(b);
    free(orig);
}

/* Streaming writer: header first, tensors in declaration order, crcs patched at the end; the
 * file equals what the reader expects; misuse is refused; an abandoned stream leaves any
 * existing file untouched and no .tmp behind. */
/* Flip one byte `from_end` bytes before the end of the file at p, then open and verify it:
 * verify_all's status (err: its message). */
static volt_status flip_and_verify(const char *p, size_t from_end, char *err, size_t errlen) {
    size_t n = 0;
    unsigned char *b = vtest_slurp(p, &n);
    if (!b || n < from_end) { free(b); snprintf(err, errlen, "cannot read '%s'", p); return VOLT_ERR_IO; }
    b[n - from_end] ^= 0x10;
    spit(p, b, n);
    free(b);
    volt_st_file *f = NULL;
    volt_status st = volt_st_open(p, &f, err, errlen);
    if (st == VOLT_OK) st = volt_st_verify_all(f, err, errlen);
    volt_st_close(f);
    return st;
}

static void test_stream(void) {
    const char *p = tpath("stream.safetensors");
    float a[300], b[7];
    uint16_t h[5] = { 0x3c00, 0x4000, 0, 0x8000, 0x7bff };
    for (int i = 0; i < 300; i++) a[i] = (float)i * 0.25f - 3.f;
    for (int i = 0; i < 7; i++) b[i] = (float)(i * i);
    char err[512] = "";
    volt_st_stream *s = NULL;
    CHECK_OK(volt_st_stream_create(p, &s, err, sizeof err));
    if (!s) return;
    CHECK_OK(volt_st_stream_declare(s, "layer.weight", VOLT_F32, VOLT_SHAPE(20, 15)));
    CHECK_OK(volt_st_stream_declare(s, "layer.bias", VOLT_F32, VOLT_SHAPE(7)));
    CHECK_OK(volt_st_stream_declare(s, "half", VOLT_F16, VOLT_SHAPE(5)));
    CHECK(volt_st_stream_declare(s, "layer.bias", VOLT_F32, VOLT_SHAPE(7)) == VOLT_ERR_INVALID_ARG, "duplicate refused");
    CHECK(volt_st_stream_meta(s, "crc32:x", "1") == VOLT_ERR_INVALID_ARG, "reserved key refused");
    CHECK_OK(volt_st_stream_meta(s, "note", "streamed"));
    /* values shaped like the crc placeholders ("c" + a tensor's index) stay the user's */
    CHECK_OK(volt_st_stream_meta(s, "a_note", "c0000000"));
    CHECK_OK(volt_st_stream_meta(s, "b_note", "c0000002"));
    CHECK(volt_st_stream_write(s, "layer.weight", a) == VOLT_ERR_STATE, "write before begin refused");
    CHECK_OK(volt_st_stream_begin(s));
    CHECK(volt_st_stream_declare(s, "late", VOLT_F32, VOLT_SHAPE(1)) == VOLT_ERR_STATE, "declare after begin refused");
    CHECK(volt_st_stream_write(s, "layer.bias", b) == VOLT_ERR_INVALID_ARG, "out of order refused");
    CHECK(strstr(volt_st_stream_errmsg(s), "expected 'layer.weight'") != NULL, "message: %s", volt_st_stream_errmsg(s));
    CHECK_OK(volt_st_stream_write(s, "layer.weight", a));
    CHECK_OK(volt_st_stream_write(s, "layer.bias", b));
    CHECK_OK(volt_st_stream_write(s, "half", h));
    CHECK_OK(volt_st_stream_finish(s, err, sizeof err));
    volt_st_file *f = NULL;
    CHECK_OK(volt_st_open(p, &f, err, sizeof err));
    if (!f) return;
    CHECK(volt_st_verify_all(f, err, sizeof err) == VOLT_OK, "crcs verify: %s", err);
    volt_st_info ia, ib, ih;
    CHECK(volt_st_find(f, "layer.weight", &ia) == VOLT_OK && !memcmp(ia.data, a, sizeof a) && ia.shape.d[0] == 20, "weight");
    CHECK(volt_st_find(f, "layer.bias", &ib) == VOLT_OK && !memcmp(ib.data, b, sizeof b), "bias");
    CHECK(volt_st_find(f, "half", &ih) == VOLT_OK && ih.dtype == VOLT_F16 && !memcmp(ih.data, h, sizeof h), "f16");
    CHECK(volt_st_meta(f, "note") && !strcmp(volt_st_meta(f, "note"), "streamed"), "metadata");
    CHECK(volt_st_meta(f, "a_note") && !strcmp(volt_st_meta(f, "a_note"), "c0000000") && volt_st_meta(f, "b_note") &&
          !strcmp(volt_st_meta(f, "b_note"), "c0000002"), "placeholder-shaped metadata kept: '%s', '%s'",
          volt_st_meta(f, "a_note") ? volt_st_meta(f, "a_note") : "?", volt_st_meta(f, "b_note") ? volt_st_meta(f, "b_note") : "?");
    volt_st_close(f);
    /* a flipped data byte fails verification like any volt file */
    CHECK(flip_and_verify(p, 30, err, sizeof err) == VOLT_ERR_CORRUPT, "corruption detected: %s", err);
    /* abandoned halfway: the existing file stays as it was, no .tmp left */
    size_t n = 0;
    unsigned char *bytes = vtest_slurp(p, &n);
    CHECK_OK(volt_st_stream_create(p, &s, err, sizeof err));
    CHECK_OK(volt_st_stream_declare(s, "x", VOLT_F32, VOLT_SHAPE(300)));
    CHECK_OK(volt_st_stream_declare(s, "y", VOLT_F32, VOLT_SHAPE(7)));
    CHECK_OK(volt_st_stream_begin(s));
    CHECK_OK(volt_st_stream_write(s, "x", a));
    CHECK(volt_st_stream_finish(s, err, sizeof err) == VOLT_ERR_STATE && strstr(err, "1 of 2"), "finish with a tensor missing: %s", err);
    size_t n2 = 0;
    unsigned char *after = vtest_slurp(p, &n2);
    CHECK(bytes && after && n == n2 && !memcmp(bytes, after, n), "the earlier file is untouched");
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    CHECK(access(tmp, F_OK) != 0, "no .tmp left behind");
    free(bytes);
    free(after);
}

/* A tensor over 8 MiB gets its crc from spans on several threads, joined (core/safetensors.c):
 * the same value as zlib in one pass, and a flipped byte in its last, short span is caught. */
static void test_crc_large(void) {
    const int64_t n = (9 << 20) / 4 + 333;   /* not a multiple of the 64 spans */
    float *x = malloc((size_t)n * 4);
    if (!x) { CHECK(0, "out of memory"); return; }
    uint32_t r = 7;
    for (int64_t i = 0; i < n; i++) { r = r * 1664525u + 1013904223u; x[i] = (float)(r >> 8) - 8e6f; }
    const char *p = tpath("large.safetensors");
    char err[512] = "", want[16];
    volt_st_writer *w = NULL;
    CHECK_OK(volt_st_writer_create(&w));
    CHECK_OK(volt_st_writer_add(w, "big", VOLT_F32, VOLT_SHAPE(n), x));
    CHECK_OK(volt_st_writer_write(w, p, err, sizeof err));
    volt_st_writer_destroy(w);
    uLong c = crc32(0L, Z_NULL, 0);
    for (int64_t i = 0; i < n; i += 1 << 18)
        c = crc32(c, (const Bytef *)(x + i), (uInt)((n - i < (1 << 18) ? n - i : (1 << 18)) * 4));
    snprintf(want, sizeof want, "%08lx", c);
    volt_st_file *f = NULL;
    CHECK_OK(volt_st_open(p, &f, err, sizeof err));
    if (f) {
        CHECK(volt_st_meta(f, "crc32:big") && !strcmp(volt_st_meta(f, "crc32:big"), want),
              "crc of a large tensor %s, zlib in one pass %s", volt_st_meta(f, "crc32:big"), want);
        CHECK_OK(volt_st_verify_all(f, err, sizeof err));
        volt_st_close(f);
    }
    CHECK(flip_and_verify(p, 5, err, sizeof err) == VOLT_ERR_CORRUPT && strstr(err, "'big' crc mismatch"),
          "a flipped byte in the last span: %s", err);
    free(x);
}

/* Bytes this process has read so far (/proc/self/io rchar): what volt_st_open_some skips is
 * never read. -1 where the kernel does not say. */
static long long bytes_read(void) {
    FILE *f = fopen("/proc/self/io", "r");
    if (!f) return -1;
    char line[128];
    long long v = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "rchar: %lld", &v) == 1) break;
    fclose(f);
    return v;
}

static bool want_not_opt(const char *name, void *ctx) {
    ++*(int *)ctx;
    return strncmp(name, "opt.", 4) != 0;
}

/* volt_st_open_some: the tensors it is not asked for stay listed but are neither read nor
 * checked; runs of wanted tensors around them read whole. */
static void test_open_some(void) {
    const char *p = tpath("some.safetensors");
    enum { BIG = 1 << 20 };   /* 4 MiB of f32 the selection leaves in the file */
    float *big = malloc(sizeof(float) * BIG), a[6] = { 1, 2, 3, 4, 5, 6 }, c[3] = { 7, 8, 9 };
    for (int i = 0; i < BIG; i++) big[i] = (float)i;
    volt_st_writer *w = NULL;
    char err[512] = "";
    CHECK_OK(volt_st_writer_create(&w));
    CHECK_OK(volt_st_writer_add(w, "a", VOLT_F32, VOLT_SHAPE(2, 3), a));
    CHECK_OK(volt_st_writer_add(w, "opt.big", VOLT_F32, VOLT_SHAPE(BIG), big));
    CHECK_OK(volt_st_writer_add(w, "c", VOLT_F32, VOLT_SHAPE(3), c));
    CHECK_OK(volt_st_writer_write(w, p, err, sizeof err));
    volt_st_writer_destroy(w);
    free(big);
    size_t n = 0;
    unsigned char *b = vtest_slurp(p, &n);
    if (!b) { CHECK(0, "read back"); return; }
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)b[i] << (8 * i);
    b[8 + hl + 24 + 100] ^= 0x04;   /* inside opt.big (after a's 24 bytes) */
    spit(p, b, n);

    volt_st_file *f = NULL;
    int calls = 0;
    const long long r0 = bytes_read();
    CHECK_OK(volt_st_open_some(p, want_not_opt, &calls, &f, err, sizeof err));
    const long long r1 = bytes_read();
    if (!f) { free(b); return; }
    CHECK(calls == 3, "want asked once per tensor (%d)", calls);
    CHECK(r0 < 0 || r1 - r0 < BIG, "the unwanted 4 MiB were not read (%lld bytes read)", r1 - r0);
    CHECK(volt_st_count(f) == 3 && !strcmp(volt_st_name(f, 1), "opt.big"), "every tensor listed");
    volt_st_info info;
    CHECK(volt_st_find(f, "opt.big", &info) == VOLT_OK && !info.data && info.nbytes == sizeof(float) * BIG &&
          info.shape.d[0] == BIG, "an unread tensor: its shape and size, no data");
    CHECK_OK(volt_st_verify_all(f, err, sizeof err));   /* the damage is in what was not read */
    float got[6] = { 0 }, gc[3] = { 0 };
    CHECK_OK(volt_st_read_f32(f, "a", got, 6, err, sizeof err));
    CHECK_OK(volt_st_read_f32(f, "c", gc, 3, err, sizeof err));
    CHECK(!memcmp(got, a, sizeof a) && !memcmp(gc, c, sizeof c), "wanted tensors read");
    float one;
    CHECK(volt_st_read_f32(f, "opt.big", &one, BIG, err, sizeof err) == VOLT_ERR_STATE && strstr(err, "opt.big") &&
          strstr(err, "not read"), "reading an unread tensor: %s", err);
    volt_st_close(f);
    /* all of it: the damage shows */
    CHECK_OK(volt_st_open(p, &f, err, sizeof err));
    CHECK(f && volt_st_verify_all(f, err, sizeof err) == VOLT_ERR_CORRUPT && strstr(err, "opt.big"), "full open: %s", err);
    volt_st_close(f);
    /* damage in a wanted tensor after the gap is still found */
    b[8 + hl + 24 + 100] ^= 0x04;
    b[n - 2] ^= 0x01;   /* inside c, the last tensor */
    spit(p, b, n);
    calls = 0;
    CHECK_OK(volt_st_open_some(p, want_not_opt, &calls, &f, err, sizeof err));
    CHECK(f && volt_st_verify_all(f, err, sizeof err) == VOLT_ERR_CORRUPT && strstr(err, "'c'"), "c damaged: %s", err);
    volt_st_close(f);
    /* a file cut inside the last wanted tensor: truncated, whatever is skipped */
    spit(p, b, n - 4);
    CHECK(volt_st_open_some(p, want_not_opt, &calls, &f, err, sizeof err) == VOLT_ERR_CORRUPT && !f, "truncated: %s", err);
    free(b);
}

/* Deferred tensors (volt_st_open_deferred): read before the check is refused; the check reads
 * them through in pieces (the largest buffer: one piece, not the tensor); a read gives the
 * bytes; a slice kept by volt__st_keep_range reads alone and is checked against the crc of its
 * bytes as the check saw them (a change outside it is not its business, one inside it is
 * caught); damage anywhere in a tensor fails the check even when only a slice is kept. */
static bool defer_all(const char *name, void *ctx) { (void)name; (void)ctx; return true; }
static bool want_a(const char *name, void *ctx) { (void)ctx; return !strcmp(name, "a"); }

static void test_deferred(void) {
    const char *p = tpath("deferred.safetensors");
    enum { BIG = 3 << 20 };   /* 12 MiB of f32: two 8 MiB pieces */
    float *big = malloc(sizeof(float) * BIG), a[6] = { 1, 2, 3, 4, 5, 6 };
    for (int i = 0; i < BIG; i++) big[i] = (float)i;
    volt_st_writer *w = NULL;
    char err[512] = "";
    CHECK_OK(volt_st_writer_create(&w));
    CHECK_OK(volt_st_writer_add(w, "a", VOLT_F32, VOLT_SHAPE(2, 3), a));
    CHECK_OK(volt_st_writer_add(w, "big", VOLT_F32, VOLT_SHAPE(BIG), big));
    CHECK_OK(volt_st_writer_write(w, p, err, sizeof err));
    volt_st_writer_destroy(w);
    size_t n = 0;
    unsigned char *b = vtest_slurp(p, &n);
    if (!b) { free(big); CHECK(0, "read back"); return; }
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)b[i] << (8 * i);
    const size_t big_at = 8 + hl + 24;   /* after a's 24 bytes */
    float *got = malloc(sizeof(float) * BIG);

    volt_st_file *f = NULL;
    volt__st_read_peak(true);
    CHECK_OK(volt_st_open_deferred(p, NULL, defer_all, NULL, &f, err, sizeof err));
    volt_st_info in;
    CHECK(f && volt_st_find(f, "big", &in) == VOLT_OK && !in.data && in.nbytes == sizeof(float) * BIG, "big stays in the file");
    CHECK(f && volt_st_read_deferred(f, "big", got, sizeof(float) * BIG, err, sizeof err) == VOLT_ERR_STATE, "read before the check: %s", err);
    CHECK(f && volt_st_check(f, err, sizeof err) == VOLT_OK, "check: %s", err);
    CHECK(volt__st_read_peak(false) <= ((size_t)8 << 20), "the check read in pieces (largest %zu bytes)", volt__st_read_peak(false));
    CHECK(f && volt_st_read_deferred(f, "big", got, sizeof(float) * BIG, err, sizeof err) == VOLT_OK && !memcmp(got, big, sizeof(float) * BIG),
          "big reads back: %s", err);
    CHECK(f && volt_st_read_deferred(f, "big", got, 16, err, sizeof err) == VOLT_ERR_INVALID_ARG, "a short buffer: %s", err);
    volt_st_close(f);

    /* bytes after every tensor (a sparse terabyte here) are never allocated nor read: the file
     * opens, deferred or not, with a's values; before, the open asked for the whole tail */
    char sp[1100];
    snprintf(sp, sizeof sp, "%s.sparse", p);
    FILE *cp = fopen(sp, "wb");
    if (cp) { fwrite(b, 1, n, cp); fclose(cp); }
    if (truncate(sp, (off_t)n + ((off_t)1 << 40)) == 0) {
        f = NULL;
        volt_st_info ia;
        CHECK(volt_st_open_deferred(sp, NULL, defer_all, NULL, &f, err, sizeof err) == VOLT_OK && volt_st_check(f, err, sizeof err) == VOLT_OK,
              "a sparse tail, deferred: %s", err);
        volt_st_close(f);
        f = NULL;
        CHECK(volt_st_open_some(sp, want_a, NULL, &f, err, sizeof err) == VOLT_OK && volt_st_find(f, "a", &ia) == VOLT_OK && ia.data &&
              !memcmp(ia.data, a, sizeof a), "a sparse tail, one tensor read: %s", err);
        volt_st_close(f);
    } else {
        fprintf(stderr, "test_deferred: no sparse 1 TiB file here (%s): tail case skipped\n", strerror(errno));
    }
    remove(sp);

    /* a slice: elements [1000, 3000000) */
    const uint64_t ka = 1000 * 4, kb = 3000000ull * 4;
    f = NULL;
    CHECK_OK(volt_st_open_deferred(p, NULL, defer_all, NULL, &f, err, sizeof err));
    CHECK(f && volt__st_keep_range(f, "big", 2, 8) == VOLT_ERR_INVALID_ARG, "a slice off the element boundary is refused");
    CHECK(f && volt__st_keep_range(f, "big", ka, kb) == VOLT_OK && volt__st_deferred_max_bytes(f) == kb - ka, "the slice is kept");
    CHECK(f && volt_st_check(f, err, sizeof err) == VOLT_OK, "check with a slice: %s", err);
    CHECK(f && volt__st_keep_range(f, "big", 0, 4) == VOLT_ERR_STATE, "no new slice after the check");
    b[big_at + 10] ^= 0x20;   /* outside the slice, after the check */
    spit(p, b, n);
    volt__st_read_peak(true);
    CHECK(f && volt_st_read_deferred(f, "big", got, (size_t)(kb - ka), err, sizeof err) == VOLT_OK &&
          !memcmp(got, big + 1000, (size_t)(kb - ka)), "the slice reads alone, a change outside it aside: %s", err);
    CHECK(volt__st_read_peak(false) == kb - ka, "the read took the slice only (%zu bytes)", volt__st_read_peak(false));
    b[big_at + 10] ^= 0x20;
    b[big_at + 5000 * 4] ^= 0x20;   /* inside it */
    spit(p, b, n);
    CHECK(f && volt_st_read_deferred(f, "big", got, (size_t)(kb - ka), err, sizeof err) == VOLT_ERR_CORRUPT &&
          strstr(err, "changed after it was checked") && strstr(err, "'big'"), "a change inside the slice: %s", err);
    volt_st_close(f);
    /* damage outside the slice before the check: the whole tensor is checked */
    f = NULL;
    b[big_at + 5000 * 4] ^= 0x20;
    b[big_at + 10] ^= 0x20;
    spit(p, b, n);
    CHECK_OK(volt_st_open_deferred(p, NULL, defer_all, NULL, &f, err, sizeof err));
    CHECK(f && volt__st_keep_range(f, "big", ka, kb) == VOLT_OK && volt_st_check(f, err, sizeof err) == VOLT_ERR_CORRUPT &&
          strstr(err, "crc mismatch") && strstr(err, "'big'"), "damage outside the slice fails the check: %s", err);
    volt_st_close(f);
    /* the damaged tensor left (no read will use it): the check neither reads nor judges it, a
     * read of it is refused; kept again, it is checked */
    f = NULL;
    CHECK_OK(volt_st_open_deferred(p, NULL, defer_all, NULL, &f, err, sizeof err));
    volt__st_check_read_bytes(true);
    CHECK(f && volt__st_leave(f, "big") == VOLT_OK && volt__st_deferred_max_bytes(f) == sizeof a &&
          volt_st_check(f, err, sizeof err) == VOLT_OK, "a left tensor is not checked: %s", err);
    CHECK(volt__st_check_read_bytes(false) == sizeof a, "the check read %llu bytes, a's %zu",
          (unsigned long long)volt__st_check_read_bytes(false), sizeof a);
    CHECK(f && volt_st_read_deferred(f, "big", got, sizeof(float) * BIG, err, sizeof err) == VOLT_ERR_STATE &&
          strstr(err, "left unread"), "a left tensor is not read: %s", err);
    CHECK(f && volt__st_leave(f, "a") == VOLT_ERR_STATE, "nothing is left after the check");
    volt_st_close(f);
    f = NULL;
    CHECK_OK(volt_st_open_deferred(p, NULL, defer_all, NULL, &f, err, sizeof err));
    CHECK(f && volt__st_leave(f, NULL) == VOLT_OK && volt__st_keep_range(f, "big", ka, kb) == VOLT_OK &&
          volt_st_check(f, err, sizeof err) == VOLT_ERR_CORRUPT && strstr(err, "'big'"), "kept again, it is checked: %s", err);
    CHECK(f && volt_st_read_deferred(f, "a", got, sizeof a, err, sizeof err) == VOLT_ERR_STATE, "a (left) is not read: %s", err);
    volt_st_close(f);
    /* cut short after the check: the read says so */
    b[big_at + 10] ^= 0x20;
    spit(p, b, n);
    f = NULL;
    CHECK_OK(volt_st_open_deferred(p, NULL, defer_all, NULL, &f, err, sizeof err));
    CHECK(f && volt_st_check(f, err, sizeof err) == VOLT_OK, "check: %s", err);
    spit(p, b, n - 100);
    CHECK(f && volt_st_read_deferred(f, "big", got, sizeof(float) * BIG, err, sizeof err) == VOLT_ERR_CORRUPT && strstr(err, "truncated"),
          "cut after the check: %s", err);
    volt_st_close(f);
    free(got);
    free(big);
    free(b);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s", vtest_tmpdir());
    test_open_some();
    test_deferred();
    test_crc_large();
    test_roundtrip();
    test_byte_layout();
    test_writer_errors();
    test_crc_corruption();
    test_crc_missing();
    test_truncation();
    test_mutations();
    test_hostile_headers();
    test_atomic();
    test_read_f32();
    test_python();
    test_stream();
    return vtest_finish();
}
