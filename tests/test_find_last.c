/* volt_checkpoint_find_last: Lightning's ckpt_path="last" in one folder, as the trainer and
 * ModelCheckpoint pick it — the newest by mtime of last.safetensors / last-vN.safetensors (and,
 * when asked, on_exception.safetensors), a tie to the greater name; other names, folders and
 * paths that do not fit the buffer are passed over. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "vtest.h"
#include "volt/trainer.h"

static char g_dir[512];

/* dir/name, written, its mtime set to sec.nsec */
static void touch_at(const char *name, long sec, long nsec) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL, "create %s", p);
    if (f) { fputs("x", f); fclose(f); }
    const struct timespec ts[2] = { { sec, nsec }, { sec, nsec } };
    CHECK(utimensat(AT_FDCWD, p, ts, 0) == 0, "utimensat %s", p);
}

/* the picked file's name (after the folder), or "(none)" */
static const char *pick(bool with_exc, size_t n) {
    static char buf[1024];
    const char *p = volt_checkpoint_find_last(g_dir, with_exc, buf, n);
    if (!p) return "(none)";
    CHECK(p == buf && !strncmp(p, g_dir, strlen(g_dir)) && p[strlen(g_dir)] == '/', "returned path %s", p);
    return p + strlen(g_dir) + 1;
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s/find_last", vtest_tmpdir());
    vtest_fresh_dir(g_dir);
    CHECK(!strcmp(pick(true, 1024), "(none)"), "an empty folder has no last");
    char none[1024];
    CHECK(volt_checkpoint_find_last("/nonexistent/volt/dir", true, none, sizeof none) == NULL, "a missing folder: NULL");
    CHECK(volt_checkpoint_find_last(NULL, true, none, sizeof none) == NULL && volt_checkpoint_find_last(g_dir, true, NULL, 9) == NULL &&
          volt_checkpoint_find_last(g_dir, true, none, 0) == NULL, "NULL arguments: NULL");

    /* names that are not ModelCheckpoint's last files, however new */
    touch_at("lastx.safetensors", 900, 0);
    touch_at("last-v.safetensors", 900, 0);
    touch_at("last-v2x.safetensors", 900, 0);
    touch_at("last.safetensors.tmp", 900, 0);
    touch_at("epoch=1-step=9.safetensors", 900, 0);
    char sub[700];
    snprintf(sub, sizeof sub, "%s/last-v7.safetensors", g_dir);   /* a folder with a last name */
    CHECK(mkdir(sub, 0755) == 0, "mkdir %s", sub);
    CHECK(!strcmp(pick(true, 1024), "(none)"), "no last file among other names: %s", pick(true, 1024));

    touch_at("last.safetensors", 100, 0);
    CHECK(!strcmp(pick(false, 1024), "last.safetensors"), "one last file: %s", pick(false, 1024));
    touch_at("last-v1.safetensors", 200, 0);
    touch_at("last-v12.safetensors", 150, 0);
    CHECK(!strcmp(pick(false, 1024), "last-v1.safetensors"), "the newest by mtime, not by name: %s", pick(false, 1024));
    touch_at("on_exception.safetensors", 300, 0);
    CHECK(!strcmp(pick(false, 1024), "last-v1.safetensors"), "on_exception left out unless asked: %s", pick(false, 1024));
    CHECK(!strcmp(pick(true, 1024), "on_exception.safetensors"), "on_exception newest when asked: %s", pick(true, 1024));
    /* nanoseconds count */
    touch_at("last-v12.safetensors", 300, 1);
    CHECK(!strcmp(pick(true, 1024), "last-v12.safetensors"), "a later nanosecond wins: %s", pick(true, 1024));
    /* a tie goes to the greater name, whichever order the folder lists them in */
    touch_at("last-v12.safetensors", 400, 5);
    touch_at("last-v1.safetensors", 400, 5);
    touch_at("last.safetensors", 400, 5);
    CHECK(!strcmp(pick(false, 1024), "last.safetensors"), "a tie: the greater name ('last.' > 'last-'): %s", pick(false, 1024));
    touch_at("on_exception.safetensors", 400, 5);
    CHECK(!strcmp(pick(true, 1024), "on_exception.safetensors"), "a tie with on_exception: the greater name: %s",
          pick(true, 1024));
    /* a buffer too short for a path: that file is passed over, never given cut */
    const size_t need = strlen(g_dir) + 1 + strlen("on_exception.safetensors") + 1;
    CHECK(!strcmp(pick(true, need), "on_exception.safetensors"), "a buffer that just fits: %s", pick(true, need));
    CHECK(!strcmp(pick(true, need - 1), "last.safetensors"), "a buffer one byte short of the newest: %s", pick(true, need - 1));
    CHECK(!strcmp(pick(true, strlen(g_dir) + 2), "(none)"), "a buffer that holds no name: %s", pick(true, strlen(g_dir) + 2));
    return vtest_finish();
}
