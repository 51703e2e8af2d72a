"""Session-only speed of model packages' graphs on ONNX Runtime's CPU provider: batches of
64 random ids of 300 tokens (IMDB's typical review), 2 intra-op threads, every graph output
fetched, best of 3 rounds of 10 batches, the packages taking turns. Compares graphs, not
pipelines: `bench/run.sh` measures the pipeline around them.

    target/bench/venv/bin/python bench/graph_speed.py MODEL_DIR [MODEL_DIR ...]
"""
import json
import sys
import time

import numpy as np
import onnxruntime as ort

BATCH, TOKENS, ROUNDS, BATCHES = 64, 300, 3, 10


def session(model):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    return ort.InferenceSession(f"{model}/model.onnx", options, providers=["CPUExecutionProvider"])


def feeds(model, session):
    vocabulary = len(json.load(open(f"{model}/tokenizer.json"))["model"]["vocab"])
    rng = np.random.default_rng(0)
    names = [i.name for i in session.get_inputs()]
    batches = []
    for _ in range(BATCHES):
        ids = rng.integers(5, vocabulary, size=(BATCH, TOKENS)).astype(np.int64)
        feed = {"input_ids": ids}
        if "attention_mask" in names:
            feed["attention_mask"] = np.ones_like(ids)
        batches.append(feed)
    return batches


models = sys.argv[1:]
sessions = {m: session(m) for m in models}
inputs = {m: feeds(m, sessions[m]) for m in models}
best = {m: float("inf") for m in models}
for _ in range(ROUNDS):
    for m in models:
        start = time.perf_counter()
        for feed in inputs[m]:
            sessions[m].run(None, feed)
        best[m] = min(best[m], time.perf_counter() - start)
for m in models:
    print(f"{BATCH * BATCHES / best[m]:8.0f} docs/s  {m}")
