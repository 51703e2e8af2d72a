"""Classify a Parquet corpus with Ray Data: a pool of actors, each holding one Classifier.

    python ray_data.py --input reviews.parquet --output predictions/ [--model s3://bucket/models/san/] [--actors 2]

Each actor opens the model once (the class itself is the batch function) and classifies
pyarrow batches in place; `threads=1` because the actors already use the cores. Output: a
directory of Parquet files with the input's columns and those of `pipeline run`.
"""

import argparse
import time

import ray

import attention_classifier as ac


def classify(input: str, output: str, model: str | None = None, actors: int = 2, batch_size: int = 1024) -> int:
    """Writes the predictions of every row of `input` under `output`; returns the row count."""
    dataset = ray.data.read_parquet(input)
    predictions = dataset.map_batches(
        ac.Classifier,
        fn_constructor_kwargs={"model": model, "threads": 1},
        batch_format="pyarrow",
        batch_size=batch_size,
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_cpus=1,
    )
    predictions.write_parquet(output)
    return dataset.count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--model")
    parser.add_argument("--actors", type=int, default=2)
    args = parser.parse_args()
    # A local Ray on loopback (on a cluster, ray.init() joins it instead), with one logical CPU
    # more than the actors hold: the read and write tasks need one, or they wait for ever.
    ray.init(num_cpus=args.actors + 1, include_dashboard=False, log_to_driver=False)
    started = time.perf_counter()
    rows = classify(args.input, args.output, args.model, args.actors)
    seconds = time.perf_counter() - started
    print(f"ray data: {rows} rows in {seconds:.1f} s ({rows / seconds:.0f} docs/s) with {args.actors} actors")


if __name__ == "__main__":
    main()
