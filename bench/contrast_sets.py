#!/usr/bin/env python3
"""The IMDb contrast sets of Gardner et al. (2020) as Parquet, and models' accuracy on them.

Each contrast review is an original IMDb review minimally edited by a person so that its label
flips. A model that reads the review's sentiment scores about the same on both; one that leans
on words that merely co-occur with a label loses on the edits.

    python bench/contrast_sets.py convert SOURCE OUT_DIR
        SOURCE: a checkout of https://github.com/allenai/contrast-sets (commit e2b8731, whose
        IMDb/data/*.tsv have the md5s below); writes OUT_DIR/{dev,test}_{original,contrast}.parquet
        with the columns `text` and `label` (`pos` / `neg`, as IMDB's Parquet here).
    python bench/contrast_sets.py table METRICS_DIR MODEL_NAME...
        prints accuracy on each file from `pipeline eval --metrics-json` files named
        METRICS_DIR/MODEL_NAME.SPLIT_KIND.json, and the gap between original and contrast.

    python bench/contrast_sets.py augment CONTRAST_SOURCE CAD_SOURCE IMDB_DIR OUT_DIR
        writes OUT_DIR/train.parquet: IMDB_DIR/train.parquet plus the revised reviews of the
        counterfactually augmented training set of Kaushik et al. (2020; a checkout of
        https://github.com/acmi-lab/counterfactually-augmented-data, commit 6f232a1, whose
        sentiment/combined/paired/train_paired.tsv has the md5 below), each a person's minimal
        edit of an IMDB training review that flips its label. A pair is left out when its original
        is an IMDB test review or one of the contrast sets' originals, so neither set is seen.

Use the dev split (100 pairs) to choose; the test split (488 pairs) is for the final figure.
Almost all of the contrast sets' originals are IMDB training reviews (487 of the 488 test ones),
so a model trained on IMDB has seen them: their accuracy is a training-set figure.
"""

import csv
import hashlib
import json
import os
import re
import sys

import pyarrow as pa
import pyarrow.parquet as pq

FILES = {
    "dev_original": ("bdae197f6b62229738fd0edbae653fda", 100),
    "dev_contrast": ("4d1d736dd7c95476dc1a8fa6194bc52c", 100),
    "test_original": ("20bd8f79dd0c4114901f34ac377110ef", 488),
    "test_contrast": ("d52968f5ffac784d543286e6f8ae36bd", 488),
}
LABELS = {"Positive": "pos", "Negative": "neg"}
CAD_PAIRED_TRAIN = ("sentiment/combined/paired/train_paired.tsv", "dfa5048162ac45ba1b84f572b132760b", 1707)


def normalised(text):
    """The text as the comparison of reviews across copies sees it: lower case, markup and
    punctuation gone (the copies differ in quoting and line breaks)."""
    return re.sub(r"[^a-z0-9]+", " ", re.sub(r"<br\s*/?>", " ", text.lower())).strip()


def read_tsv(path, md5):
    with open(path, "rb") as f:
        digest = hashlib.md5(f.read()).hexdigest()
    if digest != md5:
        sys.exit(f"{path}: md5 {digest}, expected {md5} (another commit?)")
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    for row in rows:
        if row["Sentiment"] not in LABELS:
            sys.exit(f"{path}: unknown sentiment {row['Sentiment']!r}")
    return rows


def convert(source, out):
    os.makedirs(out, exist_ok=True)
    for name, (md5, count) in FILES.items():
        path = os.path.join(source, "IMDb", "data", name + ".tsv")
        rows = read_tsv(path, md5)
        texts = [row["Text"] for row in rows]
        labels = [LABELS[row["Sentiment"]] for row in rows]
        if len(texts) != count:
            sys.exit(f"{path}: {len(texts)} reviews, expected {count}")
        table = pa.table({"text": pa.array(texts, pa.string()), "label": pa.array(labels, pa.string())})
        pq.write_table(table, os.path.join(out, name + ".parquet"))
        print(f"{name}: {count} reviews, {labels.count('pos')} pos")


def augment(contrast_source, cad_source, imdb_dir, out):
    relative, md5, pairs = CAD_PAIRED_TRAIN
    rows = read_tsv(os.path.join(cad_source, relative), md5)
    if len(rows) != 2 * pairs:
        sys.exit(f"{relative}: {len(rows)} rows, expected {2 * pairs} (an original and its revision each)")
    test = {normalised(t) for t in pq.read_table(os.path.join(imdb_dir, "test.parquet"), columns=["text"])
            .column("text").to_pylist()}
    contrast_originals = {
        normalised(row["Text"])
        for name, (md5, _) in FILES.items() if name.endswith("_original")
        for row in read_tsv(os.path.join(contrast_source, "IMDb", "data", name + ".tsv"), md5)
    }
    train = pq.read_table(os.path.join(imdb_dir, "train.parquet"), columns=["text", "label"])
    texts, labels = train.column("text").to_pylist(), train.column("label").to_pylist()
    added, left_out = 0, 0
    for original, revised in zip(rows[0::2], rows[1::2]):
        if original["batch_id"] != revised["batch_id"] or original["Sentiment"] == revised["Sentiment"]:
            sys.exit(f"{relative}: rows of batch {original['batch_id']} are not an original and its flipped revision")
        seen = normalised(original["Text"])
        if seen in test or seen in contrast_originals:
            left_out += 1
            continue
        texts.append(revised["Text"])
        labels.append(LABELS[revised["Sentiment"]])
        added += 1
    os.makedirs(out, exist_ok=True)
    table = pa.table({"text": pa.array(texts, pa.string()), "label": pa.array(labels, pa.string())})
    pq.write_table(table, os.path.join(out, "train.parquet"))
    print(f"{out}/train.parquet: {train.num_rows} IMDB training reviews and {added} revisions "
          f"({left_out} left out: their original is an IMDB test review or a contrast set's)")


def table(metrics_dir, models):
    splits = ["dev", "test"]
    header = "model".ljust(28) + "".join(f"{s + ' ' + k:>16}" for s in splits for k in ("original", "contrast", "gap"))
    print(header)
    for model in models:
        cells = []
        for split in splits:
            accuracy = {}
            for kind in ("original", "contrast"):
                path = os.path.join(metrics_dir, f"{model}.{split}_{kind}.json")
                with open(path) as f:
                    accuracy[kind] = json.load(f)["accuracy"]
            gap = accuracy["original"] - accuracy["contrast"]
            cells += [accuracy["original"], accuracy["contrast"], gap]
        print(model.ljust(28) + "".join(f"{c:16.4f}" for c in cells))


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "convert":
        convert(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 6 and sys.argv[1] == "augment":
        augment(*sys.argv[2:])
    elif len(sys.argv) >= 4 and sys.argv[1] == "table":
        table(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
