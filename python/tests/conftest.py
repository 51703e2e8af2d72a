"""What the tests of the installed wheel share: the repository's fixtures, the `pipeline`
command the wheel installed, and its output on the fixture reviews, which every Python path
must reproduce."""

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import attention_classifier as ac

REPO = Path(__file__).resolve().parents[2]
REVIEWS = REPO / "fixtures" / "reviews.parquet"
TINY_HAN = REPO / "fixtures" / "tiny-han"


@pytest.fixture(scope="session")
def pipeline_command() -> Path:
    """The `pipeline` the wheel put beside this Python, not one from the build tree."""
    command = Path(sys.executable).parent / "pipeline"
    assert command.is_file(), f"the wheel did not install the pipeline command into {command.parent}"
    return command


def pipeline_run(pipeline_command: Path, output: Path, *flags: str) -> pa.Table:
    subprocess.run(
        [str(pipeline_command), "run", "--input", str(REVIEWS), "--output", str(output), *flags],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return pq.read_table(output)


@pytest.fixture(scope="session")
def expected(pipeline_command: Path, tmp_path_factory) -> pa.Table:
    """`pipeline run` on the fixture reviews, default model, ONNX Runtime from this environment."""
    return pipeline_run(pipeline_command, tmp_path_factory.mktemp("expected") / "predictions.parquet")


def assert_same_predictions(actual: pa.Table, expected: pa.Table, tolerance: float = 1e-5) -> None:
    """Row for row by `id`: the same labels and tokens, probabilities within `tolerance` (batches
    may be padded differently, which moves the last float bits)."""
    actual = actual.sort_by("id")
    expected = expected.sort_by("id")
    assert actual.num_rows == expected.num_rows
    assert actual.column("id").to_pylist() == expected.column("id").to_pylist()
    for column in ("prediction", "prediction_index", "truncated"):
        assert actual.column(column).to_pylist() == expected.column(column).to_pylist(), column
    assert token_lists(actual) == token_lists(expected)
    for got, want in zip(actual.column("probabilities").to_pylist(), expected.column("probabilities").to_pylist()):
        assert got == pytest.approx(want, abs=tolerance)
    # Compact attention is bytes relative to the heaviest token: a weight on a rounding
    # boundary may land one step either way.
    bytes_ = pa.types.is_integer(actual.schema.field("attention_summary").type.value_type)
    weight_tolerance = 1 if bytes_ else tolerance
    summaries = zip(actual.column("attention_summary").to_pylist(), expected.column("attention_summary").to_pylist())
    for got, want in summaries:
        assert got == pytest.approx(want, abs=weight_tolerance)


def token_lists(table: pa.Table) -> list:
    """Each row's tokens: the `tokens` strings, or read from `token_spans` in the text."""
    if "tokens" in table.column_names:
        return table.column("tokens").to_pylist()
    return ac.tokens(table.column("text"), table.column("token_spans")).to_pylist()


def environment_without_onnxruntime(tmp_path: Path) -> dict:
    """The environment of a Python that finds an `onnxruntime` package without a library in it
    (first on PYTHONPATH), run from a directory without target/onnxruntime: the fallback case."""
    fake = tmp_path / "shadow" / "onnxruntime"
    (fake / "capi").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tmp_path / "shadow")
    env.pop("ORT_DYLIB_PATH", None)
    return env
