/* Checkpoint load, fast path: one trainer (the reliability tests' MLP, one step trained, a
 * ModelCheckpoint) is built once; each input is loaded into it as a resume would
 * (volt__ckpt_load with full state), after volt_checkpoint_param_shape reads its header. An input is either one safetensors file or a bundle
 * "VBNDL1\n" followed by files (u16 name length, name, u32 data length, data): the first
 * is the checkpoint (the index of a sharded one), the others are written under their name
 * beside it (one folder level; names are sanitised), so shard folders can be fuzzed too. */
#include "fuzz_util.h"
#include "../rel_model.h"
#include "trainer/trainer_internal.h"

static volt_trainer *T;
static rel_mlp M;

static void setup(void) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.max_steps = 1;
    c.enable_progress_bar = false;
    c.enable_logger = false;
    c.num_sanity_val_steps = 0;
    c.default_root_dir = fuzz_dir();
    if (volt_trainer_create(&c, &T) != VOLT_OK) abort();
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    char dp[300];
    fuzz_path(dp, sizeof dp, "ckdir");
    cc.dirpath = dp;
    cc.save_top_k = 0;
    if (volt_add_model_checkpoint(T, &cc) != VOLT_OK) abort();
    volt_dataset *ds = rel_data();
    volt_loader *l = rel_loader(ds, 8, false);
    if (volt_trainer_fit(T, &rel_ops, &M, l, NULL, NULL) != VOLT_OK) abort();
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}

static void clean_name(char *s) {
    int slashes = 0;
    for (char *c = s; *c; c++) {
        if (*c == '/' && ++slashes == 1 && c != s) continue;
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' || *c == '-' || *c == '_')) *c = '_';
    }
    if (s[0] == '.') s[0] = '_';
    for (char *c = strstr(s, ".."); c; c = strstr(c, "..")) c[0] = '_';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!T) setup();
    char work[300], ck[400];
    fuzz_path(work, sizeof work, "w");
    fuzz_rm_rf(work);
    mkdir(work, 0755);
    snprintf(ck, sizeof ck, "%s/ck.safetensors", work);
    if (size >= 7 && !memcmp(data, "VBNDL1\n", 7)) {
        size_t at = 7;
        for (int k = 0; k < 16 && at + 2 <= size; k++) {
            size_t nl = (size_t)data[at] | (size_t)data[at + 1] << 8;
            at += 2;
            if (nl == 0 || nl > 120 || at + nl + 4 > size) break;
            char name[128], p[600];
            memcpy(name, data + at, nl);
            name[nl] = 0;
            at += nl;
            size_t dl = (size_t)data[at] | (size_t)data[at + 1] << 8 | (size_t)data[at + 2] << 16 | (size_t)data[at + 3] << 24;
            at += 4;
            if (dl > size - at) dl = size - at;
            clean_name(name);
            if (strlen(name) != nl) break;
            if (k == 0) snprintf(p, sizeof p, "%s", ck);
            else {
                snprintf(p, sizeof p, "%s/%s", work, name);
                char *sl = strchr(p + strlen(work) + 1, '/');
                if (sl) { *sl = 0; mkdir(p, 0755); *sl = '/'; }
            }
            fuzz_try_write(p, data + at, dl);   /* may collide with a folder of another part */
            at += dl;
        }
    } else fuzz_write(ck, data, size);
    volt_shape sh;   /* the header-only reader an app runs before the model exists */
    (void)volt_checkpoint_param_shape(ck, "fc1.weight", &sh, NULL, 0);
    volt__ckpt_load(T, ck, true);
    return 0;
}
