"""Where ONNX Runtime spends a graph's time, by operator and by node scope (one intra-op thread,
30 batches of 64 random ids of 400 tokens, the CPU provider's profiler).

    target/bench/venv/bin/python bench/profile_graph.py [MODEL_DIR]      (default: fixtures/default-model)
"""
import collections
import json
import sys
import tempfile

import numpy as np
import onnxruntime as ort

model = sys.argv[1] if len(sys.argv) > 1 else "fixtures/default-model"
options = ort.SessionOptions()
options.enable_profiling = True
options.intra_op_num_threads = 1
options.profile_file_prefix = f"{tempfile.mkdtemp()}/profile"
session = ort.InferenceSession(f"{model}/model.onnx", options, providers=["CPUExecutionProvider"])
inputs = [i.name for i in session.get_inputs()]
rng = np.random.default_rng(0)
for _ in range(30):
    ids = rng.integers(5, 20000, size=(64, 400)).astype(np.int64)
    feed = {"input_ids": ids}
    if "attention_mask" in inputs:
        feed["attention_mask"] = np.ones_like(ids)
    session.run(None, feed)
events = json.load(open(session.end_profiling()))
by_op, by_scope, total = collections.Counter(), collections.Counter(), 0
for event in events:
    if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
        duration = event["dur"]
        total += duration
        by_op[event["args"]["op_name"]] += duration
        node = event["name"][: -len("_kernel_time")]
        by_scope[node.split("/")[0] if "/" in node else node.split("_")[0]] += duration
print(f"{total / 1000:.0f} ms in kernels")
for title, counts in (("by operator", by_op), ("by node", by_scope)):
    print(f"--- {title}")
    for name, duration in counts.most_common(15):
        print(f"{name:28s} {100 * duration / total:5.1f} %")
