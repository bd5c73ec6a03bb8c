#!/usr/bin/env python3
"""A synthetic corpus in the IMDB layout, of the seed job's size, for timing the whole job.

    make_imdb.py OUT [--texts 50000] [--vocab vocab.txt] [--seed 1]
    make_imdb.py OUT --write-vocab PATH      # a made-up vocab, when there is no real one

Writes OUT/aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt, half the texts under train/ and
half under test/, each half split evenly between pos and neg: the folder the text app reads
with --data imdb:OUT (apps/text_data.c; the 35000/5000/10000 split is drawn from all of them).

The real IMDB cannot be downloaded on the machines that run this, so the texts are made up:
words drawn from the WordPiece vocab's whole words (or a built-in list without a vocab), the
length in words log-normal (median ~180, mean ~220, ~10 % over 400 words: like IMDB, about
one text in ten is cut at 512 tokens), with "<br /><br />" breaks, and sentiment words (one
per ~40 words, and one among the first 16) that decide the label, so the job learns
something and its test accuracy says the whole pipeline works. Deterministic for a given
seed. numpy when present (~3 s for 50,000 texts), else the standard library (~10 s).
"""
import argparse
import os
import random
import sys

POS = ["great", "wonderful", "brilliant", "moving", "superb", "excellent", "beautiful", "enjoyable"]
NEG = ["awful", "boring", "terrible", "dull", "waste", "horrible", "poor", "stupid"]
FALLBACK = ("the a of and to in is was it that this film movie story plot acting scene scenes "
            "character characters director actor actress music time people way life end ending "
            "watch seen saw made make first second last little much more most very really just "
            "even still also never always again here there when where while because though").split()


def words_from(vocab):
    if not vocab or not os.path.exists(vocab):
        return FALLBACK
    with open(vocab, encoding="utf-8") as f:
        ws = [w.strip() for w in f]
    ws = [w for w in ws if w.isalpha() and w.isascii() and len(w) > 1 and w not in POS + NEG]
    return ws[:20000] if len(ws) > 100 else FALLBACK


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--texts", type=int, default=50000, help="texts in all (a multiple of 4)")
    ap.add_argument("--vocab", default=os.path.expanduser("~/.cache/volt/bert-base-uncased/vocab.txt"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-words", type=int, default=2400)
    ap.add_argument("--write-vocab", metavar="PATH",
                    help="only write a made-up WordPiece vocab (special tokens, the built-in and sentiment words, "
                         "letters and their ## pieces) to PATH and exit: for a machine without bert-base-uncased's")
    a = ap.parse_args()
    if a.write_vocab:
        letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("0123456789.,!?'-<>/")
        toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(FALLBACK + POS + NEG)) + letters + \
               ["##" + c for c in letters]
        with open(a.write_vocab, "w", encoding="utf-8") as f:
            f.write("\n".join(toks) + "\n")
        print("make_imdb.py: a made-up vocab of %d tokens in %s" % (len(toks), a.write_vocab))
        return
    if a.texts < 4 or a.texts % 4:
        sys.exit("make_imdb.py: --texts must be a positive multiple of 4")
    vocab = words_from(a.vocab)
    n = a.texts
    try:
        import numpy as np
        rng = np.random.default_rng(a.seed)
        lens = np.minimum(np.maximum(rng.lognormal(5.2, 0.6, n).astype(np.int64), 5), a.max_words)
        idx = rng.integers(0, len(vocab), int(lens.sum()))
        senti = rng.integers(0, len(POS), int(lens.sum()))
        pos_a, neg_a = np.array(POS, dtype=object), np.array(NEG, dtype=object)
        spots = rng.random(int(lens.sum())) < 1.0 / 40
        brk = rng.random(int(lens.sum())) < 1.0 / 120
        vocab_a = np.array(vocab, dtype=object)
        words_all = vocab_a[idx]
        off = np.concatenate([[0], np.cumsum(lens)])

        def text(i, pos):
            w = words_all[off[i]:off[i + 1]].copy()
            s = spots[off[i]:off[i + 1]]
            w[s] = (pos_a if pos else neg_a)[senti[off[i]:off[i + 1]][s]]
            w[min(len(w) - 1, 5 + i % 11)] = (POS if pos else NEG)[i % len(POS)]   # one early: kept at any max_length
            b = brk[off[i]:off[i + 1]]
            w[b] = [x + ". <br /><br />" for x in w[b]]
            return " ".join(w)
    except ImportError:
        rng = random.Random(a.seed)

        def text(i, pos):
            m = min(max(int(rng.lognormvariate(5.2, 0.6)), 5), a.max_words)
            w = [rng.choice(vocab) for _ in range(m)]
            for _ in range(max(1, m // 40)):
                w[rng.randrange(m)] = rng.choice(POS if pos else NEG)
            w[min(m - 1, 5 + i % 11)] = (POS if pos else NEG)[i % len(POS)]
            return " ".join(w)

    i = 0
    for split in ("train", "test"):
        for lab in ("pos", "neg"):
            d = os.path.join(a.out, "aclImdb", split, lab)
            os.makedirs(d, exist_ok=True)
            for k in range(n // 4):
                t = text(i, lab == "pos")
                rating = 7 + (i % 4) if lab == "pos" else 1 + (i % 4)
                with open(os.path.join(d, "%d_%d.txt" % (k, rating)), "w", encoding="utf-8") as f:
                    f.write(t[:1].upper() + t[1:] + ".")
                i += 1
    print("make_imdb.py: %d texts under %s" % (n, os.path.join(a.out, "aclImdb")))


if __name__ == "__main__":
    main()
