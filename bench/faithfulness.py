"""Do a model's word-level explanations name what moved it, and would a person agree?
ERASER's faithfulness and a lexicon's plausibility, on IMDB test (#36).

For ROWS reviews spread evenly over the file (each cut at the token limit, so each is one
window), every explanation ranks the review's tokens: `contribution` by its push towards the
predicted class, attention by `attention_summary`, and, as the floor, a random order. Then:

- comprehensiveness (DeYoung et al. 2020, ERASER): the fall in the predicted class's
  probability when the top k % of tokens (at least one) are deleted; higher is more faithful;
- sufficiency: the fall when only those tokens are kept, in their order; lower is better;
- each as AOPC: the mean over k = 1, 5, 10, 20 and 50 %.

A token is removed by deleting it from the token list, which is joined with spaces and read
again: the tokens, joined with nothing removed, give the same predictions (checked as the
control row). Plausibility: the share of each review's top 3 tokens that are words of the
VADER sentiment lexicon (`vaderSentiment` on PyPI, 7,500 words rated by people, not us), and
the corpus-level top 20 of each predicted class (pushes or attention summed over its
reviews), with which of `this`, `.`, `movie` and `film` are among them.

    python bench/faithfulness.py PIPELINE MODEL_DIR DATA.parquet WORK_DIR [ROWS]
"""

import math
import random
import subprocess
import sys
from collections import defaultdict
from importlib import resources

import pyarrow as pa
import pyarrow.parquet as pq

from common import pushes_towards_prediction, token_lists

pipeline, model, data, work = sys.argv[1:5]
rows = int(sys.argv[5]) if len(sys.argv) > 5 else 2000
BINS = [0.01, 0.05, 0.10, 0.20, 0.50]
CARRIERS = ["this", ".", "movie", "film"]


def run(texts: list[str], name: str) -> pa.Table:
    source, out = f"{work}/{name}-in.parquet", f"{work}/{name}-out.parquet"
    pq.write_table(pa.table({"text": texts}), source)
    subprocess.run([pipeline, "run", "--model", model, "--input", source, "--output", out, "--attention", "full",
                    "--long-documents", "truncate", "--threads", "2", "--overwrite"], check=True, capture_output=True)
    return pq.read_table(out)


def lexicon() -> set[str]:
    text = resources.files("vaderSentiment").joinpath("vader_lexicon.txt").read_text(encoding="utf-8")
    return {line.split("\t")[0].lower() for line in text.splitlines() if line.strip()}


table = pq.read_table(data, columns=["text"])
# Evenly spaced, so that a file sorted by label gives both classes.
subset = [table.column("text")[i * table.num_rows // rows].as_py() for i in range(rows)]
original = run(subset, "original")
tokens = token_lists(original)
predicted = original.column("prediction_index").to_pylist()
labels = original.column("prediction").to_pylist()
probabilities = original.column("probabilities").to_pylist()
columns = set(original.column_names)

rng = random.Random(7)
rankings = {"random": [rng.sample(range(len(t)), len(t)) for t in tokens]}
if "attention_summary" in columns:
    summary = original.column("attention_summary").to_pylist()
    rankings["attention (summary)"] = [sorted(range(len(t)), key=lambda j, w=w: -w[j]) for t, w in zip(tokens, summary)]
if "contribution" in columns:
    pushes = pushes_towards_prediction(original)
    rankings["contribution"] = [sorted(range(len(t)), key=lambda j, p=p: -p[j]) for t, p in zip(tokens, pushes)]


def fall(after: pa.Table) -> list[float]:
    after_probs = after.column("probabilities").to_pylist()
    return [before[p] - (a[p] if a else 0.0) for before, a, p in zip(probabilities, after_probs, predicted)]


control = fall(run([" ".join(t) for t in tokens], "control"))
print(f"{rows} reviews of {data}, model {model}")
print(f"control (tokens joined, nothing removed): largest change in p(predicted) {max(map(abs, control)):.2e}")
print(f"{'explanation':<22} {'comprehensiveness AOPC':>23} {'sufficiency AOPC':>17}   per bin (comp / suff at 1, 5, 10, 20, 50 %)")
results = {}
for name, ranking in rankings.items():
    comp, suff = [], []
    for share in BINS:
        top = [set(order[: max(1, math.ceil(share * len(order)))]) for order in ranking]
        removed = [" ".join(tok for j, tok in enumerate(t) if j not in keep) for t, keep in zip(tokens, top)]
        kept = [" ".join(tok for j, tok in enumerate(t) if j in keep) for t, keep in zip(tokens, top)]
        comp.append(sum(fall(run(removed, "removed"))) / rows)
        suff.append(sum(fall(run(kept, "kept"))) / rows)
    results[name] = (comp, suff)
    bins = "  ".join(f"{c:.3f}/{s:.3f}" for c, s in zip(comp, suff))
    print(f"{name:<22} {sum(comp) / len(comp):>23.3f} {sum(suff) / len(suff):>17.3f}   {bins}")

words = lexicon()
print(f"\nplausibility: VADER lexicon, {len(words)} words")
print(f"{'explanation':<22} {'top-3 in lexicon':>17}   corpus top 20 per class (carriers among them)")
for name, ranking in rankings.items():
    share = sum(sum(tokens[i][j] in words for j in order[:3]) / min(3, len(order)) for i, order in enumerate(ranking)
                if order) / rows
    weights = pushes if name == "contribution" else summary if name.startswith("attention") else None
    tops = {}
    if weights is not None:
        totals = defaultdict(lambda: defaultdict(float))
        for t, w, label in zip(tokens, weights, labels):
            for token, value in zip(t, w):
                totals[label][token] += value
        for label, by_token in sorted(totals.items()):
            top = sorted(by_token, key=lambda token: -by_token[token])[:20]
            tops[label] = (top, [c for c in CARRIERS if c in top])
    described = "; ".join(f"{label}: {', '.join(top[:8])}, … (carriers: {', '.join(c) or 'none'})"
                          for label, (top, c) in tops.items()) or "—"
    print(f"{name:<22} {share:>17.1%}   {described}")
