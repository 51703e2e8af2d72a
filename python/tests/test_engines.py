"""The examples for distributed engines, run as a user would run them, on a local engine on
loopback: their output must be `pipeline run`'s, row for row."""

import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds

from conftest import REPO, REVIEWS, assert_same_predictions

EXAMPLES = REPO / "python" / "examples"


def run_example(name: str, output: Path) -> str:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name), "--input", str(REVIEWS), "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr[-6000:]}"
    return result.stdout


def test_ray_data_example_matches_pipeline_run(expected, tmp_path):
    printed = run_example("ray_data.py", tmp_path / "ray")
    assert "ray data: 300 rows" in printed, printed
    assert_same_predictions(ds.dataset(tmp_path / "ray", format="parquet").to_table(), expected)


def test_pyspark_example_matches_pipeline_run(expected, tmp_path):
    printed = run_example("pyspark_map_in_arrow.py", tmp_path / "spark")
    assert "pyspark: 300 rows" in printed, printed
    assert_same_predictions(ds.dataset(tmp_path / "spark", format="parquet").to_table(), expected)
