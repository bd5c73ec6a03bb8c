/* The run fingerprint of a text-classification fit (volt_trainer_config.run_fingerprint):
 * what must be the same for --resume / --ckpt_path to continue a run. The trainer compares
 * it as a string and, both being JSON objects, names each key that differs.
 *
 * The data, the tokenizer and the --pretrained folder are identified by what they hold, not
 * by the paths typed: `--data imdb:.` run from aclImdb/ and `--data imdb:../aclImdb` from
 * elsewhere are one run, and another file put at the same path is another run. Checkpoints
 * written before this recorded the paths ("data=csv:PATH;...;pretrained=DIR"); see
 * text_resume_legacy. */
#include <fcntl.h>
#include <zlib.h>
#include "text_app.h"

/* zlib's crc32 of a file's bytes, and its size. -1 with errno set when it cannot be read. */
static int crc_file(const char *path, uint32_t *crc, uint64_t *size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    if (!buf) { close(fd); errno = ENOMEM; return -1; }
    uLong c = crc32(0L, Z_NULL, 0);
    uint64_t n = 0;
    ssize_t got;
    while ((got = read(fd, buf, CHUNK)) != 0) {
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) break;
        c = crc32_z(c, buf, (z_size_t)got);
        n += (uint64_t)got;
    }
    int e = errno;
    free(buf);
    close(fd);
    if (got < 0) { errno = e; return -1; }
    *crc = (uint32_t)c;
    *size = n;
    return 0;
}

/* --pretrained by content: config.json (when there is one) and every byte of
 * model.safetensors. The whole weight file rather than its size or header, because two
 * fine-tunes of one model have the same names, shapes and size and differ only in their
 * values; and it costs little: the file is read in full by the load that follows (which then
 * finds it in the page cache), one zlib crc32 pass (with the size: "<config>-<weights>", each
 * crc.size) on each rank, once per fit. The folder's path (as typed or resolved) would say
 * nothing of either. */
static int pretrained_hash(const char *dir, char *out, size_t n) {
    char p[PATH_N + 32], cfg[32] = "none";   /* a folder without config.json is not one with an empty one */
    uint32_t crc;
    uint64_t size;
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (is_file(p)) {
        if (crc_file(p, &crc, &size) < 0) goto fail;
        snprintf(cfg, sizeof cfg, "%08x.%llx", (unsigned)crc, (unsigned long long)size);
    }
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (crc_file(p, &crc, &size) < 0) goto fail;
    snprintf(out, n, "\"%s-%08x.%llx\"", cfg, (unsigned)crc, (unsigned long long)size);
    return 0;
fail:
    fprintf(stderr, APP ": --pretrained: cannot read '%s': %s\n", p, strerror(errno));
    return 1;
}

int text_fingerprint(const opts *o, const app *a, const int64_t n_split[3], int n_classes,
                     const volt_distilbert_config *mc, char *out, size_t n) {
    uint64_t data_h, tok_h;
    volt_status st;
    if ((st = volt_corpus_hash(a->all, &data_h)) < 0) return fail("hashing the corpus", st, NULL);
    if ((st = volt_text_tokenizer_hash(a->tok, &tok_h)) < 0) return fail("hashing the tokenizer", st, NULL);
    char pre[64] = "null";   /* config.json's and model.safetensors' crc32 and size */
    if (o->pretrained && pretrained_hash(o->pretrained, pre, sizeof pre)) return 1;
    /* data_hash: the texts and labels in order (the token cache's key), so the data's kind
     * and split sizes with the seed fix each split; tokenizer_hash: the vocab's tokens and the
     * tokenizer's options (lowercase among them; kept apart as the flag a user changes) */
    int w = snprintf(out, n, "{\"data\":\"%s\",\"data_hash\":\"%016llx\",\"split\":\"%lld,%lld,%lld\",\"max_length\":%d,"
                     "\"tokenizer_hash\":\"%016llx\",\"lowercase\":%s,\"model\":\"dim%lld,layers%d,heads%d,hidden%lld,"
                     "vocab%lld,pos%lld\",\"classes\":%d,\"pretrained_hash\":%s}",
                     text_kind_name(o->kind), (unsigned long long)data_h, (long long)n_split[0], (long long)n_split[1],
                     (long long)n_split[2], o->max_length, (unsigned long long)tok_h, o->lowercase ? "true" : "false",
                     (long long)mc->dim, mc->n_layers, mc->n_heads, (long long)mc->hidden_dim, (long long)mc->vocab_size,
                     (long long)mc->max_position, n_classes, pre);
    return w > 0 && (size_t)w < n ? 0 : fail("building the run fingerprint", VOLT_ERR_INVALID_ARG, NULL);
}

/* ---- checkpoints from before content fingerprints ----------------------------------------- */

/* The fingerprint this run would have had then: the paths as typed. */
static void legacy_fingerprint(const opts *o, const int64_t n_split[3], int n_classes, const volt_distilbert_config *mc,
                               char *out, size_t n) {
    snprintf(out, n,
             "data=%s:%s;split=%lld,%lld,%lld;max_length=%d;vocab=%s;lowercase=%d;model=dim%lld,layers%d,heads%d,hidden%lld,"
             "vocab%lld,pos%lld;classes=%d;pretrained=%s",
             text_kind_name(o->kind), o->data_path, (long long)n_split[0], (long long)n_split[1], (long long)n_split[2],
             o->max_length, o->vocab, o->lowercase, (long long)mc->dim, mc->n_layers, mc->n_heads, (long long)mc->hidden_dim,
             (long long)mc->vocab_size, (long long)mc->max_position, n_classes, o->pretrained ? o->pretrained : "");
}

/* "key: 'saved' -> 'now'" for each key of the "k=v;k=v" forms that differs. */
static void legacy_diff(const char *saved, const char *now, char *out, size_t n) {
    size_t k = 0;
    out[0] = 0;
    for (const char *s = saved; *s && k < n;) {
        const char *end = strchr(s, ';'), *eq = memchr(s, '=', end ? (size_t)(end - s) : strlen(s));
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (eq) {
            size_t kl = (size_t)(eq - s);
            const char *v = eq + 1, *o = NULL;   /* the same key in now */
            for (const char *t = now; t && *t; t = strchr(t, ';') ? strchr(t, ';') + 1 : NULL)
                if (!strncmp(t, s, kl) && t[kl] == '=') { o = t + kl + 1; break; }
            size_t vl = len - kl - 1, ol = o ? strcspn(o, ";") : 0;
            if (!o || vl != ol || strncmp(v, o, vl))
                k += (size_t)snprintf(out + k, n - k, "%s%.*s: '%.*s' -> '%.*s'", k ? "; " : "", (int)kl, s,
                                      (int)(vl < 300 ? vl : 300), v, (int)(ol < 300 ? ol : 300), o ? o : "");
        }
        s += len + (end ? 1 : 0);
    }
}

static bool want_none(const char *name, void *ctx) { (void)name; (void)ctx; return false; }

/* The file fit resumes from, as the trainer picks it: a path as given; "last" the newest
 * (mtime) of ModelCheckpoint's last files and OnExceptionCheckpoint's in ckdir. NULL: none
 * the app can name ("best"), or nothing there. */
static const char *resume_file(const char *ckpt, const char *ckdir, char *buf, size_t n) {
    if (!ckpt || !strcmp(ckpt, "best")) return NULL;
    if (strcmp(ckpt, "last")) return ckpt;
    return volt_checkpoint_find_last(ckdir, true, buf, n);
}

/* A checkpoint that records the old, path-based fingerprint: the same paths resume it as
 * before (fp becomes the old form, which the checkpoints of the resumed run carry on); other
 * paths or settings are refused here, naming each (the trainer would only show the two
 * texts), unless resume_anyway. Returns 0 to go on, 1 when refused (message printed). */
int text_resume_legacy(const opts *o, const char *ckpt, const char *ckdir, bool anyway, const int64_t n_split[3],
                       int n_classes, const volt_distilbert_config *mc, bool zero, char *fp, size_t n) {
    char buf[PATH_N + 128], err[PATH_N + 256];
    const char *path = resume_file(ckpt, ckdir, buf, sizeof buf);
    volt_st_file *f = NULL;
    if (!path || volt_st_open_some(path, want_none, NULL, &f, err, sizeof err) < 0) return 0;   /* the trainer says why */
    const char *saved = volt_st_meta(f, "volt.run_fingerprint");
    if (!saved || saved[0] == '{') { volt_st_close(f); return 0; }   /* none, or this form: the trainer's check */
    char *now = malloc(3 * PATH_N + 512), diff[2048];
    if (!now) { volt_st_close(f); return fail("checking the checkpoint", VOLT_ERR_NOMEM, NULL); }
    legacy_fingerprint(o, n_split, n_classes, mc, now, 3 * PATH_N + 512);
    int rc = 0;
    if (!strcmp(saved, now)) snprintf(fp, n, "%s", now);
    else if (!anyway) {
        legacy_diff(saved, now, diff, sizeof diff);
        if (zero)
            fprintf(stderr, APP ": checkpoint '%s' comes from a run with other data or model settings, or was given them "
                    "by other paths (it predates fingerprints by content, so paths are all it records): %s (start a new "
                    "run, or set trainer.resume_anyway to resume it anyway)\n", path, diff[0] ? diff : "its fingerprint differs");
        rc = 1;
    }
    free(now);
    volt_st_close(f);
    return rc;
}
