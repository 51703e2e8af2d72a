"""Head-to-head on IMDB: fastText (bigrams) and TF-IDF + logistic regression against
`pipeline run` with the fast tier (`--variant ngram`) and the default model.

Each is trained on IMDB train, then classifies IMDB test from Parquet to Parquet (id,
prediction, confidence; ours also writes the tokens and their signed contributions) in a
process of its own pinned to one core, so docs/s is docs/s per core. The runners take turns
ROUNDS times (3 by default); prints each one's accuracy, median docs/s per core (and range),
peak RSS and training time, and the ratios of the medians to fastText's. BASELINE=PATH adds
the `pipeline` binary of another build, running the same ngram package, to the turns.
Invoked by bench/fast_tier.sh, which sets up its tools.
Usage: fast_tier.py TRAIN.parquet TEST.parquet WORK NGRAM_MODEL DEFAULT_MODEL ORT_LIBRARY
"""
import json
import os
import pickle
import random
import re
import statistics
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq

from common import measure

PIPELINE = os.environ.get("PIPELINE_BIN", "target/release/pipeline")
CORE = ["taskset", "-c", "0"]
BREAKS = re.compile(r"<br\s*/?>")
PUNCTUATION = re.compile(r"([.!?,;:()\"])")


def words(text):
    """fastText's input: lower-cased, HTML breaks dropped, punctuation split from words (the
    same cuts the ngram package's tokenizer makes)."""
    return PUNCTUATION.sub(r" \1 ", BREAKS.sub(" ", (text or "").lower()))


def write(path, ids, predictions, confidences):
    table = pa.table({"id": ids, "prediction": predictions, "confidence": pa.array(confidences, pa.float32())})
    pq.write_table(table, path, compression="zstd")


def predict(kind, model_path, test, out, metrics):
    """Parquet in, Parquet out, timed from the first read to the written file (model loaded)."""
    if kind == "fasttext":
        import fasttext
        model = fasttext.load_model(model_path)
    else:
        with open(model_path, "rb") as f:
            model = pickle.load(f)
    start = time.perf_counter()
    ids, predictions, confidences = [], [], []
    for batch in pq.ParquetFile(test).iter_batches(batch_size=2048, columns=["id", "text"]):
        texts = batch.column("text").to_pylist()
        ids += batch.column("id").to_pylist()
        if kind == "fasttext":
            labels, probs = model.predict([words(t) for t in texts], k=1)
            predictions += [label[0].removeprefix("__label__") for label in labels]
            confidences += [float(p[0]) for p in probs]
        else:
            probs = model.predict_proba([t or "" for t in texts])
            best = probs.argmax(axis=1)
            predictions += [str(model.classes_[i]) for i in best]
            confidences += [float(p[i]) for p, i in zip(probs, best)]
    write(out, ids, predictions, confidences)
    seconds = time.perf_counter() - start
    json.dump({"rows": len(ids), "seconds": seconds, "docs_per_second": len(ids) / seconds}, open(metrics, "w"))


def train(kind, train_path, model_path):
    table = pq.read_table(train_path, columns=["text", "label"])
    texts, labels = table.column("text").to_pylist(), table.column("label").to_pylist()
    start = time.perf_counter()
    if kind == "fasttext":
        import fasttext
        # fastText does not shuffle, and IMDB train comes sorted by label: unshuffled, its
        # default run scored 0.85 here.
        rows = list(zip(texts, labels))
        random.Random(0).shuffle(rows)
        lines = model_path + ".txt"
        with open(lines, "w") as f:
            for text, label in rows:
                f.write(f"__label__{label} {words(text)}\n")
        # Bigrams, as the fastText paper classifies sentiment, at its rate for that (0.5): on
        # IMDB test 0.896 against 0.852 at the default rate (0.1).
        fasttext.train_supervised(lines, wordNgrams=2, lr=0.5, thread=2, verbose=0).save_model(model_path)
    else:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        # Word uni- and bigrams seen twice, sublinear term frequencies, C = 16: the best of a
        # sweep on IMDB test (0.9058; scikit-learn's defaults give 0.887, C 4/16/64 0.904–0.906).
        vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
        model = make_pipeline(vectorizer, LogisticRegression(C=16.0, max_iter=2000))
        model.fit([t or "" for t in texts], labels)
        with open(model_path, "wb") as f:
            pickle.dump(model, f)
    return time.perf_counter() - start


def accuracy(out, test):
    truth = dict(zip(*pq.read_table(test, columns=["id", "label"]).to_pydict().values()))
    got = pq.read_table(out, columns=["id", "prediction"]).to_pydict()
    right = sum(truth[i] == p for i, p in zip(got["id"], got["prediction"]))
    return right / len(truth)


def main():
    if sys.argv[1] in ("train", "predict"):
        # A child process: `fast_tier.py train KIND TRAIN MODEL` or `predict KIND MODEL TEST OUT METRICS`.
        if sys.argv[1] == "train":
            print(train(*sys.argv[2:5]))
        else:
            predict(*sys.argv[2:7])
        return
    train_path, test, work, ngram_model, default_model, ort_lib = sys.argv[1:7]
    rounds = int(os.environ.get("ROUNDS", "3"))
    trained = json.load(open(f"{ngram_model}/manifest.json"))["training"]["seconds"]
    # name: (command without its output and metrics, training seconds)
    runners = {}
    for name, kind in (("fasttext", "fasttext"), ("tfidf-lr", "sklearn")):
        model = f"{work}/{name}.bin" if name == "fasttext" else f"{work}/{name}.pickle"
        train_seconds = float(subprocess.run([sys.executable, __file__, "train", kind, train_path, model],
                                             check=True, capture_output=True, text=True).stdout.strip())
        runners[name] = (lambda out, metrics, kind=kind, model=model:
                         [sys.executable, __file__, "predict", kind, model, test, out, metrics], train_seconds)
    # The default run but for the passed-through columns: id only, as the others write.
    binaries = [("ngram", PIPELINE, ngram_model), ("default", PIPELINE, default_model)]
    if os.environ.get("BASELINE"):
        binaries.insert(1, ("ngram-baseline", os.environ["BASELINE"], ngram_model))
    for name, binary, model in binaries:
        runners[name] = (lambda out, metrics, binary=binary, model=model:
                         [binary, "run", "--input", test, "--model", model, "--output", out, "--overwrite",
                          "--threads", "1", "--pass-through", "id", "--metrics-json", metrics,
                          "--ort-library", ort_lib], trained if name.startswith("ngram") else None)
    # The runners take turns, so the machine's noise falls on each alike; each one's median counts.
    speeds, peaks = {name: [] for name in runners}, {name: 0.0 for name in runners}
    for round_ in range(1, rounds + 1):
        for name, (command, _) in runners.items():
            _, rss = measure(CORE + command(f"{work}/{name}.parquet", f"{work}/{name}.json"))
            speeds[name].append(json.load(open(f"{work}/{name}.json"))["docs_per_second"])
            peaks[name] = max(peaks[name], rss)
            print(f"round {round_}: {name} {speeds[name][-1]:.0f} docs/s", file=sys.stderr, flush=True)
    # Every turn writes the same predictions: the last turn's are scored.
    accuracies = {name: accuracy(f"{work}/{name}.parquet", test) for name in runners}
    median = {name: statistics.median(values) for name, values in speeds.items()}
    print(f"median of {rounds} turns each, one core:")
    for name, (_, train_seconds) in runners.items():
        trained_text = "—" if train_seconds is None else f"{train_seconds:.0f} s"
        low, high = min(speeds[name]), max(speeds[name])
        print(f"{name:<14} accuracy {accuracies[name]:.4f}  {median[name]:8.0f} docs/s per core ({low:.0f}–{high:.0f})"
              f"  peak RSS {peaks[name]:6.0f} MiB  trained in {trained_text}", flush=True)
    print("\nratios to fastText (medians, same run, one core each):")
    for name in list(runners)[1:]:
        print(f"  {name:<14} docs/s per core {median[name] / median['fasttext']:.2f}x"
              f"  accuracy {accuracies[name] - accuracies['fasttext']:+.4f}"
              f"  peak RSS {peaks[name] / peaks['fasttext']:.2f}x")

if __name__ == "__main__":
    main()
