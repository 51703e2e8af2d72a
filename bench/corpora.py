"""Our variants' defaults against TF-IDF + logistic regression and fastText on several corpora.

For each corpus (a directory holding train.parquet and test.parquet with `text` and `label`):
trains each runner on train, classifies test, and prints accuracy, macro-F1, expected
calibration error (15 equal-width bins of the top probability) and training time. Ours are
trained by `pipeline train --variant V` with no tuning flag and scored from `pipeline run`'s
output (prediction and confidence), as a user would.
Invoked by bench/corpora.sh, which sets up its tools.
Usage: corpora.py WORK VARIANTS CORPUS_DIR...
"""
import json
import os
import random
import subprocess
import sys
import time

import pyarrow.parquet as pq

PIPELINE = os.environ.get("PIPELINE_BIN", "target/release/pipeline")


def read(path):
    table = pq.read_table(path, columns=["text", "label"])
    return [t or "" for t in table.column("text").to_pylist()], [str(x) for x in table.column("label").to_pylist()]


def scores(truth, predicted, confidence):
    """Accuracy, macro-F1 over the test labels, and 15-bin ECE of the top probability."""
    labels = sorted(set(truth))
    f1s = []
    for label in labels:
        tp = sum(t == label and p == label for t, p in zip(truth, predicted))
        n_pred = sum(p == label for p in predicted)
        n_true = sum(t == label for t in truth)
        f1s.append(2 * tp / (n_pred + n_true) if n_pred + n_true else 0.0)
    right = [t == p for t, p in zip(truth, predicted)]
    bins = [[] for _ in range(15)]
    for ok, c in zip(right, confidence):
        bins[min(int(c * 15), 14)].append((ok, c))
    ece = sum(len(b) / len(truth) * abs(sum(o for o, _ in b) / len(b) - sum(c for _, c in b) / len(b))
              for b in bins if b)
    never = sum(1 for label in labels if label not in set(predicted))
    return sum(right) / len(truth), sum(f1s) / len(f1s), ece, never


def tfidf_lr(train, test):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    start = time.perf_counter()
    # As bench/fast_tier.py: word uni- and bigrams seen twice, sublinear tf, C = 16.
    model = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True),
                          LogisticRegression(C=16.0, max_iter=2000))
    model.fit(*train)
    seconds = time.perf_counter() - start
    probs = model.predict_proba(test[0])
    best = probs.argmax(axis=1)
    return [str(model.classes_[i]) for i in best], [float(p[i]) for p, i in zip(probs, best)], seconds


def fasttext_run(train, test, work):
    import fasttext
    rows = list(zip(*train))
    random.Random(0).shuffle(rows)
    lines = f"{work}/fasttext-train.txt"
    with open(lines, "w") as f:
        for text, label in rows:
            f.write(f"__label__{label.replace(' ', '_')} {text.lower()}\n")
    start = time.perf_counter()
    # Bigrams at rate 0.5, as bench/fast_tier.py.
    model = fasttext.train_supervised(lines, wordNgrams=2, lr=0.5, thread=2, verbose=0)
    seconds = time.perf_counter() - start
    labels, probs = model.predict([t.lower().replace("\n", " ") for t in test[0]], k=1)
    return [l[0].removeprefix("__label__").replace("_", " ") for l in labels], [min(float(p[0]), 1.0) for p in probs], seconds


def ours(variant, corpus, work):
    model, out = f"{work}/{variant}", f"{work}/{variant}.parquet"
    start = time.perf_counter()
    subprocess.run([PIPELINE, "train", "--variant", variant, "--train", f"{corpus}/train.parquet", "--out", model,
                    "--force", "--metrics-json", f"{work}/{variant}-train.json"],
                   check=True, stdout=subprocess.DEVNULL, stderr=open(f"{work}/{variant}-train.log", "w"))
    seconds = time.perf_counter() - start
    subprocess.run([PIPELINE, "run", "--input", f"{corpus}/test.parquet", "--model", model, "--output", out,
                    "--overwrite", "--pass-through", "label"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    table = pq.read_table(out, columns=["prediction", "confidence"])
    return table.column("prediction").to_pylist(), table.column("confidence").to_pylist(), seconds


def main():
    work, variants, corpora = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
    print(f"{'corpus':<10} {'model':<9} {'accuracy':>8} {'macro-F1':>8} {'ECE':>6} {'never':>5} {'trained':>8}",
          flush=True)
    for corpus in corpora:
        name = os.path.basename(os.path.normpath(corpus))
        out = f"{work}/{name}"
        os.makedirs(out, exist_ok=True)
        train, test = read(f"{corpus}/train.parquet"), read(f"{corpus}/test.parquet")
        runners = [("tfidf-lr", lambda: tfidf_lr(train, test)), ("fasttext", lambda: fasttext_run(train, test, out))]
        runners += [(v, lambda v=v: ours(v, corpus, out)) for v in variants]
        for runner, run in runners:
            predicted, confidence, seconds = run()
            acc, f1, ece, never = scores(test[1], predicted, confidence)
            print(f"{name:<10} {runner:<9} {acc:8.4f} {f1:8.4f} {ece:6.3f} {never:5d} {seconds:7.0f}s", flush=True)
            with open(f"{out}/results.jsonl", "a") as f:
                f.write(json.dumps(dict(corpus=name, model=runner, accuracy=acc, macro_f1=f1, ece=ece,
                                        never_predicted=never, train_seconds=seconds)) + "\n")


if __name__ == "__main__":
    main()
