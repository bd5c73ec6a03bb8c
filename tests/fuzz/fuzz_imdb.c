/* The aclImdb folder walker on generated trees: the input's first byte says which of
 * train/pos train/neg test/pos test/neg exist; then records (folder byte, kind byte, name
 * length byte, name, content length byte, content) add regular files, folders, symbolic
 * links (to a file, to a folder, dangling) and FIFOs, named *.txt or not. A FIFO or a
 * folder named *.txt must give an error, never a hang. */
#include <sys/stat.h>
#include "fuzz_util.h"
#include "volt/text.h"

static const char *const sub[4] = { "train/pos", "train/neg", "test/pos", "test/neg" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char root[300], p[700], q[700];
    fuzz_path(root, sizeof root, "aclImdb");
    fuzz_rm_rf(root);
    mkdir(root, 0755);
    snprintf(p, sizeof p, "%s/train", root); mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/test", root); mkdir(p, 0755);
    for (int i = 0; i < 4; i++)
        if (data[0] >> i & 1) { snprintf(p, sizeof p, "%s/%s", root, sub[i]); mkdir(p, 0755); }
    size_t at = 1;
    for (int r = 0; r < 12 && at + 3 <= size; r++) {
        int folder = data[at] & 3, kind = data[at + 1] % 6;
        size_t nl = data[at + 2] % 24;
        at += 3;
        if (at + nl + 1 > size) break;
        char name[40];
        for (size_t i = 0; i < nl; i++) {
            char c = (char)data[at + i];
            name[i] = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ? c : 'x';
        }
        name[nl] = 0;
        at += nl;
        size_t cl = data[at++];
        if (cl > size - at) cl = size - at;
        if (!nl || !strcmp(name, ".") || !strcmp(name, "..")) { at += cl; continue; }
        snprintf(p, sizeof p, "%s/%s/%s", root, sub[folder], name);
        switch (kind) {
        case 0: case 1: fuzz_try_write(p, data + at, cl); break;                    /* a file (where the folder exists) */
        case 2: mkdir(p, 0755); break;                                          /* a folder */
        case 3: snprintf(q, sizeof q, "%s/train", root); if (symlink(q, p)) {} break;   /* link to a folder */
        case 4: if (symlink("nowhere/at/all.txt", p)) {} break;                 /* dangling */
        case 5: mkfifo(p, 0644); break;                                         /* never readable to the end */
        }
        at += cl;
    }
    volt_corpus *c = NULL;
    char err[512];
    if (volt_corpus_load_imdb(root, &c, err, sizeof err) == VOLT_OK) {
        for (int64_t i = 0; i < volt_corpus_len(c); i++) if (volt_corpus_label(c, i) < 0 || volt_corpus_label(c, i) > 1) abort();
    }
    volt_corpus_destroy(c);
    return 0;
}
