"""The Python API as a data engineer would use it: classify Arrow tables in memory, run the
batch job, and get errors that say what to fix."""

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import attention_classifier as ac
from conftest import REVIEWS, TINY_HAN, assert_same_predictions, environment_without_onnxruntime, pipeline_run


@pytest.fixture(scope="module")
def classifier() -> ac.Classifier:
    return ac.Classifier()


def test_classify_matches_pipeline_run_and_uses_onnxruntime_from_pip(classifier, expected):
    assert classifier.backend == "ort-cpu", "the onnxruntime package installed beside the wheel was not used"
    assert classifier.labels == ["neg", "pos"]
    actual = classifier.classify(pq.read_table(REVIEWS))
    assert actual.column_names == expected.column_names
    assert actual.schema == expected.schema.remove_metadata()
    assert_same_predictions(actual, expected)
    # 61 of the 300 fixture reviews are longer than the model's 400 tokens: classified in windows.
    assert actual.column("truncated").to_pylist().count(False) == 300


def test_a_record_batch_is_classified_and_its_columns_pass_through_without_a_copy(classifier):
    texts = pa.array(["A wonderful, moving film.", None, "Dull, slow and far too long. Avoid it.", ""])
    batch = pa.RecordBatch.from_arrays([texts, pa.array([1, 2, 3, 4])], names=["text", "row"])
    out = classifier.classify(batch)
    assert out.num_rows == 4
    assert out.column("row").to_pylist() == [1, 2, 3, 4]
    assert out.column("prediction").to_pylist() == ["pos", None, "neg", None]
    # The pass-through text is the caller's buffer, through the C data interface.
    assert out.column("text").chunk(0).buffers()[2].address == texts.buffers()[2].address


def test_every_record_batch_of_a_table_keeps_its_rows(classifier):
    table = pq.read_table(REVIEWS)
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=70))
    out = classifier.classify(chunked)
    assert [b.num_rows for b in out.to_batches()] == [b.num_rows for b in chunked.to_batches()]
    assert_same_predictions(out, classifier.classify(table), tolerance=1e-6)


def test_options_are_those_of_pipeline_run(pipeline_command, tmp_path):
    options = dict(long_documents="truncate", attention="top-k:4")
    expected = pipeline_run(pipeline_command, tmp_path / "out.parquet", "--long-documents", "truncate", "--attention", "top-k:4")
    actual = ac.Classifier(**options).classify(pq.read_table(REVIEWS))
    assert actual.column("truncated").to_pylist().count(True) == 61
    assert_same_predictions(actual, expected)


def test_a_hierarchical_model_from_a_directory(pipeline_command, tmp_path):
    expected = pipeline_run(pipeline_command, tmp_path / "han.parquet", "--model", str(TINY_HAN))
    classifier = ac.Classifier(TINY_HAN)
    actual = classifier.classify(pq.read_table(REVIEWS))
    assert "sentence_attention" in actual.column_names
    assert_same_predictions(actual, expected)


def test_run_is_pipeline_run_in_this_process(pipeline_command, expected, tmp_path):
    output = tmp_path / "predictions.parquet"
    summary = ac.run(str(REVIEWS), str(output))
    assert summary["rows"] == 300
    assert_same_predictions(pq.read_table(output), expected)
    # The batch-job contract holds from Python too: a file that is not Parquet is left alone.
    essay = tmp_path / "essay.parquet"
    essay.write_text("not predictions")
    with pytest.raises(ac.PipelineError, match="essay.parquet"):
        ac.run(str(REVIEWS), str(essay))
    assert essay.read_text() == "not predictions"


def test_errors_name_what_to_fix(classifier, tmp_path):
    with pytest.raises(ac.PipelineError, match=r"no text column `text`; its columns are: review"):
        classifier.classify(pa.table({"review": ["fine"]}))
    with pytest.raises(ac.PipelineError, match=r"text column `text` has type Int64, expected a string column"):
        classifier.classify(pa.table({"text": [1, 2]}))
    with pytest.raises(ac.PipelineError, match=r"input column `prediction` collides with an output column"):
        classifier.classify(pa.table({"text": ["fine"], "prediction": ["x"]}))
    with pytest.raises(ac.PipelineError, match=r"2 columns named `text`"):
        classifier.classify(pa.Table.from_arrays([pa.array(["good"]), pa.array(["awful"])], names=["text", "text"]))
    with pytest.raises(ac.PipelineError, match=r"batch_size must be at least 1, not -1"):
        ac.Classifier(batch_size=-1)
    with pytest.raises(TypeError, match="pyarrow.Table.from_pandas"):
        classifier.classify([{"text": "fine"}])
    with pytest.raises(ac.PipelineError, match=r"long_documents=\"sideways\" is not one of: windows, head-tail, truncate"):
        ac.Classifier(long_documents="sideways")
    with pytest.raises(ac.PipelineError, match=r"attention=\"most\""):
        ac.Classifier(attention="most")
    with pytest.raises(ac.PipelineError, match="manifest.json"):
        ac.Classifier(tmp_path)
    with pytest.raises(ac.PipelineError, match="does_not_exist.parquet"):
        ac.run(str(tmp_path / "does_not_exist.parquet"), str(tmp_path / "out.parquet"))
    assert not (tmp_path / "out.parquet").exists()


def test_an_unreachable_store_raises_the_retryable_error(tmp_path, monkeypatch):
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    for name, value in {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "PIPELINE_STORAGE_RETRY_SECONDS": "0",
        "PIPELINE_MODEL_CACHE": str(tmp_path / "cache"),
    }.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ac.TransientError, match="s3://models/san/"):
        ac.Classifier("s3://models/san/")
    assert issubclass(ac.TransientError, ac.PipelineError)


def test_without_an_onnxruntime_library_it_falls_back_to_tract(tmp_path, expected):
    script = (
        "import json, pyarrow.parquet as pq, attention_classifier as ac\n"
        "c = ac.Classifier()\n"
        f"out = c.classify(pq.read_table({str(REVIEWS)!r}))\n"
        "print(json.dumps([c.backend, out.column('prediction').to_pylist(), out.column('confidence').to_pylist()]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=environment_without_onnxruntime(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    backend, predictions, confidences = json.loads(result.stdout)
    assert backend == "tract"
    assert predictions == expected.column("prediction").to_pylist()
    assert confidences == pytest.approx(expected.column("confidence").to_pylist(), abs=1e-4)


def test_a_forked_child_classifies(classifier):
    """A process forked after its parent classified (multiprocessing's default on Linux) gets
    worker threads of its own; before, it waited for ever on its parent's."""
    import multiprocessing

    table = pq.read_table(REVIEWS)
    parent = classifier.classify(table).column("prediction").to_pylist()
    with multiprocessing.get_context("fork").Pool(1) as pool:
        child = pool.apply_async(_classify_in_child, (str(REVIEWS),)).get(timeout=120)
    assert child == parent


def _classify_in_child(path):
    return ac.Classifier().classify(pq.read_table(path)).column("prediction").to_pylist()


def test_ctrl_c_stops_classify_between_chunks(tmp_path):
    """SIGINT during a long classify raises KeyboardInterrupt within seconds, not at the end."""
    import signal
    import time

    script = (
        "import time, pyarrow as pa, pyarrow.parquet as pq, attention_classifier as ac\n"
        "c = ac.Classifier()\n"
        f"t = pa.concat_tables([pq.read_table({str(REVIEWS)!r})] * 100)\n"
        "print('ready', flush=True)\n"
        "start = time.perf_counter()\n"
        "try:\n"
        "    c.classify(t)\n"
        "    print('finished', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print(f'interrupted after {time.perf_counter() - start:.1f} s', flush=True)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    child.send_signal(signal.SIGINT)
    printed = child.communicate(timeout=60)[0]
    assert printed.startswith("interrupted after"), printed
    # 30,000 rows take about 30 s on 2 cores; a look every 4,096 rows stops within a few.
    assert float(printed.split()[2]) < 15, printed


def test_the_default_model_cache_is_repaired_or_done_without(tmp_path):
    """A damaged cache entry is written again; an unwritable cache is done without."""

    def run(env):
        script = "import attention_classifier as ac; print(ac.Classifier().backend)"
        return subprocess.run([sys.executable, "-c", script], env={**os.environ, **env}, capture_output=True, text=True)

    cache = tmp_path / "cache"
    assert run({"PIPELINE_MODEL_CACHE": str(cache)}).returncode == 0
    (graph,) = cache.glob("embedded-*/model.onnx")
    graph.write_bytes(graph.read_bytes()[:1000])
    repaired = run({"PIPELINE_MODEL_CACHE": str(cache)})
    assert repaired.returncode == 0, repaired.stderr
    assert graph.stat().st_size > 1000
    unwritable = run({"PIPELINE_MODEL_CACHE": "/proc/no-cache-here"})
    assert unwritable.returncode == 0, unwritable.stderr
