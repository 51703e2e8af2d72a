"""Do the explanations say what moved the model? A deletion test on IMDB test.

For ROWS reviews spread evenly over the file (cut at the token limit, so each is one window), take the
K tokens that `contribution` says pushed hardest towards the predicted class, the K with the
most summed attention, and K at random; write each review without them (each removed token
replaced by a word the model has never seen, so positions and length stay); classify again;
and print how often the prediction flips and how far the predicted class's probability
falls. An explanation that names what drove the prediction flips more than attention and
far more than chance.

    python3 bench/explanations.py PIPELINE MODEL_DIR DATA.parquet WORK_DIR [ROWS] [K]
"""

import json
import random
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq

from common import pushes_towards_prediction, token_lists

pipeline, model, data, work = sys.argv[1:5]
rows = int(sys.argv[5]) if len(sys.argv) > 5 else 2000
k = int(sys.argv[6]) if len(sys.argv) > 6 else 5
# Lower-case letters only, so the word-level tokenizer keeps it one token, and no review has it.
UNSEEN = "qzxqzxqzx"


def run(source: str, out: str) -> pa.Table:
    subprocess.run([pipeline, "run", "--model", model, "--input", source, "--output", out, "--attention", "full",
                    "--long-documents", "truncate", "--threads", "2"], check=True, capture_output=True)
    return pq.read_table(out)


subset = f"{work}/subset.parquet"
table = pq.read_table(data, columns=["text"])
# Evenly spaced, so that a file sorted by label gives both classes.
pq.write_table(table.take([i * table.num_rows // rows for i in range(rows)]), subset)
original = run(subset, f"{work}/original.parquet")
tokens = token_lists(original)
pushes = pushes_towards_prediction(original)
summaries = original.column("attention_summary").to_pylist()
predicted = original.column("prediction_index").to_pylist()
probabilities = original.column("probabilities").to_pylist()

rng = random.Random(7)
strategies = {
    # The tokens joined again, nothing removed: re-tokenizing must give the same predictions.
    "nothing (control)": lambda i: [],
    "strongest push (contribution)": lambda i: sorted(range(len(tokens[i])), key=lambda t: -pushes[i][t])[:k],
    "most attention (summary)": lambda i: sorted(range(len(tokens[i])), key=lambda t: -summaries[i][t])[:k],
    "random": lambda i: rng.sample(range(len(tokens[i])), min(k, len(tokens[i]))),
}
print(f"{rows} reviews of {data}, {k} tokens removed from each")
print(f"{'removed':<32} {'flipped':>8} {'mean drop in p(predicted)':>27}")
for name, choose in strategies.items():
    texts = []
    for i in range(rows):
        removed = set(choose(i))
        texts.append(" ".join(UNSEEN if t in removed else token for t, token in enumerate(tokens[i])))
    source = f"{work}/removed.parquet"
    pq.write_table(pa.table({"text": texts}), source)
    after = run(source, f"{work}/after.parquet")
    after_probs = after.column("probabilities").to_pylist()
    flipped = sum(a.index(max(a)) != p for a, p in zip(after_probs, predicted)) / rows
    drop = sum(before[p] - a[p] for before, a, p in zip(probabilities, after_probs, predicted)) / rows
    print(f"{name:<32} {flipped:>8.1%} {drop:>27.3f}")
print(json.dumps({"rows": rows, "k": k}))
