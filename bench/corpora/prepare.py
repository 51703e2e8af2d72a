#!/usr/bin/env python3
"""Convert the R8 and AG News text-classification corpora to Parquet for benchmarking.

Output (under --out, default ``target/corpora``)::

    r8/train.parquet       r8/test.parquet
    ag_news/train.parquet  ag_news/test.parquet

Each file has exactly two columns, ``text`` (string) and ``label`` (string, the
class name), rows in source-file order.  The script checks the md5 of every
source file, the row counts and the per-class counts against the published
numbers, prints a per-class table, and exits non-zero with a message naming
the problem if anything differs.

Sources (pinned)
----------------
R8 (Reuters-21578 subset, 8 classes; Ana Cardoso-Cachopo's "all-terms" split,
``r8-train-all-terms.txt`` / ``r8-test-all-terms.txt``).  Byte-identical copies
ship with the TextGCN repository:

    repo:   https://github.com/yao8839836/text_gcn
    commit: 962223652e9bb164ac2d83cd09fc7b8845ce860b
    paths:  data/R8/train.txt   (5,485 lines, md5 f92b982a596560adceab671c22362691)
            data/R8/test.txt    (2,189 lines, md5 f24861d3c120c8039442aff94fa36ac8)

    Format: one document per line, ``label<TAB>text`` (lower-cased, punctuation
    stripped by the original author).  The same content also circulates with a
    ``Class<TAB>Example`` header line and a trailing newline; the parser accepts
    that too (use --no-checksums for such copies).

AG News (Zhang, Zhao & LeCun 2015; 4 classes).  The copy torchtext downloads:

    repo:   https://github.com/mhjabreel/CharCnn_Keras
    commit: 555590db4219b1243abb1918effd6a7425a2d75f
    paths:  data/ag_news_csv/train.csv  (120,000 rows, md5 b1a00f826fdfbd249f79597b59e1dc12,
                                          git blob 694aa19971315410e000404523796b76349d3c1d)
            data/ag_news_csv/test.csv   (7,600 rows,   md5 d52ea96a97a2d943681189a97654912d)

    Format: CSV without header, ``"class index","title","description"``;
    class index 1..4 = World, Sports, Business, Sci/Tech.  Output text is
    ``title + ". " + description`` (kept verbatim, including the dataset's
    backslash line-break markers).

Recipe (needs internet; train.csv is ~29 MB, fetched by a normal clone)::

    mkdir -p target/corpora/source && cd target/corpora/source
    git clone https://github.com/yao8839836/text_gcn.git
    git -C text_gcn checkout 962223652e9bb164ac2d83cd09fc7b8845ce860b
    git clone https://github.com/mhjabreel/CharCnn_Keras.git
    git -C CharCnn_Keras checkout 555590db4219b1243abb1918effd6a7425a2d75f
    cd -
    target/bench/venv/bin/python bench/corpora/prepare.py \\
        --source target/corpora/source --out target/corpora

(text_gcn's tree is ~110 MB, mostly its 20NG copy; only ``data/R8`` is read,
so ``git clone --filter=blob:none --sparse`` + ``git sparse-checkout set data/R8``
also works.)  ``--source`` must contain ``text_gcn/data/R8/*.txt``
and ``CharCnn_Keras/data/ag_news_csv/*.csv`` (only those files are read).
"""

from __future__ import annotations

import argparse
import collections
import csv
import hashlib
import os
import sys
from dataclasses import dataclass, field

R8_CLASSES = ["acq", "crude", "earn", "grain", "interest", "money-fx", "ship", "trade"]
AG_CLASSES = ["World", "Sports", "Business", "Sci/Tech"]  # class index 1..4


@dataclass
class Split:
    corpus: str
    split: str
    rel_path: str  # relative to --source
    md5: str
    expected: dict[str, int] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(self.expected.values())


SPLITS = [
    Split("r8", "train", "text_gcn/data/R8/train.txt", "f92b982a596560adceab671c22362691",
          {"acq": 1596, "crude": 253, "earn": 2840, "grain": 41, "interest": 190,
           "money-fx": 206, "ship": 108, "trade": 251}),
    Split("r8", "test", "text_gcn/data/R8/test.txt", "f24861d3c120c8039442aff94fa36ac8",
          {"acq": 696, "crude": 121, "earn": 1083, "grain": 10, "interest": 81,
           "money-fx": 87, "ship": 36, "trade": 75}),
    Split("ag_news", "train", "CharCnn_Keras/data/ag_news_csv/train.csv",
          "b1a00f826fdfbd249f79597b59e1dc12", {c: 30000 for c in AG_CLASSES}),
    Split("ag_news", "test", "CharCnn_Keras/data/ag_news_csv/test.csv",
          "d52ea96a97a2d943681189a97654912d", {c: 1900 for c in AG_CLASSES}),
]


class PrepareError(Exception):
    pass


def md5_of(path: str) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_r8(path: str) -> tuple[list[str], list[str]]:
    texts, labels = [], []
    with open(path, encoding="utf-8", newline="") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            label, sep, text = line.partition("\t")
            if lineno == 1 and label == "Class" and text == "Example":
                continue  # header present in some copies
            if not sep:
                raise PrepareError(f"{path}:{lineno}: no TAB between label and text")
            if label not in R8_CLASSES:
                raise PrepareError(f"{path}:{lineno}: unknown R8 label {label!r}")
            texts.append(text.strip())
            labels.append(label)
    return texts, labels


def read_ag_news(path: str) -> tuple[list[str], list[str]]:
    texts, labels = [], []
    with open(path, encoding="utf-8", newline="") as f:
        for rowno, row in enumerate(csv.reader(f), 1):
            if len(row) != 3:
                raise PrepareError(f"{path}: row {rowno} has {len(row)} fields, expected 3")
            idx, title, desc = row
            if idx not in ("1", "2", "3", "4"):
                raise PrepareError(f"{path}: row {rowno} has class index {idx!r}, expected 1..4")
            texts.append(title + ". " + desc)
            labels.append(AG_CLASSES[int(idx) - 1])
    return texts, labels


def write_parquet(path: str, texts: list[str], labels: list[str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"text": pa.array(texts, pa.string()),
                      "label": pa.array(labels, pa.string())})
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def check_counts(sp: Split, labels: list[str]) -> list[str]:
    got = collections.Counter(labels)
    problems = []
    if len(labels) != sp.rows:
        problems.append(f"{sp.corpus}/{sp.split}: {len(labels)} rows, expected {sp.rows}")
    for cls in sorted(set(got) | set(sp.expected)):
        if got.get(cls, 0) != sp.expected.get(cls, 0):
            problems.append(f"{sp.corpus}/{sp.split}: class {cls!r} has {got.get(cls, 0)} rows, "
                            f"expected {sp.expected.get(cls, 0)}")
    return problems


def print_table(corpus: str, results: dict[str, collections.Counter]) -> None:
    classes = R8_CLASSES if corpus == "r8" else AG_CLASSES
    splits = [s for s in ("train", "test") if s in results]
    w = max(len(c) for c in classes + ["total"])
    print(f"\n{corpus}")
    print(f"  {'class':<{w}}" + "".join(f"{s:>10}" for s in splits))
    for cls in classes:
        print(f"  {cls:<{w}}" + "".join(f"{results[s].get(cls, 0):>10}" for s in splits))
    print(f"  {'total':<{w}}" + "".join(f"{sum(results[s].values()):>10}" for s in splits))
    if "train" in results:
        tr = results["train"]
        nz = [v for v in tr.values() if v]
        print(f"  train imbalance (max/min class): {max(nz) / min(nz):.1f}:1")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--source", required=True,
                    help="directory holding the text_gcn/ and CharCnn_Keras/ checkouts (or exports)")
    ap.add_argument("--out", default="target/corpora", help="output directory (default: %(default)s)")
    ap.add_argument("--only", choices=["r8", "ag_news"], action="append",
                    help="convert only this corpus (repeatable)")
    ap.add_argument("--skip-missing", action="store_true",
                    help="warn about, instead of failing on, source files that are absent")
    ap.add_argument("--no-checksums", action="store_true",
                    help="do not require the pinned md5 of each source file (counts are still checked)")
    args = ap.parse_args(argv)

    problems: list[str] = []
    skipped: list[str] = []
    tables: dict[str, dict[str, collections.Counter]] = collections.defaultdict(dict)

    for sp in SPLITS:
        if args.only and sp.corpus not in args.only:
            continue
        src = os.path.join(args.source, sp.rel_path)
        if not os.path.isfile(src):
            msg = f"{sp.corpus}/{sp.split}: source file not found: {src}"
            (skipped if args.skip_missing else problems).append(msg)
            continue
        digest = md5_of(src)
        if digest != sp.md5:
            msg = f"{sp.corpus}/{sp.split}: md5 of {src} is {digest}, expected {sp.md5}"
            if args.no_checksums:
                print(f"warning: {msg}", file=sys.stderr)
            else:
                problems.append(msg + " (wrong commit/file? --no-checksums to rely on counts only)")
                continue
        try:
            texts, labels = (read_r8 if sp.corpus == "r8" else read_ag_news)(src)
        except PrepareError as e:
            problems.append(str(e))
            continue
        if any(not t for t in texts):
            problems.append(f"{sp.corpus}/{sp.split}: {sum(1 for t in texts if not t)} empty texts")
        count_problems = check_counts(sp, labels)
        tables[sp.corpus][sp.split] = collections.Counter(labels)
        if count_problems:
            problems.extend(count_problems)
            continue
        out = os.path.join(args.out, sp.corpus, f"{sp.split}.parquet")
        write_parquet(out, texts, labels)
        print(f"wrote {out}: {len(labels)} rows, {os.path.getsize(out):,} bytes")

    for corpus in ("r8", "ag_news"):
        if tables.get(corpus):
            print_table(corpus, tables[corpus])

    for msg in skipped:
        print(f"\nSKIPPED {msg}", file=sys.stderr)
    if problems:
        print("\nFAILED:", file=sys.stderr)
        for msg in problems:
            print(f"  - {msg}", file=sys.stderr)
        print("See the docstring of bench/corpora/prepare.py for the pinned sources.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
