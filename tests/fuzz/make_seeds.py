#!/usr/bin/env python3
"""Regenerate the fuzz seed corpora (tests/fuzz/corpus/<target>/) from real files.

    tests/fuzz/make_seeds.py CKPT_DIR SHARDED_CKPT_DIR TOKEN_CACHE_FILE

CKPT_DIR / SHARDED_CKPT_DIR: checkpoint folders of build/tests/fault_run runs (single, and
fsdp on 2 ranks: tests/fault_kill.sh leaves them under build/tests/tmp_faults/); the token
cache file: what fuzz_token_cache writes with FUZZ_DUMP_SEED=path. Other seeds come from
the Fashion-MNIST package (/usr/share/datasets/fashion-mnist), the SpamAssassin corpus and
the BERT vocab in ~/.cache/volt (scripts/fetch_*.sh), and tests/fixtures."""
import gzip, os, struct, sys, glob

ROOT = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(ROOT, "corpus")
CACHE = os.path.expanduser("~/.cache/volt")


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def bundle(files):
    out = b"VBNDL1\n"
    for name, data in files:
        n = name.encode()
        out += struct.pack("<H", len(n)) + n + struct.pack("<I", len(data)) + data
    return out


def main():
    ck, sharded, vtok = sys.argv[1:4]
    last = open(os.path.join(ck, "last.safetensors"), "rb").read()
    put("checkpoint", "single_last", last)
    put("safetensors", "checkpoint", last)
    idx = os.path.join(sharded, "last.safetensors")
    sdir = glob.glob(idx + ".shards-*")[0]
    files = [("ck.safetensors", open(idx, "rb").read())]
    for p in sorted(glob.glob(sdir + "/*.safetensors")):
        # the index names its folder by base name; the fuzz harness writes the index as ck.safetensors
        files.append((os.path.basename(sdir) + "/" + os.path.basename(p), open(p, "rb").read()))
    put("checkpoint", "sharded_bundle", bundle(files))
    put("safetensors", "shard", files[1][1])
    put("safetensors", "index", files[0][1])
    fx = open(os.path.join(ROOT, "..", "fixtures", "distilbert_tiny.safetensors"), "rb").read()
    hl = struct.unpack("<Q", fx[:8])[0]
    put("safetensors", "hf_header_only", fx[: 8 + hl])          # the real HF header, no data
    # IDX: the first 3 Fashion-MNIST test images and labels (count set to 3), plain and gzip
    fm = "/usr/share/datasets/fashion-mnist"
    im = gzip.open(os.path.join(fm, "t10k-images-idx3-ubyte.gz")).read(16 + 3 * 784)
    lb = gzip.open(os.path.join(fm, "t10k-labels-idx1-ubyte.gz")).read(8 + 3)
    im = im[:4] + struct.pack(">I", 3) + im[8:]
    lb = lb[:4] + struct.pack(">I", 3) + lb[8:]
    cut = lambda a: bytes([min(255, (len(a) + 1) * 256 // (len(a) + len(lb) + 1))])
    put("idx", "fashion3_plain", cut(im) + im + lb)
    gi, gl = gzip.compress(im), gzip.compress(lb)
    put("idx", "fashion3_gzip", bytes([min(255, (len(gi) + 1) * 256 // (len(gi) + len(gl) + 1))]) + gi + gl)
    # mail / HTML: real SpamAssassin messages (small ones: plain, MIME, HTML)
    msgs = sorted(glob.glob(os.path.join(CACHE, "spam-assassin", "*", "[0-9]*")), key=os.path.getsize)
    picked = [m for m in msgs if b"multipart" in open(m, "rb").read()][:2] + msgs[:2]
    picked += [m for m in msgs if b"text/html" in open(m, "rb").read()][:2]
    for i, m in enumerate(picked):
        data = open(m, "rb").read()[:60000]
        put("mail", "sa_%d" % i, b"\x00" + data)
        if b"<html" in data.lower():
            put("mail", "sa_html_%d" % i, b"\x01" + data[data.lower().find(b"<html"):])
        put("wordpiece", "sa_%d" % i, data[-4000:])
    # CSV / TSV
    put("text", "csv", b"\x00text,label\n\"hello, world\",1\nplain,0\n\"with \"\"quote\"\"\",2\n")
    put("text", "tsv", b"\x01good movie\t1\nbad\tmovie\t0\r\n\n")
    # vocab: the head of the real BERT vocab (the specials and ## pieces are early)
    voc = open(os.path.join(CACHE, "bert-base-uncased", "vocab.txt"), "rb").read()
    put("vocab", "bert_head", voc[: voc.rfind(b"\n", 0, 60000) + 1])
    put("wordpiece", "mixed", "Héllo, WORLD! unaffable 中文 [CLS] naïve — emoji 🙂 \u00a0tab\tend".encode())
    # token cache: the real file
    put("token_cache", "real", open(vtok, "rb").read())
    # aclImdb trees: all four folders with .txt reviews; a FIFO and a folder named .txt
    rec = lambda f, k, name, content: bytes([f, k, len(name)]) + name + bytes([len(content)]) + content
    put("imdb", "tree", b"\x0f" + rec(0, 0, b"0_9.txt", b"great film") + rec(1, 0, b"1_2.txt", b"awful") +
        rec(2, 1, b"2_8.txt", b"fine") + rec(3, 0, b"3_1.txt", b"bad <br /> plot"))
    put("imdb", "odd", b"\x0f" + rec(0, 5, b"fifo.txt", b"") + rec(1, 2, b"dir.txt", b"") + rec(2, 3, b"l.txt", b"") +
        rec(3, 4, b"d.txt", b""))


if __name__ == "__main__":
    main()
