"""The Python stack a user would otherwise write: pyarrow + tokenizers + onnxruntime.

Reads the corpus in record batches, tokenizes with the package's tokenizer.json, runs the
same model.onnx in batches of 64 on 2 threads, and writes predictions to Parquet. With
`sorted`, the documents of each 2,048-row window are batched in order of length (less
padding), as a careful engineer would; the output keeps the input order either way.
Usage: python_stack.py MODEL_DIR INPUT.parquet OUTPUT.parquet METRICS.json [sorted]
"""
import json
import sys
import time

import numpy as np
import onnxruntime as ort
import pyarrow as pa
import pyarrow.parquet as pq
from tokenizers import Tokenizer

model_dir, input_path, output_path, metrics_path = sys.argv[1:5]
SORTED = sys.argv[5:6] == ["sorted"]
BATCH = 64
manifest = json.load(open(f"{model_dir}/manifest.json"))
labels, max_tokens, pad = manifest["labels"], manifest["max_tokens"], manifest["padding_id"]
tokenizer = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
options = ort.SessionOptions()
options.intra_op_num_threads = 2
options.inter_op_num_threads = 1
session = ort.InferenceSession(f"{model_dir}/model.onnx", options, providers=["CPUExecutionProvider"])

start = time.perf_counter()
rows = tokens = 0
writer = None
for batch in pq.ParquetFile(input_path).iter_batches(batch_size=2048):
    texts = batch.column("text").to_pylist()
    encodings = tokenizer.encode_batch([t or "" for t in texts], add_special_tokens=False)
    ids = [e.ids[:max_tokens] for e in encodings]
    probs_out, attention_out, token_out = [None] * len(ids), [None] * len(ids), [None] * len(ids)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i])) if SORTED else list(range(len(ids)))
    for lo in range(0, len(ids), BATCH):
        rows_here = order[lo:lo + BATCH]
        chunk = [ids[r] for r in rows_here]
        width = max(1, max(len(c) for c in chunk))
        input_ids = np.full((len(chunk), width), pad, dtype=np.int64)
        mask = np.zeros((len(chunk), width), dtype=np.int64)
        for i, c in enumerate(chunk):
            input_ids[i, :len(c)] = c
            mask[i, :len(c)] = 1
        probs, attention = session.run(["probs", "attention"], {"input_ids": input_ids, "attention_mask": mask})
        for i, (r, c) in enumerate(zip(rows_here, chunk)):
            probs_out[r] = probs[i].tolist()
            attention_out[r] = attention[i, :, :len(c)].tolist()
            token_out[r] = encodings[r].tokens[:len(c)]
            tokens += len(c)
    best = [int(np.argmax(p)) for p in probs_out]
    table = batch.append_column("prediction", pa.array([labels[b] for b in best])) \
        .append_column("confidence", pa.array([p[b] for p, b in zip(probs_out, best)], pa.float32())) \
        .append_column("probabilities", pa.array(probs_out, pa.list_(pa.float32()))) \
        .append_column("tokens", pa.array(token_out)) \
        .append_column("attention", pa.array(attention_out, pa.list_(pa.list_(pa.float32()))))
    table = pa.Table.from_batches([table])
    if writer is None:
        writer = pq.ParquetWriter(output_path, table.schema, compression="zstd")
    writer.write_table(table)
    rows += batch.num_rows
writer.close()
seconds = time.perf_counter() - start
json.dump({"rows": rows, "tokens": tokens, "seconds": seconds, "docs_per_second": rows / seconds,
           "tokens_per_second": tokens / seconds}, open(metrics_path, "w"))
