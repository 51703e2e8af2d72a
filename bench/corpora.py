"""Our variants' defaults against TF-IDF + logistic regression and fastText on several corpora.

For each corpus (a directory holding train.parquet and test.parquet with `text` and `label`):
trains each runner on train, classifies test, and prints accuracy, macro-F1, expected
calibration error (15 equal-width bins of the top probability) and training time. Ours are
trained by `pipeline train --variant V` with no tuning flag and scored from `pipeline run`'s
output (prediction and confidence), as a user would.

A corpus whose `label` is a list of labels is multi-label: every runner gives each document
the labels it puts at a probability of at least one half (or, when none, its most probable
one; ours use their per-label thresholds, tuned on validation). Its table gives the share of
documents given exactly their labels, micro-F1, macro-F1, the ECE over every (document, label)
decision, and the test file's labels never predicted.

Next to each ECE, `chance` is the ECE a perfectly calibrated model with the same confidences
shows on this test file by chance alone (the mean of 200 draws, each decision right with its
confidence, as `pipeline eval` prints it): an ECE near or below it is as small as the test file
can tell.
Invoked by bench/corpora.sh, which sets up its tools.
Usage: corpora.py WORK VARIANTS CORPUS_DIR...
VARIANTS: comma-separated entries, each a variant (`san`) or `NAME=VARIANT:FLAGS` for a variant
trained with flags, named NAME in the table (`san-gated=san:--pooled-values gated-words`).
"""
import json
import os
import random
import shlex
import subprocess
import sys
import time

import numpy as np
import pyarrow.parquet as pq

PIPELINE = os.environ.get("PIPELINE_BIN", "target/release/pipeline")


def calibration_error(confidence, right):
    """15-bin ECE of decisions made with `confidence`, `right` or not."""
    confidence, right = np.asarray(confidence, dtype=float), np.asarray(right, dtype=float)
    bins = np.minimum((confidence * 15).astype(int), 14)
    gaps = np.abs(np.bincount(bins, right, 15) - np.bincount(bins, confidence, 15))
    return float(gaps.sum() / len(confidence)) if len(confidence) else 0.0


def chance_calibration_error(confidence, draws=200):
    """The mean ECE of a perfectly calibrated model with these confidences, by chance alone."""
    confidence = np.asarray(confidence, dtype=float)
    rng = np.random.default_rng(0)
    return float(np.mean([calibration_error(confidence, rng.random(len(confidence)) < confidence)
                          for _ in range(draws)]))


def read(path):
    table = pq.read_table(path, columns=["text", "label"])
    texts = [t or "" for t in table.column("text").to_pylist()]
    if is_multi_label(table):
        return texts, [[str(x) for x in labels] for labels in table.column("label").to_pylist()]
    return texts, [str(x) for x in table.column("label").to_pylist()]


def is_multi_label(table):
    import pyarrow as pa
    return pa.types.is_list(table.schema.field("label").type) or pa.types.is_large_list(table.schema.field("label").type)


def given_labels(probabilities, labels, thresholds):
    """The labels at or above their threshold, or else the most probable (as `pipeline run`)."""
    chosen = [l for l, p, t in zip(labels, probabilities, thresholds) if p >= t]
    return chosen or [labels[max(range(len(labels)), key=lambda i: probabilities[i])]]


def multi_label_scores(truth, predicted, probabilities, labels):
    """Exact sets, micro-F1, macro-F1 over the labels seen, ECE over (document, label)
    decisions at one half, and labels of the test file never predicted."""
    exact = sum(set(t) == set(p) for t, p in zip(truth, predicted)) / len(truth)
    seen = set(l for t in truth for l in t) | set(l for p in predicted for l in p)
    tp_all = pred_all = true_all = 0
    f1s = []
    for label in sorted(seen):
        tp = sum(label in t and label in p for t, p in zip(truth, predicted))
        n_pred = sum(label in p for p in predicted)
        n_true = sum(label in t for t in truth)
        tp_all, pred_all, true_all = tp_all + tp, pred_all + n_pred, true_all + n_true
        f1s.append(2 * tp / (n_pred + n_true) if n_pred + n_true else 0.0)
    confidence, right = [], []
    for t, probs in zip(truth, probabilities):
        for label, p in zip(labels, probs):
            confidence.append(max(p, 1 - p))
            right.append((p >= 0.5) == (label in t))
    ece, chance = calibration_error(confidence, right), chance_calibration_error(confidence)
    never = sum(1 for label in set(l for t in truth for l in t) if not any(label in p for p in predicted))
    return exact, 2 * tp_all / (pred_all + true_all), sum(f1s) / len(f1s), ece, chance, never


def tfidf_lr_multi(train, test):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MultiLabelBinarizer
    binarizer = MultiLabelBinarizer()
    targets = binarizer.fit_transform(train[1])
    start = time.perf_counter()
    # One logistic regression per label, on the same features as the one-class baseline.
    model = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True),
                          OneVsRestClassifier(LogisticRegression(C=16.0, max_iter=2000), n_jobs=2))
    model.fit(train[0], targets)
    seconds = time.perf_counter() - start
    probs = model.predict_proba(test[0]).tolist()
    labels = [str(l) for l in binarizer.classes_]
    return [given_labels(p, labels, [0.5] * len(labels)) for p in probs], probs, labels, seconds


def tuned_thresholds(probabilities, truth, labels):
    """Each label's threshold of 0.05 … 0.95 with the best F1 (ties: nearest one half), as
    `pipeline train` tunes ours; one half for a label without documents."""
    thresholds = []
    for i, label in enumerate(labels):
        has = [label in t for t in truth]
        support = sum(has)
        best = (0.5, -1.0)
        for step in range(1, 20):
            t = step * 0.05
            given = [p[i] >= t for p in probabilities]
            tp = sum(g and h for g, h in zip(given, has))
            f1 = 2 * tp / (sum(given) + support) if support else -1.0
            if f1 > best[1] or (f1 == best[1] and abs(t - 0.5) < abs(best[0] - 0.5)):
                best = (t, f1)
        thresholds.append(best[0] if support else 0.5)
    return thresholds


def tfidf_lr_multi_tuned(train, test):
    """As `tfidf_lr_multi`, with a threshold per label tuned on a tenth of train held out,
    then refitted on all of train: what a careful user of scikit-learn would do."""
    start = time.perf_counter()
    order = list(range(len(train[0])))
    random.Random(0).shuffle(order)
    cut = len(order) // 10
    held, kept = order[:cut], order[cut:]
    part = ([train[0][i] for i in kept], [train[1][i] for i in kept])
    _, probs, labels, _ = tfidf_lr_multi(part, ([train[0][i] for i in held], None))
    thresholds = tuned_thresholds(probs, [train[1][i] for i in held], labels)
    by_label = dict(zip(labels, thresholds))
    _, probs, labels, _ = tfidf_lr_multi(train, test)
    thresholds = [by_label.get(l, 0.5) for l in labels]
    seconds = time.perf_counter() - start
    return [given_labels(p, labels, thresholds) for p in probs], probs, labels, seconds


def fasttext_multi(train, test, work):
    import fasttext
    rows = list(zip(*train))
    random.Random(0).shuffle(rows)
    lines = f"{work}/fasttext-train.txt"
    with open(lines, "w") as f:
        for text, labels in rows:
            tags = " ".join(f"__label__{l.replace(' ', '_')}" for l in labels)
            f.write(f"{tags} {text.lower().replace(chr(10), ' ')}\n")
    start = time.perf_counter()
    # One-vs-all loss: a sigmoid per label, as fastText advises for multi-label.
    model = fasttext.train_supervised(lines, wordNgrams=2, lr=0.5, thread=2, verbose=0, loss="ova")
    seconds = time.perf_counter() - start
    labels = [l.removeprefix("__label__") for l in model.labels]
    probs = []
    for text in test[0]:
        got, p = model.predict(text.lower().replace("\n", " "), k=-1, threshold=0.0)
        by_label = {l.removeprefix("__label__"): min(float(x), 1.0) for l, x in zip(got, p)}
        probs.append([by_label.get(l, 0.0) for l in labels])
    return [given_labels(p, labels, [0.5] * len(labels)) for p in probs], probs, labels, seconds


def ours_multi(variant, corpus, work):
    _, _, seconds = ours(variant, corpus, work)
    variant = entry(variant)[0]
    out = f"{work}/{variant}.parquet"
    table = pq.read_table(out, columns=["predicted_labels", "probabilities"])
    with open(f"{work}/{variant}/manifest.json") as f:
        labels = json.load(f)["labels"]
    # A text without a token the model knows has no prediction: no labels, probabilities 0.
    predicted = [p or [] for p in table.column("predicted_labels").to_pylist()]
    probabilities = [p or [0.0] * len(labels) for p in table.column("probabilities").to_pylist()]
    return predicted, probabilities, labels, seconds


def scores(truth, predicted, confidence):
    """Accuracy, macro-F1 over the test labels, 15-bin ECE of the top probability and what chance
    alone makes of it, and the test labels never predicted."""
    labels = sorted(set(truth))
    f1s = []
    for label in labels:
        tp = sum(t == label and p == label for t, p in zip(truth, predicted))
        n_pred = sum(p == label for p in predicted)
        n_true = sum(t == label for t in truth)
        f1s.append(2 * tp / (n_pred + n_true) if n_pred + n_true else 0.0)
    right = [t == p for t, p in zip(truth, predicted)]
    ece, chance = calibration_error(confidence, right), chance_calibration_error(confidence)
    never = sum(1 for label in labels if label not in set(predicted))
    return sum(right) / len(truth), sum(f1s) / len(f1s), ece, chance, never


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


def entry(text):
    """`NAME=VARIANT:FLAGS` (or a bare variant) as (name, variant, flags)."""
    name, _, spec = text.partition("=") if "=" in text else (text, "", text)
    variant, _, flags = spec.partition(":")
    return name, variant, shlex.split(flags)


def ours(name, corpus, work):
    name, variant, flags = entry(name)
    model, out = f"{work}/{name}", f"{work}/{name}.parquet"
    start = time.perf_counter()
    subprocess.run([PIPELINE, "train", "--variant", variant, "--train", f"{corpus}/train.parquet", "--out", model,
                    "--force", "--metrics-json", f"{work}/{name}-train.json", *flags],
                   check=True, stdout=subprocess.DEVNULL, stderr=open(f"{work}/{name}-train.log", "w"))
    seconds = time.perf_counter() - start
    subprocess.run([PIPELINE, "run", "--input", f"{corpus}/test.parquet", "--model", model, "--output", out,
                    "--overwrite", "--pass-through", "label"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    table = pq.read_table(out, columns=["prediction", "confidence"])
    return table.column("prediction").to_pylist(), table.column("confidence").to_pylist(), seconds


def ensemble(variants, corpus, work):
    """`pipeline combine` of the variants trained before it on this corpus (those that can join:
    not han); its time is theirs plus the combining, as its manifest records."""
    members = [f"{work}/{name}" for name, variant, _ in map(entry, variants) if variant not in ("ensemble", "han")]
    model, out = f"{work}/ensemble", f"{work}/ensemble.parquet"
    subprocess.run([PIPELINE, "combine", "--members", ",".join(members), "--train", f"{corpus}/train.parquet",
                    "--out", model, "--force"],
                   check=True, stdout=open(f"{work}/ensemble-combine.txt", "w"),
                   stderr=open(f"{work}/ensemble-combine.log", "w"))
    with open(f"{model}/manifest.json") as f:
        seconds = json.load(f)["training"]["seconds"]
    subprocess.run([PIPELINE, "run", "--input", f"{corpus}/test.parquet", "--model", model, "--output", out,
                    "--overwrite", "--pass-through", "label"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    table = pq.read_table(out, columns=["prediction", "confidence"])
    return table.column("prediction").to_pylist(), table.column("confidence").to_pylist(), seconds


def main():
    work, variants, corpora = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
    for corpus in corpora:
        name = os.path.basename(os.path.normpath(corpus))
        out = f"{work}/{name}"
        os.makedirs(out, exist_ok=True)
        train, test = read(f"{corpus}/train.parquet"), read(f"{corpus}/test.parquet")
        if test[1] and isinstance(test[1][0], list):
            multi_label(name, train, test, corpus, out, variants)
            continue
        print(f"{'corpus':<10} {'model':<10} {'accuracy':>8} {'macro-F1':>8} {'ECE':>6} {'chance':>6} {'never':>5} "
              f"{'trained':>8}", flush=True)
        runners = [("tfidf-lr", lambda: tfidf_lr(train, test)), ("fasttext", lambda: fasttext_run(train, test, out))]
        runners += [(entry(v)[0], lambda v=v: ours(v, corpus, out)) for v in variants if v and v != "ensemble"]
        if "ensemble" in variants:
            runners.append(("ensemble", lambda: ensemble(variants, corpus, out)))
        for runner, run in runners:
            predicted, confidence, seconds = run()
            acc, f1, ece, chance, never = scores(test[1], predicted, confidence)
            print(f"{name:<10} {runner:<10} {acc:8.4f} {f1:8.4f} {ece:6.3f} {chance:6.3f} {never:5d} {seconds:7.0f}s",
                  flush=True)
            with open(f"{out}/results.jsonl", "a") as f:
                f.write(json.dumps(dict(corpus=name, model=runner, accuracy=acc, macro_f1=f1, ece=ece,
                                        ece_by_chance=chance, never_predicted=never, train_seconds=seconds)) + "\n")


def multi_label(name, train, test, corpus, out, variants):
    print(f"{'corpus':<10} {'model':<10} {'exact':>8} {'micro-F1':>8} {'macro-F1':>8} {'ECE':>6} {'chance':>6} "
          f"{'never':>5} {'trained':>8}", flush=True)
    runners = [
        ("tfidf-lr", lambda: tfidf_lr_multi(train, test)),
        ("tfidf-lr-t", lambda: tfidf_lr_multi_tuned(train, test)),
        ("fasttext", lambda: fasttext_multi(train, test, out)),
    ]
    # pipeline combine sums models of one class per document.
    runners += [(entry(v)[0], lambda v=v: ours_multi(v, corpus, out)) for v in variants if v and v != "ensemble"]
    for runner, run in runners:
        predicted, probabilities, labels, seconds = run()
        exact, micro, macro, ece, chance, never = multi_label_scores(test[1], predicted, probabilities, labels)
        print(f"{name:<10} {runner:<10} {exact:8.4f} {micro:8.4f} {macro:8.4f} {ece:6.3f} {chance:6.3f} {never:5d} "
              f"{seconds:7.0f}s", flush=True)
        with open(f"{out}/results.jsonl", "a") as f:
            f.write(json.dumps(dict(corpus=name, model=runner, exact_sets=exact, micro_f1=micro, macro_f1=macro,
                                    ece=ece, ece_by_chance=chance, never_predicted=never, train_seconds=seconds)) + "\n")


if __name__ == "__main__":
    main()
