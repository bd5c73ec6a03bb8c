/* A module's own state in checkpoints (volt_module_ops.on_save_checkpoint / on_load_checkpoint
 * with volt_ckpt_put_meta / _put_tensor / _get_meta / _get_tensor; docs/CHECKPOINTS.md):
 * - extras of every element size (8, 4, 2 and 1 bytes, odd lengths) and a metadata string
 *   round-trip exactly, each tensor aligned to its element size in the file;
 * - the asynchronous path (volt_trainer_snapshot_checkpoint + volt_ckpt_snapshot_write) writes
 *   the same bytes as a save at the same moment;
 * - on_load_checkpoint runs before any value is applied: a hook that rejects the file leaves
 *   the model as it was, with an error naming the module and the hook's own reason;
 * - a callback that rejects its saved state stops a resume before anything is applied;
 * - misuse is an error, never a crash or a silent cut: a getter while saving, a setter while
 *   loading, a name too long, another dtype or shape; an absent extra is VOLT_ERR_NOT_FOUND,
 *   quietly (an optional one); on_save_checkpoint failing leaves no file and keeps the old. */
#include <stdint.h>
#include <sys/stat.h>
#include "trainer_net.h"
#include "volt/safetensors.h"

typedef struct {
    net n;                       /* first: net_ops' functions take self as net * */
    int64_t counts[5];           /* 8-byte elements */
    float ema[3 * 7];            /* 4-byte */
    uint16_t half[13];           /* bf16 bits, odd length */
    uint16_t h1[1];              /* f16 */
    uint8_t flags[11];           /* 1-byte, odd length */
    char note[64];
    int saves, loads;
    int load_mode;               /* 0 read all; 1 ask counts as i32; 2 probe misuse; 3 fail with no message */
    int save_mode;               /* 0 put all; 1 fail after a put; 2 probe misuse */
    volt_status probe[6];        /* results of the misuse probes */
    const char *probe_meta;
} xnet;

static volt_status x_save(void *self, volt_trainer *t, volt_ckpt *ck) {
    xnet *x = self;
    x->saves++;
    if (x->save_mode == 2) {
        char longname[300];
        memset(longname, 'a', sizeof longname - 1);
        longname[sizeof longname - 1] = 0;
        x->probe[0] = volt_ckpt_get_tensor(ck, "counts", VOLT_I64, VOLT_SHAPE(5), x->counts);
        x->probe_meta = volt_ckpt_get_meta(ck, "note");
        x->probe[1] = volt_ckpt_put_tensor(ck, longname, VOLT_U8, VOLT_SHAPE(11), x->flags);
        x->probe[2] = volt_ckpt_put_meta(ck, "", "x");
        x->probe[3] = volt_ckpt_put_tensor(ck, "nodata", VOLT_F32, VOLT_SHAPE(2), NULL);
        return VOLT_OK;
    }
    VOLT_TRY(volt_ckpt_put_meta(ck, "note", x->note));
    VOLT_TRY(volt_ckpt_put_tensor(ck, "counts", VOLT_I64, VOLT_SHAPE(5), x->counts));
    VOLT_TRY(volt_ckpt_put_tensor(ck, "flags", VOLT_U8, VOLT_SHAPE(11), x->flags));
    if (x->save_mode == 1) return volt_trainer_fail(t, VOLT_ERR_IO, "xnet: the extras' source went away");
    VOLT_TRY(volt_ckpt_put_tensor(ck, "half", VOLT_BF16, VOLT_SHAPE(13), x->half));
    VOLT_TRY(volt_ckpt_put_tensor(ck, "ema", VOLT_F32, VOLT_SHAPE(3, 7), x->ema));
    return volt_ckpt_put_tensor(ck, "h1", VOLT_F16, VOLT_SHAPE(1), x->h1);
}

static volt_status x_load(void *self, volt_trainer *t, volt_ckpt *ck) {
    xnet *x = self;
    x->loads++;
    if (x->load_mode == 1) {
        int32_t c32[5];
        return volt_ckpt_get_tensor(ck, "counts", VOLT_I32, VOLT_SHAPE(5), c32);   /* the file has i64 */
    }
    if (x->load_mode == 2) {
        char before[64];
        snprintf(before, sizeof before, "%s", volt_trainer_errmsg(t));
        x->probe[0] = volt_ckpt_put_meta(ck, "note", "late");
        x->probe[1] = volt_ckpt_get_tensor(ck, "nope", VOLT_F32, VOLT_SHAPE(1), x->ema);
        x->probe[2] = volt_ckpt_get_tensor(ck, "ema", VOLT_F32, VOLT_SHAPE(7, 3), x->ema);   /* another shape */
        x->probe_meta = volt_ckpt_get_meta(ck, "absent");
        return VOLT_OK;
    }
    if (x->load_mode == 3) return VOLT_ERR_INVALID_ARG;
    const char *note = volt_ckpt_get_meta(ck, "note");
    if (!note) return volt_trainer_fail(t, VOLT_ERR_NOT_FOUND, "xnet: no note in the file");
    snprintf(x->note, sizeof x->note, "%s", note);
    VOLT_TRY(volt_ckpt_get_tensor(ck, "counts", VOLT_I64, VOLT_SHAPE(5), x->counts));
    VOLT_TRY(volt_ckpt_get_tensor(ck, "ema", VOLT_F32, VOLT_SHAPE(3, 7), x->ema));
    VOLT_TRY(volt_ckpt_get_tensor(ck, "half", VOLT_BF16, VOLT_SHAPE(13), x->half));
    VOLT_TRY(volt_ckpt_get_tensor(ck, "h1", VOLT_F16, VOLT_SHAPE(1), x->h1));
    return volt_ckpt_get_tensor(ck, "flags", VOLT_U8, VOLT_SHAPE(11), x->flags);
}

static volt_module_ops xnet_ops(void) {
    volt_module_ops o = net_ops;
    o.name = "xnet";
    o.on_save_checkpoint = x_save;
    o.on_load_checkpoint = x_load;
    return o;
}

static void fill(xnet *x) {
    for (int i = 0; i < 5; i++) x->counts[i] = (i % 2 ? -1 : 1) * ((int64_t)1 << (10 * i)) + i;
    for (int i = 0; i < 21; i++) x->ema[i] = 0.125f * (float)i - 1.f;
    for (int i = 0; i < 13; i++) x->half[i] = (uint16_t)(0x3f80 + 7 * i);
    x->h1[0] = 0x3c00;
    for (int i = 0; i < 11; i++) x->flags[i] = (uint8_t)(250 - 17 * i);
    snprintf(x->note, sizeof x->note, "tokenizer: \"bert\" v2, ünïcode, 3 \\ 4");
}

static bool same_extras(const xnet *a, const xnet *b) {
    return !memcmp(a->counts, b->counts, sizeof a->counts) && !memcmp(a->ema, b->ema, sizeof a->ema) &&
           !memcmp(a->half, b->half, sizeof a->half) && !memcmp(a->h1, b->h1, sizeof a->h1) &&
           !memcmp(a->flags, b->flags, sizeof a->flags) && !strcmp(a->note, b->note);
}

/* A callback with state: it saves {"version": 1}; loading rejects any other version */
typedef struct { int want; int loads; } vcb;
static char *vcb_state(void *self) {
    (void)self;
    char *s = malloc(32);
    if (s) snprintf(s, 32, "{\"version\": 1}");
    return s;
}
static volt_status vcb_load(void *self, volt_trainer *t, const char *json) {
    vcb *c = self;
    c->loads++;
    char want[32];
    snprintf(want, sizeof want, "\"version\":%d", c->want);
    if (!strstr(json, want)) return volt_trainer_fail(t, VOLT_ERR_VERSION, "Versioned: state %s is not version %d", json, c->want);
    return VOLT_OK;
}
static const volt_callback_ops vcb_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Versioned",
                                           .state_dict = vcb_state, .load_state_dict = vcb_load };

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)(len > 0 ? len : 1));
    *n = b && fread(b, 1, (size_t)len, f) == (size_t)len ? (size_t)len : 0;
    fclose(f);
    return b;
}

static bool exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* mpirun -np N test_checkpoint_extras sharded S (tests/checkpoint_extras.cmake): a sharded save
 * keeps the extras in rank 0's index and every rank's on_load_checkpoint reads them; a hook
 * that rejects the file on rank 1 alone fails every rank with rank 1's reason, and no rank's
 * weights change. */
static int sharded(const char *strategy) {
    char root[512], p[700];
    snprintf(root, sizeof root, "%s/extras_%s", vtest_tmpdir(), strategy);
    mkdir(root, 0755);
    snprintf(p, sizeof p, "%s/sharded.safetensors", root);
    volt_dataset *ds = make_data();
    volt_loader *tl = make_loader(ds, 16, true, 0), *vl = make_loader(ds, 32, false, 0);
    const volt_module_ops ops = xnet_ops();
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.strategy = strategy;
    c.seed = 3;
    volt_trainer *ta = NULL, *tb = NULL;
    CHECK_OK(volt_trainer_create(&c, &ta));
    const int rank = ta ? volt_trainer_rank(ta) : 0, world = ta ? volt_trainer_world_size(ta) : 1;
    if (world < 2) {
        volt_trainer_destroy(ta);
        VTEST_SKIP("sharded needs 2 or more ranks (mpirun -np 2)");
    }
    xnet a = { .n = { .in = IN, .hidden = 8, .out = NC } }, b = a;
    fill(&a);
    CHECK_OK(volt_trainer_fit(ta, &ops, &a, tl, NULL, NULL));
    CHECK_OK(volt_trainer_save_checkpoint(ta, p));
    CHECK(a.saves == (rank == 0), "rank %d: on_save_checkpoint ran %d times (rank 0 writes the index)", rank, a.saves);
    CHECK_OK(volt_trainer_create(&c, &tb));
    CHECK_OK(volt_trainer_validate(tb, &ops, &b, vl, p));
    CHECK(b.loads == 1 && same_extras(&a, &b), "rank %d: the extras from the index (loads %d, note '%s')", rank, b.loads,
          b.note);
    int64_t n0, n1;
    float *w0 = snapshot(tb, &n0);
    /* rank 1 alone rejects the file: every rank fails with its words, nothing applied anywhere */
    CHECK_OK(volt_trainer_fit(ta, &ops, &a, tl, NULL, NULL));   /* another epoch: other weights */
    CHECK_OK(volt_trainer_save_checkpoint(ta, p));
    b.load_mode = rank == 1 ? 1 : 0;
    volt_status st = volt_trainer_validate(tb, &ops, &b, vl, p);
    const char *e = volt_trainer_errmsg(tb);
    char tail[96];
    snprintf(tail, sizeof tail, "(rank 1 of %d found it; no rank changed its model)", world);
    CHECK(st == VOLT_ERR_SHAPE && strstr(e, "module 'xnet': on_load_checkpoint failed") && strstr(e, "asked for i32") &&
          strstr(e, tail), "rank %d: %s (%s)", rank, e, volt_status_str(st));
    float *w1 = snapshot(tb, &n1);
    CHECK(n0 == n1 && !memcmp(w0, w1, sizeof(float) * (size_t)n0), "rank %d: the rejected load changed the weights", rank);
    free(w0);
    free(w1);
    volt_trainer_destroy(ta);
    volt_trainer_destroy(tb);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
    volt_dataset_destroy(ds);
    return vtest_finish();
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 2 && !strcmp(argv[1], "sharded")) return sharded(argv[2]);
    char root[512], p1[700], p2[700], p3[700], p4[700], err[512];
    snprintf(root, sizeof root, "%s/extras", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(p1, sizeof p1, "%s/a.safetensors", root);
    snprintf(p2, sizeof p2, "%s/snap.safetensors", root);
    snprintf(p3, sizeof p3, "%s/later.safetensors", root);
    snprintf(p4, sizeof p4, "%s/never.safetensors", root);
    volt_dataset *ds = make_data();
    volt_loader *tl = make_loader(ds, 16, true, 0), *vl = make_loader(ds, 32, false, 0);
    const volt_module_ops ops = xnet_ops();

    /* 1. save: every extra in the file, aligned to its element size */
    xnet a = { .n = { .in = IN, .hidden = 8, .out = NC } };
    fill(&a);
    volt_trainer *ta = make_trainer(1, root);
    CHECK_OK(volt_trainer_fit(ta, &ops, &a, tl, NULL, NULL));
    CHECK_OK(volt_trainer_save_checkpoint(ta, p1));
    CHECK(a.saves == 1, "on_save_checkpoint ran %d times for one save", a.saves);
    volt_st_file *f = NULL;
    CHECK_OK(volt_st_open(p1, &f, err, sizeof err));
    static const struct { const char *name; volt_dtype dt; int64_t numel; } want[] = {
        { "module.counts", VOLT_I64, 5 }, { "module.ema", VOLT_F32, 21 }, { "module.half", VOLT_BF16, 13 },
        { "module.h1", VOLT_F16, 1 }, { "module.flags", VOLT_U8, 11 },
    };
    for (size_t i = 0; f && i < sizeof want / sizeof want[0]; i++) {
        volt_st_info info;
        bool found = volt_st_find(f, want[i].name, &info) == VOLT_OK;
        CHECK(found && info.dtype == want[i].dt && volt_shape_numel(info.shape) == want[i].numel,
              "%s in the file with its dtype and shape", want[i].name);
        if (found)
            CHECK((uintptr_t)info.data % volt_dtype_size(want[i].dt) == 0, "%s aligned to its %zu-byte elements",
                  want[i].name, volt_dtype_size(want[i].dt));
    }
    const char *note = f ? volt_st_meta(f, "module.note") : NULL;
    CHECK(note && !strcmp(note, a.note), "the note in the metadata: %s", note ? note : "(none)");
    volt_st_close(f);

    /* 2. load into a fresh module: the same extras, the same weights */
    xnet b = { .n = { .in = IN, .hidden = 8, .out = NC } };
    volt_trainer *tb = make_trainer(1, root);
    CHECK_OK(volt_trainer_validate(tb, &ops, &b, vl, p1));
    CHECK(b.loads == 1 && same_extras(&a, &b), "extras round-trip (loads %d, note '%s')", b.loads, b.note);
    int64_t na, nb;
    float *wa = snapshot(ta, &na), *wb = snapshot(tb, &nb);
    CHECK(na == nb && !memcmp(wa, wb, sizeof(float) * (size_t)na), "weights loaded with the extras");

    /* 3. the asynchronous path writes the same bytes as a save at the same moment */
    volt_ckpt_snapshot *snap = NULL;
    CHECK_OK(volt_trainer_snapshot_checkpoint(ta, p2, &snap));
    CHECK(a.saves == 2, "the snapshot called on_save_checkpoint");
    CHECK_OK(volt_ckpt_snapshot_write(snap, p2, err, sizeof err));
    volt_ckpt_snapshot_destroy(snap);
    size_t n1 = 0, n2 = 0;
    char *b1 = slurp(p1, &n1), *b2 = slurp(p2, &n2);
    CHECK(n1 > 0 && n1 == n2 && !memcmp(b1, b2, n1), "snapshot file == saved file (%zu / %zu bytes)", n1, n2);
    free(b2);

    /* 4. a hook that rejects the file changes nothing: the model keeps p1's weights and extras */
    CHECK_OK(volt_trainer_fit(ta, &ops, &a, tl, NULL, NULL));   /* one more epoch: other weights */
    a.counts[0] = 99;
    CHECK_OK(volt_trainer_save_checkpoint(ta, p3));
    b.load_mode = 1;
    volt_status st = volt_trainer_validate(tb, &ops, &b, vl, p3);
    const char *e = volt_trainer_errmsg(tb);
    CHECK(st == VOLT_ERR_SHAPE && strstr(e, "module 'xnet': on_load_checkpoint failed") &&
          strstr(e, "'module.counts' is i64 (5), asked for i32 (5)"), "a rejected load: %s (%s)", e, volt_status_str(st));
    b.load_mode = 3;
    st = volt_trainer_validate(tb, &ops, &b, vl, p3);
    e = volt_trainer_errmsg(tb);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(e, "on_load_checkpoint failed") && !strstr(e, "i32"),
          "a hook failing without a message: %s (the last error's text is not repeated)", e);
    float *wb2 = snapshot(tb, &nb);
    CHECK(!memcmp(wa, wb2, sizeof(float) * (size_t)na), "a rejected load left the weights as they were");
    CHECK(b.counts[0] != 99, "and the extras");
    free(wb2);

    /* 5. misuse while loading: a put, an absent extra (quiet), another shape, an absent meta */
    b.load_mode = 2;
    CHECK_OK(volt_trainer_validate(tb, &ops, &b, vl, p3));
    CHECK(b.probe[0] == VOLT_ERR_STATE && b.probe[1] == VOLT_ERR_NOT_FOUND && b.probe[2] == VOLT_ERR_SHAPE &&
          b.probe_meta == NULL, "load probes: put %s, absent %s, shape %s", volt_status_str(b.probe[0]),
          volt_status_str(b.probe[1]), volt_status_str(b.probe[2]));

    /* 6. misuse while saving: a get, a name too long, an empty key, NULL data */
    a.save_mode = 2;
    CHECK_OK(volt_trainer_save_checkpoint(ta, p4));
    CHECK(a.probe[0] == VOLT_ERR_STATE && a.probe_meta == NULL && a.probe[1] == VOLT_ERR_INVALID_ARG &&
          a.probe[2] == VOLT_ERR_INVALID_ARG && a.probe[3] == VOLT_ERR_INVALID_ARG,
          "save probes: get %s, long %s, empty %s, NULL data %s", volt_status_str(a.probe[0]), volt_status_str(a.probe[1]),
          volt_status_str(a.probe[2]), volt_status_str(a.probe[3]));
    remove(p4);

    /* 7. on_save_checkpoint failing: the error with the hook's reason, no new file, the old intact */
    a.save_mode = 1;
    st = volt_trainer_save_checkpoint(ta, p1);
    e = volt_trainer_errmsg(ta);
    CHECK(st == VOLT_ERR_IO && strstr(e, "module 'xnet': on_save_checkpoint failed: xnet: the extras' source went away"),
          "a failing save hook: %s", e);
    st = volt_trainer_save_checkpoint(ta, p4);
    CHECK(st == VOLT_ERR_IO && !exists(p4), "no file where the failed save was going");
    size_t n1b = 0;
    char *b1b = slurp(p1, &n1b);
    CHECK(n1b == n1 && b1 && b1b && !memcmp(b1, b1b, n1), "the file a failed save would replace is intact");
    free(b1);
    free(b1b);

    /* 8. a callback that rejects its saved state: resuming fails naming it, nothing is applied */
    char p5[700];
    snprintf(p5, sizeof p5, "%s/with_cb.safetensors", root);
    vcb c1 = { .want = 1 };
    xnet d = { .n = { .in = IN, .hidden = 8, .out = NC } };
    fill(&d);
    volt_trainer *td = make_trainer(1, root);
    CHECK_OK(volt_trainer_add_callback(td, &vcb_ops, &c1));
    CHECK_OK(volt_trainer_fit(td, &ops, &d, tl, NULL, NULL));
    CHECK_OK(volt_trainer_save_checkpoint(td, p5));
    vcb c2 = { .want = 2 };
    xnet g = { .n = { .in = IN, .hidden = 8, .out = NC } };
    volt_trainer *tg = make_trainer(2, root);
    CHECK_OK(volt_trainer_add_callback(tg, &vcb_ops, &c2));
    st = volt_trainer_fit(tg, &ops, &g, tl, NULL, p5);
    e = volt_trainer_errmsg(tg);
    CHECK(st == VOLT_ERR_VERSION && c2.loads == 1 &&
          strstr(e, "callback 'Versioned' rejected its state: Versioned: state {\"version\":1} is not version 2") &&
          g.loads == 0 && volt_trainer_global_step(tg) == 0,
          "a callback rejecting its state: %s (%s; module loads %d, steps %lld)", e, volt_status_str(st), g.loads,
          (long long)volt_trainer_global_step(tg));
    c2.want = 1;
    CHECK_OK(volt_trainer_fit(tg, &ops, &g, tl, NULL, p5));   /* the same file, accepted: resumes into epoch 1 */
    CHECK(g.loads == 1 && same_extras(&d, &g) && volt_trainer_global_step(tg) == 2 * volt_trainer_global_step(td),
          "resumed with the callback's state (steps %lld)", (long long)volt_trainer_global_step(tg));
    volt_trainer_destroy(td);
    volt_trainer_destroy(tg);

    free(wa);
    free(wb);
    volt_trainer_destroy(ta);
    volt_trainer_destroy(tb);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
    volt_dataset_destroy(ds);
    return vtest_finish();
}
