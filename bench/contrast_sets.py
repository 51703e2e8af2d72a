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

Use the dev split (100 pairs) to choose; the test split (488 pairs) is for the final figure.
"""

import csv
import hashlib
import json
import os
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


def convert(source, out):
    os.makedirs(out, exist_ok=True)
    for name, (md5, rows) in FILES.items():
        path = os.path.join(source, "IMDb", "data", name + ".tsv")
        with open(path, "rb") as f:
            digest = hashlib.md5(f.read()).hexdigest()
        if digest != md5:
            sys.exit(f"{path}: md5 {digest}, expected {md5} (another commit of allenai/contrast-sets?)")
        texts, labels = [], []
        with open(path, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                if row["Sentiment"] not in LABELS:
                    sys.exit(f"{path}: unknown sentiment {row['Sentiment']!r}")
                labels.append(LABELS[row["Sentiment"]])
                texts.append(row["Text"])
        if len(texts) != rows:
            sys.exit(f"{path}: {len(texts)} reviews, expected {rows}")
        table = pa.table({"text": pa.array(texts, pa.string()), "label": pa.array(labels, pa.string())})
        pq.write_table(table, os.path.join(out, name + ".parquet"))
        print(f"{name}: {rows} reviews, {labels.count('pos')} pos")


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
    elif len(sys.argv) >= 4 and sys.argv[1] == "table":
        table(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
