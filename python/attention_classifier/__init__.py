"""Classify text with compact attention models, and read why.

    >>> import pyarrow as pa, attention_classifier as ac
    >>> classifier = ac.Classifier()              # the default IMDB model; or a package directory / s3:// prefix
    >>> out = classifier.classify(pa.table({"text": ["A wonderful film.", "Dull and far too long."]}))
    >>> out.column("prediction").to_pylist()
    ['pos', 'neg']

``Classifier.classify`` takes a ``pyarrow.Table`` or ``RecordBatch`` and returns its columns
followed by the columns ``pipeline run`` writes, row for row; ``tokens(text, token_spans)``
gives back the tokens that ``token_spans`` places in the text. ``run`` is ``pipeline run`` in
this process. Both use ONNX Runtime when the ``onnxruntime`` (or ``onnxruntime-gpu``) package
is installed beside this one, and tract (pure Rust, slower) when it is not.
"""

from __future__ import annotations

import importlib.util
import json
import numbers
import os
import re
import threading
import warnings
from typing import Any, Optional, Sequence, Union

import pyarrow as pa

# ONNX Runtime's Linux builds write a device id and an event store under
# ~/.cache/Microsoft/ on every session (and try to send them) unless this is set; the
# `pipeline` binary sets it the same way. Set before the library is loaded.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

from . import _native  # noqa: E402
from ._native import PipelineError, TransientError

__version__: str = _native.__version__
__all__ = ["Classifier", "run", "tokens", "PipelineError", "TransientError", "onnxruntime_dirs", "__version__"]

PathLike = Union[str, "os.PathLike[str]"]


def onnxruntime_dirs() -> list[str]:
    """The ``onnxruntime/capi`` directory of this environment's ``onnxruntime`` or
    ``onnxruntime-gpu`` package, where its shared library is; empty when neither is installed,
    or when the installed release is not one this build runs (a warning says which to install).
    Found without importing the package (which would load numpy and the library twice)."""
    spec = importlib.util.find_spec("onnxruntime")
    locations = list(spec.submodule_search_locations or []) if spec else []
    dirs = [os.path.join(location, "capi") for location in locations if os.path.isdir(os.path.join(location, "capi"))]
    if not dirs:
        return []
    installed = _installed_onnxruntime()
    if installed not in _native.SUPPORTED_ONNXRUNTIME:
        cpu, gpu = _native.SUPPORTED_ONNXRUNTIME
        warnings.warn(
            f"onnxruntime {installed or '(unknown version)'} is installed in {dirs[0]}, but this build runs "
            f"onnxruntime=={cpu} (or onnxruntime-gpu=={gpu}); it is not used, so classifying falls back to "
            f"tract. Install a supported release: pip install onnxruntime=={cpu}",
            RuntimeWarning,
            stacklevel=2,
        )
        return []
    return dirs


def _installed_onnxruntime() -> Optional[str]:
    """The version of the onnxruntime (or onnxruntime-gpu) distribution this environment imports."""
    import importlib.metadata

    for name in ("onnxruntime", "onnxruntime-gpu"):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _location(path: Optional[PathLike]) -> Optional[str]:
    return None if path is None else os.fspath(path)


#: The largest count the native module takes (an unsigned 64-bit integer).
_MOST = 2**64 - 1


def _counts(**values: Optional[int]) -> None:
    """Counts are whole numbers of at least 1; said here by name rather than as a bare
    TypeError or OverflowError from the comparison or the native module."""
    for name, value in values.items():
        if value is None:
            continue
        # bool is an int in Python: threads=True would silently mean 1. numpy's integers are
        # whole numbers too.
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name}= takes a whole number (int), not {type(value).__name__} {value!r}")
        if value < 1:
            raise PipelineError(f"{name}={value}: must be at least 1")
        if value > _MOST:
            raise PipelineError(f"{name}={value} is more than the largest count, {_MOST}")


_SHARED: dict = {}
_SHARED_LOCK = threading.Lock()


class Classifier:
    """A model package opened once, to classify many tables.

    ``model`` is a package directory, an object-storage prefix (``s3://bucket/models/san/``,
    downloaded once into a cache) or ``None`` for the default model. The other arguments are
    ``pipeline run``'s flags of the same names, with its defaults where left out (``None``):
    ``backend`` is ``auto`` (the default: ONNX Runtime if found, else tract), ``ort`` or
    ``tract``; ``long_documents`` is ``windows`` (the default), ``head-tail`` or ``truncate``;
    ``attention`` is ``compact`` (the default), ``hops`` (also every hop's weights), ``full``,
    ``summary``, ``top-k:N`` or ``none``; ``drop`` lists output columns to leave out
    (``["contribution"]``); ``batch_size`` is 64 on the CPU and 1,024 with ``device="cuda"``. ``min_confidence`` (a probability) leaves ``prediction`` null and sets
    ``abstained`` where the most probable class is less likely than it. ``threads`` sizes the process's worker pool (default: all cores), once per
    process.

    A ``Classifier`` is also a callable that takes a table, so Ray Data's ``map_batches`` can
    use the class itself with ``fn_constructor_kwargs``.
    """

    def __init__(
        self,
        model: Optional[PathLike] = None,
        *,
        backend: Optional[str] = None,
        device: Optional[str] = None,
        ort_library: Optional[PathLike] = None,
        tf32: bool = False,
        text_column: Optional[str] = None,
        batch_size: Optional[int] = None,
        max_tokens: Optional[int] = None,
        long_documents: Optional[str] = None,
        long_document_stride: Optional[int] = None,
        long_document_aggregate: Optional[str] = None,
        attention: Optional[str] = None,
        drop: Optional[Sequence[str]] = None,
        embedding: bool = False,
        min_confidence: Optional[float] = None,
        threads: Optional[int] = None,
    ) -> None:
        _counts(batch_size=batch_size, max_tokens=max_tokens, long_document_stride=long_document_stride, threads=threads)
        # Kept for pickling (`__reduce__`): the arguments as given, paths as strings.
        self._arguments = dict(
            model=_location(model),
            backend=backend,
            device=device,
            ort_library=_location(ort_library),
            tf32=tf32,
            text_column=text_column,
            batch_size=batch_size,
            max_tokens=max_tokens,
            long_documents=long_documents,
            long_document_stride=long_document_stride,
            long_document_aggregate=long_document_aggregate,
            attention=attention,
            drop=drop.split(",") if isinstance(drop, str) else None if drop is None else list(drop),
            embedding=embedding,
            min_confidence=min_confidence,
            threads=threads,
        )
        options = {name: value for name, value in self._arguments.items() if name != "model"}
        self._native = _native.Classifier(self._arguments["model"], ort_search_dirs=onnxruntime_dirs(), **options)

    @classmethod
    def shared(cls, model: Optional[PathLike] = None, **options: Any) -> "Classifier":
        """The one ``Classifier`` of this process for these arguments, opened on first use: for
        engines that call a function per task (Spark's ``mapInArrow``, Ray tasks), so that each
        worker process opens the model once rather than once per task."""
        # Lists (`drop=[...]`) as tuples, so that the arguments can key the cache.
        hashable = {name: tuple(value) if isinstance(value, (list, set)) else value for name, value in options.items()}
        key = (_location(model), tuple(sorted(hashable.items())))
        with _SHARED_LOCK:
            if key not in _SHARED:
                _SHARED[key] = cls(model, **options)
            return _SHARED[key]

    @property
    def labels(self) -> list[str]:
        """The classes, in the order of the ``probabilities`` column."""
        return self._native.labels

    @property
    def backend(self) -> str:
        """``tract``, ``ort-cpu`` or ``ort-cuda``."""
        return self._native.backend

    @property
    def model(self) -> str:
        """The model package's local directory."""
        return os.fspath(self._native.model)

    def classify(self, data: Union[pa.Table, pa.RecordBatch]) -> pa.Table:
        """``data``'s columns followed by the prediction columns, row for row. Rows whose text
        is null or has no tokens get nulls. Rows are classified a few thousand at a time
        (batches sorted by length within them), so memory holds the output and one such chunk;
        pass batches of thousands of rows rather than one at a time. The output's schema
        metadata names the model, its labels and the options, as ``pipeline run`` writes it."""
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        elif not isinstance(data, pa.Table):
            raise TypeError(
                f"classify takes a pyarrow.Table or pyarrow.RecordBatch, not {type(data).__name__}; "
                "convert a pandas DataFrame with pyarrow.Table.from_pandas(df)"
            )
        return self._native.classify(data)

    __call__ = classify

    def __repr__(self) -> str:
        return f"Classifier(model={self.model!r}, backend={self.backend!r}, labels={self.labels!r})"

    def __reduce__(self):
        """Pickled as the arguments it was made with (Ray, Spark and multiprocessing send
        objects to workers this way); each worker opens the model again from them."""
        return (_rebuild, (self._arguments,))


def _rebuild(arguments: dict) -> "Classifier":
    arguments = dict(arguments)
    model = arguments.pop("model", None)
    return Classifier(model, **arguments)


def run(input: str, output: str = "predictions.parquet", *, model: Optional[PathLike] = None, **options: Any) -> dict:
    """``pipeline run --input INPUT --output OUTPUT`` in this process, with ``pipeline run``'s
    other flags as keyword arguments (``text_column``, ``pass_through`` (a list),
    ``backend``, ``batch_size``, ``long_documents``, ``attention``, ``min_confidence``, ``shard`` (``"I/N"``),
    ``overwrite``, ``threads``, ...). Returns the run summary that ``--metrics-json`` writes.
    Raises ``TransientError`` where ``pipeline`` exits 75 (retry), ``PipelineError`` otherwise."""
    if "window" in options and options.get("chunk_rows") is not None:
        raise TypeError("run() got both window= and chunk_rows=; window= is chunk_rows='s old name: give chunk_rows= only")
    if "window" in options:
        _counts(window=options["window"])
        warnings.warn("window= is now chunk_rows= (rows read together, not token windows); the old name goes in "
                      "the next release", DeprecationWarning, stacklevel=2)
        options.setdefault("chunk_rows", options.pop("window"))
    _counts(**{name: options.get(name) for name in _native.COUNT_KEYWORDS})
    for listed in _native.LIST_KEYWORDS:
        if isinstance(options.get(listed), str):
            # As `--pass-through id,label`, `--drop attention,tokens` and `--partition-by a,b` read them.
            options[listed] = options[listed].split(",")
        elif options.get(listed) is not None and not isinstance(options[listed], list):
            # A tuple or a set of names, as Classifier takes them.
            options[listed] = list(options[listed])
    options.setdefault("ort_search_dirs", onnxruntime_dirs())
    if "ort_library" in options:
        options["ort_library"] = _location(options["ort_library"])
    summary = _native.run(os.fspath(input), os.fspath(output), model=_location(model), **options)
    return json.loads(summary)


_UNKNOWN_TOKEN = "[UNK]"
# A special token a tokenizer matches in the text as written: `[PAD]`, `<unk>`.
_SPECIAL_TOKEN = re.compile(r"\[[A-Z_/]+\]|<[a-z_/]+>")


def tokens(text, token_spans):
    """The tokens at ``token_spans`` in ``text``: what the model read, where ``pipeline run``
    wrote each token's place in the text instead of its string (docs/run.md, "Output table").

    Give one row's text (``str``) and spans (a list of int) for a list of ``str``, or the two
    columns (``pyarrow`` arrays or chunked arrays) for a ``list<string>`` array. Each span is
    ``gap * 2**32 + length`` in characters from the end of the token before, negative for a
    word the model did not know (``[UNK]``); a token reads as its characters lower-cased."""
    if isinstance(text, (pa.Array, pa.ChunkedArray)):
        columns = (pa.Array, pa.ChunkedArray)
        spans = token_spans if isinstance(token_spans, columns) else pa.array(token_spans)
        rows = zip(text.to_pylist(), spans.to_pylist())
        return pa.array([None if t is None or s is None else tokens(t, s) for t, s in rows], pa.list_(pa.string()))
    words = []
    end = 0
    for value in token_spans:
        magnitude = abs(value)
        start = end + (magnitude >> 32)
        end = start + (magnitude & 0xFFFFFFFF)
        if end > len(text):
            raise ValueError(f"token_spans reach past the end of the text (character {end}, of {len(text)}): give "
                             "the text column the output was written from")
        word = text[start:end]
        if value < 0:
            words.append(_UNKNOWN_TOKEN)
        elif _SPECIAL_TOKEN.fullmatch(word):
            words.append(word)
        else:
            # Character by character, as the tokenizer lower-cases.
            words.append("".join(c.lower() for c in word))
    return words
