"""The Python API as a data engineer would use it: classify Arrow tables in memory, run the
batch job, and get errors that say what to fix."""

import inspect
import json
import os
import re
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


def test_min_confidence_abstains_as_pipeline_run_does(pipeline_command, tmp_path):
    expected = pipeline_run(pipeline_command, tmp_path / "out.parquet", "--min-confidence", "0.95")
    actual = ac.Classifier(min_confidence=0.95).classify(pq.read_table(REVIEWS))
    abstained = actual.column("abstained").to_pylist()
    assert 0 < abstained.count(True) < len(abstained), abstained.count(True)
    assert abstained == expected.column("abstained").to_pylist()
    for row, skipped in enumerate(abstained):
        assert (actual.column("prediction")[row].as_py() is None) == skipped
    assert actual.schema.metadata[b"pipeline.min_confidence"] == b"0.95"
    with pytest.raises(ac.PipelineError) as raised:
        ac.Classifier(min_confidence=1.5)
    assert "min_confidence=" in str(raised.value), raised.value


def test_drop_leaves_columns_out_as_pipeline_run_does(pipeline_command, tmp_path):
    expected = pipeline_run(pipeline_command, tmp_path / "out.parquet", "--drop", "attention_summary,contribution")
    actual = ac.Classifier(drop=["attention_summary", "contribution"]).classify(pq.read_table(REVIEWS))
    assert actual.column_names == expected.column_names
    assert "attention_summary" not in actual.column_names and "contribution_scale" not in actual.column_names
    assert actual.column("prediction").to_pylist() == expected.column("prediction").to_pylist()
    summary = ac.run(str(REVIEWS), str(tmp_path / "run.parquet"), drop="attention_summary,contribution")
    assert pq.read_schema(tmp_path / "run.parquet").names == expected.column_names, summary
    with pytest.raises(ac.PipelineError) as raised:
        ac.Classifier(drop=["attentions"])
    assert "drop=" in str(raised.value) and "writes no column `attentions`" in str(raised.value), raised.value
    assert "--" not in str(raised.value), raised.value


def test_a_multi_label_model_gives_the_labels_pipeline_run_gives(pipeline_command, tmp_path):
    fixtures = REVIEWS.parent
    model, output = tmp_path / "model", tmp_path / "run.parquet"
    train = ["train", "--variant", "ngram", "--label-column", "labels", "--train", str(fixtures / "labels-train.parquet")]
    small = ["--buckets", "20000", "--members", "2", "--min-count", "1"]
    subprocess.run([str(pipeline_command), *train, "--out", str(model), *small], check=True, capture_output=True)
    test = fixtures / "labels-test.parquet"
    run = ["run", "--input", str(test), "--model", str(model), "--output", str(output)]
    subprocess.run([str(pipeline_command), *run], check=True, capture_output=True)
    expected = pq.read_table(output)
    actual = ac.Classifier(model).classify(pq.read_table(test))
    labels = actual.column("predicted_labels").to_pylist()
    assert labels == expected.column("predicted_labels").to_pylist()
    assert sum(len(row) > 1 for row in labels) > 10
    pushes = actual.column("label_contributions").to_pylist()
    assert [len(row) for row in pushes] == [len(row) for row in labels]


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


def test_run_sets_and_checks_options_as_pipeline_run_does(tmp_path, monkeypatch):
    # `metrics_json` writes the summary that run() returns; a refused option is named as passed.
    summary_file = tmp_path / "summary.json"
    output = tmp_path / "out.parquet"
    summary = ac.run(str(REVIEWS), str(output), metrics_json=str(summary_file), min_confidence=0.9, batch_size=7)
    assert json.loads(summary_file.read_text()) == summary
    assert pq.read_schema(output).metadata[b"pipeline.min_confidence"] == b"0.9"
    with pytest.raises(ac.PipelineError, match=r"job_name=\"a b\": give a name without spaces"):
        ac.run(str(REVIEWS), str(tmp_path / "other.parquet"), job_name="a b")
    with pytest.raises(ac.PipelineError, match=r"min_confidence=1.5: "):
        ac.run(str(REVIEWS), str(tmp_path / "other.parquet"), min_confidence=1.5)
    with pytest.raises(TypeError, match=r"min_confidence=True: takes a number"):
        ac.run(str(REVIEWS), str(tmp_path / "other.parquet"), min_confidence=True)
    with pytest.raises(ac.PipelineError, match=r"window=0: must be at least 1"):
        ac.run(str(REVIEWS), str(tmp_path / "other.parquet"), window=0)
    with pytest.raises(TypeError, match=r"window= and chunk_rows="):
        ac.run(str(REVIEWS), str(tmp_path / "other.parquet"), window=5, chunk_rows=7)
    monkeypatch.setenv("OPENLINEAGE_URL", "not a url")
    with pytest.raises(ac.PipelineError, match=r"openlineage_url=\"not a url\": is not a URL .*from OPENLINEAGE_URL"):
        ac.run(str(REVIEWS), str(tmp_path / "other.parquet"))
    monkeypatch.delenv("OPENLINEAGE_URL")
    # numpy's integers are counts (numpy comes with onnxruntime), and a set of names is a list.
    import numpy as np

    ac.run(str(REVIEWS), str(tmp_path / "numpy.parquet"), batch_size=np.int64(9), drop={"contribution"})
    assert "contribution" not in pq.read_schema(tmp_path / "numpy.parquet").names
    assert not (tmp_path / "other.parquet").exists()


def test_errors_name_what_to_fix(classifier, tmp_path):
    with pytest.raises(ac.PipelineError, match=r"no text column `text`; its columns are: review"):
        classifier.classify(pa.table({"review": ["fine"]}))
    with pytest.raises(ac.PipelineError, match=r"text column `text` has type Int64, expected a string column"):
        classifier.classify(pa.table({"text": [1, 2]}))
    with pytest.raises(ac.PipelineError, match=r"input column `prediction` collides with an output column"):
        classifier.classify(pa.table({"text": ["fine"], "prediction": ["x"]}))
    with pytest.raises(ac.PipelineError, match=r"2 columns named `text`"):
        classifier.classify(pa.Table.from_arrays([pa.array(["good"]), pa.array(["awful"])], names=["text", "text"]))
    with pytest.raises(ac.PipelineError, match=r"batch_size=-1: must be at least 1"):
        ac.Classifier(batch_size=-1)
    with pytest.raises(TypeError, match="pyarrow.Table.from_pandas"):
        classifier.classify([{"text": "fine"}])
    with pytest.raises(ac.PipelineError, match=r"long_documents=\"sideways\": not one of: windows, head-tail, truncate"):
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


def _seconds_to_stop_on_ctrl_c(setup: str, work: str, wait: float) -> float:
    """Runs `setup`, then `work` in a child Python, sends SIGINT `wait` seconds into the work,
    and returns how long the work took to raise KeyboardInterrupt (it must raise it)."""
    import signal
    import time

    script = (
        f"import time, pyarrow as pa, pyarrow.parquet as pq, attention_classifier as ac\n{setup}\n"
        "print('ready', flush=True)\n"
        "start = time.perf_counter()\n"
        "try:\n"
        f"    {work}\n"
        "    print('finished', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print(f'interrupted after {time.perf_counter() - start:.1f} s', flush=True)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    time.sleep(wait)
    child.send_signal(signal.SIGINT)
    printed = child.communicate(timeout=120)[0]
    assert printed.startswith("interrupted after"), printed
    return float(printed.split()[2])


def test_ctrl_c_stops_classify_between_chunks():
    """SIGINT during a long classify raises KeyboardInterrupt within seconds, not at the end."""
    setup = f"c = ac.Classifier()\nt = pa.concat_tables([pq.read_table({str(REVIEWS)!r})] * 100)"
    # 30,000 rows take about 30 s on 2 cores; a look every 4,096 rows stops within a few.
    assert _seconds_to_stop_on_ctrl_c(setup, "c.classify(t)", 1.0) < 15


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


def test_every_output_name_is_refused_whatever_this_classifier_writes():
    """`pipeline run` refuses every output column name; Python refused only this run's, so an
    input `attention` passed beside attention="none" and a reader took it for the model's."""
    plain = ac.Classifier(attention="none")
    for name in ["attention", "contribution", "attention_entropy", "embedding", "sentence_attention"]:
        with pytest.raises(ac.PipelineError, match=rf"input column `{name}` collides with an output column"):
            plain.classify(pa.table({"text": ["fine"], name: ["x"]}))


def test_threads_beyond_the_cli_bound_are_refused_at_once():
    with pytest.raises(ac.PipelineError, match=r"threads=100000: must be between 1 and 1024"):
        ac.Classifier(threads=100000)
    with pytest.raises(ac.PipelineError, match=r"threads=5000: must be between 1 and 1024"):
        ac.run(str(REVIEWS), "unused.parquet", threads=5000)
    assert not os.path.exists("unused.parquet")


def test_errors_survive_pickling_into_another_process(tmp_path):
    """A worker's error reaches the driver with its message and class (it was a PicklingError)."""
    import pickle
    from concurrent.futures import ProcessPoolExecutor
    import multiprocessing

    error = ac.TransientError("s3://models/san/: unreachable")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is ac.TransientError and str(again) == str(error)
    assert ac.PipelineError.__module__ == "attention_classifier"
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        with pytest.raises(ac.PipelineError, match="no text column `text`"):
            pool.submit(_classify_without_text).result(timeout=120)


def _classify_without_text():
    return ac.Classifier().classify(pa.table({"review": ["fine"]}))


def test_output_tables_carry_this_run_s_metadata_not_the_input_s(classifier, expected):
    """Python output named no model (the report said "model unknown"), and re-classifying an
    earlier output kept that output's model and labels."""
    out = classifier.classify(pq.read_table(REVIEWS))
    metadata = {k.decode(): v.decode() for k, v in out.schema.metadata.items()}
    wanted = {k.decode(): v.decode() for k, v in expected.schema.metadata.items()}
    for key in ["model.variant", "model.sha256", "model.labels", "model.card", "pipeline.attention", "pipeline.long_documents"]:
        assert metadata[key] == wanted[key], key
    stale = pa.table({"text": ["A fine film."]}).replace_schema_metadata(
        {"model.sha256": "0" * 64, "model.labels": '["x","y"]', "pandas": "{}"}
    )
    again = {k.decode(): v.decode() for k, v in classifier.classify(stale).schema.metadata.items()}
    assert again["model.sha256"] == wanted["model.sha256"]
    assert again["model.labels"] == '["neg","pos"]'
    assert again["pandas"] == "{}", "other metadata is kept"


def test_a_relative_model_path_survives_a_change_of_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(os.path.dirname(TINY_HAN))
    opened = ac.Classifier(os.path.basename(TINY_HAN))
    monkeypatch.chdir(tmp_path)
    out = opened.classify(pa.concat_tables([pq.read_table(REVIEWS)] * 20))
    assert out.num_rows == 6000
    assert os.path.isabs(opened.model)


def test_a_large_table_is_classified_in_bounded_windows():
    """Each window's predictions are built into columns before the next: memory held a
    prediction per row (1,000,000 one-word rows peaked at 5.1 GB). Peak RSS of a fresh process
    for 100,000 and for 400,000 rows: what grows is the output, not a prediction per row."""

    def peak_mb(rows):
        # VmHWM, not ru_maxrss: a child's ru_maxrss starts at its parent's size at the fork.
        script = (
            "import pyarrow as pa, attention_classifier as ac\n"
            f"out = ac.Classifier().classify(pa.table({{'text': pa.array(['good'] * {rows})}}))\n"
            f"assert out.num_rows == {rows} and out.column('prediction').null_count == 0\n"
            "status = open('/proc/self/status').read().split('VmHWM:')[1]\n"
            "print(int(status.split()[0]) // 1024)\n"
        )
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        return int(result.stdout.split()[-1])

    small, large = peak_mb(100_000), peak_mb(400_000)
    # 300,000 more rows grew it by 49 MB here; a prediction per row held 5.1 GB for 1,000,000
    # rows when the issue measured it.
    assert large - small < 400, f"peak RSS {small} MB for 100,000 rows, {large} MB for 400,000"


def test_an_unsupported_onnxruntime_release_is_named_and_not_used(tmp_path):
    """onnxruntime 1.20.1 was accepted silently; only the releases this build runs are used."""
    shadow = tmp_path / "shadow"
    capi = shadow / "onnxruntime" / "capi"
    capi.mkdir(parents=True)
    (shadow / "onnxruntime" / "__init__.py").write_text("")
    (capi / "libonnxruntime.so.1.20.1").write_bytes(b"not the supported release")
    dist = shadow / "onnxruntime-1.20.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: onnxruntime\nVersion: 1.20.1\n")
    script = (
        "import warnings, attention_classifier as ac\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    c = ac.Classifier()\n"
        "print(c.backend)\n"
        "print(' | '.join(str(w.message) for w in caught))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(shadow)}
    env.pop("ORT_DYLIB_PATH", None)
    result = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    backend, warned = result.stdout.splitlines()[:2]
    assert backend == "tract"
    assert "onnxruntime 1.20.1 is installed" in warned and "pip install onnxruntime==1.32.0" in warned, warned


def test_ctrl_c_stops_run_and_publishes_nothing(tmp_path):
    """SIGINT during run() raised KeyboardInterrupt only after the run had finished and
    published its output."""
    big = tmp_path / "big.parquet"
    pq.write_table(pa.concat_tables([pq.read_table(REVIEWS)] * 100), big)
    out = tmp_path / "out" / "predictions.parquet"
    out.parent.mkdir()
    work = f"ac.run({str(big)!r}, {str(out)!r}, chunk_rows=256)"
    assert _seconds_to_stop_on_ctrl_c("", work, 2.0) < 15
    assert os.listdir(out.parent) == [], "no output and no temporary left"
    # With the default chunks, the whole input is read before the first chunk is classified:
    # the stop must come from the stages after reading, and nothing may be published.
    small = tmp_path / "small.parquet"
    pq.write_table(pa.concat_tables([pq.read_table(REVIEWS)] * 20), small)
    work = f"ac.run({str(small)!r}, {str(out)!r})"
    assert _seconds_to_stop_on_ctrl_c("", work, 1.0) < 8
    assert os.listdir(out.parent) == [], "no output and no temporary left"


def test_arguments_of_the_wrong_type_are_named():
    for arguments, error, said in [
        (dict(batch_size="64"), TypeError, "batch_size="),
        (dict(threads=True), TypeError, "threads="),
        (dict(max_tokens=2**64), ac.PipelineError, "max_tokens="),
        (dict(text_column=5), TypeError, "text_column=5"),
    ]:
        with pytest.raises(error) as raised:
            ac.Classifier(**arguments)
        assert said in str(raised.value), raised.value
    with pytest.raises(TypeError) as raised:
        ac.run(str(REVIEWS), "never.parquet", chunk_rows="many")
    assert "chunk_rows=" in str(raised.value), raised.value


def test_the_old_name_of_chunk_rows_still_works_with_a_warning(tmp_path):
    with pytest.warns(DeprecationWarning, match="window= is now chunk_rows="):
        summary = ac.run(str(REVIEWS), str(tmp_path / "out.parquet"), window=100)
    assert summary["rows"] == 300, summary


def test_a_classifier_pickles_as_the_arguments_it_was_made_with():
    import pickle

    classifier = ac.Classifier(batch_size=16, attention="summary")
    table = pq.read_table(REVIEWS).slice(0, 20)
    copy = pickle.loads(pickle.dumps(classifier))
    assert copy.labels == classifier.labels
    assert copy.classify(table).column("prediction") == classifier.classify(table).column("prediction")
    assert copy.classify(table).column_names == classifier.classify(table).column_names
    assert copy._arguments == classifier._arguments, "the options travel too"



def test_errors_name_the_python_parameters_not_the_cli_flags():
    with pytest.raises(ac.PipelineError) as raised:
        ac.Classifier(long_documents="truncate", long_document_stride=10)
    assert "long_document_stride=" in str(raised.value) and "long_documents=" in str(raised.value)
    assert "--" not in str(raised.value), raised.value


def test_run_errors_name_the_python_parameters_too(tmp_path):
    out = tmp_path / "dataset"
    assert ac.run(str(REVIEWS), str(out) + "/", rows_per_part=100)["rows"] == 300
    with pytest.raises(ac.PipelineError) as raised:
        ac.run(str(REVIEWS), str(out) + "/", rows_per_part=100, attention="full")
    assert "overwrite=True" in str(raised.value) and "--overwrite" not in str(raised.value), raised.value


def test_run_partitions_a_dataset_as_pipeline_run_does(tmp_path):
    out = tmp_path / "dataset"
    summary = ac.run(str(REVIEWS), str(out) + "/", rows_per_part=100, partition_by="prediction")
    assert summary["rows"] == 300, summary
    directories = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert directories == ["prediction=neg", "prediction=pos"], directories
    parts = sorted(out.glob("prediction=*/part-*.parquet"))
    assert sum(pq.read_metadata(p).num_rows for p in parts) == 300
    assert "prediction" not in pq.read_schema(parts[0]).names
    with pytest.raises(ac.PipelineError) as raised:
        ac.run(str(REVIEWS), str(tmp_path / "other") + "/", partition_by=["confidence"])
    assert 'partition_by="confidence": its values are Float32' in str(raised.value), raised.value
    assert "--" not in str(raised.value), raised.value


def test_the_module_writes_nothing_into_home(tmp_path):
    """ONNX Runtime's telemetry (a device id and an event store under ~/.cache/Microsoft) stays
    off: classifying leaves the home directory with the model cache and nothing else."""
    script = (
        "import pyarrow.parquet as pq, attention_classifier as ac\n"
        "classifier = ac.Classifier()\n"
        f"print(classifier.backend, classifier.classify(pq.read_table({str(REVIEWS)!r})).num_rows)\n"
    )
    env = {key: value for key, value in os.environ.items() if key not in ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME")}
    done = subprocess.run([sys.executable, "-c", script], env={**env, "HOME": str(tmp_path)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ort-cpu", "300"]
    written = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*") if path.is_file())
    assert written and all(path.startswith(".cache/attention-classifier/models/") for path in written), written


def test_the_wheel_s_pipeline_trains_a_package_the_module_runs(pipeline_command, tmp_path):
    """Training ships in the wheel: `pipeline train` from the installed wheel writes a package
    that `Classifier` loads and runs."""
    package = tmp_path / "avg"
    trained = subprocess.run(
        [str(pipeline_command), "train", "--variant", "avg", "--train", str(REVIEWS.parent / "imdb-train-600.parquet"),
         "--out", str(package), "--embedding-dim", "8", "--mlp-hidden", "8", "--epochs", "1", "--max-tokens", "64",
         "--min-count", "2", "--seed", "7"],
        capture_output=True,
        text=True,
    )
    assert trained.returncode == 0, trained.stderr
    assert f"wrote {package}" in trained.stdout
    classifier = ac.Classifier(str(package))
    assert classifier.labels == ["neg", "pos"]
    predictions = classifier.classify(pq.read_table(REVIEWS)).column("prediction").to_pylist()
    assert len(predictions) == 300 and set(predictions) <= {"neg", "pos"}


def test_run_writes_a_delta_table_and_reports_as_pipeline_run_does(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENLINEAGE_URL", raising=False)
    table = tmp_path / "table"
    textfile = tmp_path / "pipeline.prom"
    summary = ac.run(str(REVIEWS), str(table), output_format="delta", metrics_textfile=str(textfile), job_name="daily")
    assert summary["parts"]["table"]["version"] == 1, summary
    assert (table / "_delta_log" / "00000000000000000001.json").is_file()
    assert 'pipeline_run_rows{job="daily",shard="0"} 300' in textfile.read_text()
    again = ac.run(str(REVIEWS), str(table), output_format="delta")
    assert again["parts"]["table"]["version"] is None, "the table held every part already"
    with pytest.raises(ac.PipelineError, match='output_format="iceberg": not one of: parquet, delta'):
        ac.run(str(REVIEWS), str(tmp_path / "other"), output_format="iceberg")


def test_tokens_reads_token_spans_for_one_row_or_whole_columns():
    spans = [1, -((1 << 32) + 6), (1 << 32) + 4]
    assert ac.tokens("A Zanuck film<br />was NOT bad", spans) == ["a", "[UNK]", "film"]
    with pytest.raises(ValueError, match="past the end of the text"):
        ac.tokens("tiny", [4, (1 << 32) + 3])
    columns = ac.tokens(pa.array(["Great film", None]), pa.array([[5, (1 << 32) + 4], [1]], pa.list_(pa.int64())))
    assert columns.to_pylist() == [["great", "film"], None]


# The flags of `pipeline run` that are no keyword of `run`, and why.
CLI_ONLY = {
    "help": "clap's own",
    "log_format": "the process's logs; Python has the logging module",
    "profile": "a printed profile of the stages, for a person at a terminal",
    "shards": "an array job's shard from the scheduler's environment; Python takes shard='I/N'",
}
# The keywords of `run` that are no flag of `pipeline run`, and why.
PYTHON_ONLY = {"ort_search_dirs": "where the wrapper finds the onnxruntime pip package"}


def test_every_option_of_pipeline_run_is_a_keyword_of_run_and_back(pipeline_command):
    help_text = subprocess.run([str(pipeline_command), "run", "--help"], capture_output=True, text=True, check=True).stdout
    flags = {flag.replace("-", "_") for flag in re.findall(r"^\s+(?:-\w, )?--([a-z0-9-]+)", help_text, re.M)}
    keywords = set(ac._native.RUN_KEYWORDS) | {"input", "output", "model"}
    assert flags - keywords == set(CLI_ONLY), "a flag of `pipeline run` that run() does not take: add it or say why"
    assert keywords - flags == set(PYTHON_ONLY), "a keyword of run() that `pipeline run` has no flag for"


def test_the_classifiers_signature_is_every_keyword_it_takes():
    signature = inspect.signature(ac.Classifier.__init__)
    named = {name for name, parameter in signature.parameters.items() if parameter.kind == parameter.KEYWORD_ONLY}
    assert named == set(ac._native.CLASSIFIER_KEYWORDS) - set(PYTHON_ONLY)
