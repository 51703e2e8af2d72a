#!/usr/bin/env python3
"""Convert Reuters-21578 (ModApte split) to a multi-label Parquet corpus for benchmarking.

Output (under --out, default ``target/corpora``)::

    reuters/train.parquet   reuters/test.parquet

Columns: ``text`` (title, a blank line, body) and ``label`` (``list<string>``: the document's
TOPICS). The ModApte split, as everyone reports it: documents with LEWISSPLIT TRAIN or TEST and
TOPICS="YES", keeping only the 90 topics with at least one training and one test document,
and only documents left with at least one of them: 7,770 training and 3,019 test documents
(NLTK's copy has 7,769: one document fewer). The script checks those counts and exits
non-zero naming what differs.

Source (pinned): the 22 SGML files of the UCI distribution, as committed in

    repo:   https://github.com/colibri17/TextCategorization
    commit: b6c2ca3d46a2540843400890792e5165448b4516
    paths:  reuters21578/reut2-000.sgm … reut2-021.sgm

Recipe (the repository has other large files; only these are read)::

    mkdir -p target/corpora/source/reuters21578
    git clone --bare https://github.com/colibri17/TextCategorization.git target/corpora/source/tc.git
    for i in $(seq -w 0 21); do git --git-dir=target/corpora/source/tc.git show \\
        b6c2ca3d46a2540843400890792e5165448b4516:reuters21578/reut2-0$i.sgm \\
        > target/corpora/source/reuters21578/reut2-0$i.sgm; done
    target/bench/venv/bin/python bench/corpora/reuters.py --source target/corpora/source

Needs pyarrow.
"""
from __future__ import annotations

import argparse
import collections
import html
import os
import re
import sys

EXPECTED = {"train": 7770, "test": 3019}
TOPICS = 90

DOCUMENT = re.compile(r"<REUTERS([^>]*)>(.*?)</REUTERS>", re.S)


def field(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}>(.*?)</{tag}>", text, re.S)
    return html.unescape(match.group(1)).strip() if match else ""


def read(source: str) -> dict[str, list[tuple[str, list[str]]]]:
    splits: dict[str, list[tuple[str, list[str]]]] = {"train": [], "test": []}
    for i in range(22):
        path = os.path.join(source, "reuters21578", f"reut2-{i:03d}.sgm")
        with open(path, encoding="latin-1") as f:
            content = f.read()
        for attributes, body in DOCUMENT.findall(content):
            split = re.search(r'LEWISSPLIT="(\w+)"', attributes)
            if 'TOPICS="YES"' not in attributes or not split or split.group(1).lower() not in splits:
                continue
            topics = re.findall(r"<D>(.*?)</D>", field(body, "TOPICS") or "")
            text = f"{field(body, 'TITLE')}\n\n{field(body, 'BODY')}".strip()
            splits[split.group(1).lower()].append((text, topics))
    return splits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", required=True, help="directory holding reuters21578/reut2-0NN.sgm")
    parser.add_argument("--out", default="target/corpora")
    args = parser.parse_args()
    import pyarrow as pa
    import pyarrow.parquet as pq

    splits = read(args.source)
    in_train = {t for _, topics in splits["train"] for t in topics}
    in_test = {t for _, topics in splits["test"] for t in topics}
    kept_topics = in_train & in_test
    if len(kept_topics) != TOPICS:
        print(f"error: {len(kept_topics)} topics have training and test documents, expected {TOPICS}", file=sys.stderr)
        return 1
    os.makedirs(os.path.join(args.out, "reuters"), exist_ok=True)
    schema = pa.schema([("text", pa.string()), ("label", pa.list_(pa.string()))])
    for split, documents in splits.items():
        rows = [
            {"text": text, "label": sorted(set(t for t in topics if t in kept_topics))}
            for text, topics in documents
            if any(t in kept_topics for t in topics)
        ]
        if len(rows) != EXPECTED[split]:
            print(f"error: {split}: {len(rows)} documents, expected {EXPECTED[split]}", file=sys.stderr)
            return 1
        path = os.path.join(args.out, "reuters", f"{split}.parquet")
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
        counts = collections.Counter(t for row in rows for t in row["label"])
        several = sum(len(row["label"]) > 1 for row in rows)
        print(f"{path}: {len(rows)} documents, {len(counts)} topics, {several} with more than one; "
              f"largest {counts.most_common(3)}, smallest {counts.most_common()[-3:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
