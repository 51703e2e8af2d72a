"""Largest |Δ| between the `probabilities` columns of two prediction files (same row order)."""
import sys

import numpy as np
import pyarrow.parquet as pq

a, b = (pq.read_table(p, columns=["probabilities"]).column(0).to_pylist() for p in sys.argv[1:3])
assert len(a) == len(b), f"{len(a)} vs {len(b)} rows"
worst = max(float(np.max(np.abs(np.array(x) - np.array(y)))) for x, y in zip(a, b) if x is not None)
print(f"{worst:.2e}")
