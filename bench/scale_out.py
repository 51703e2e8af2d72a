"""Scale-out figures for `pipeline run` (docs/scale-out.md, "Scale out"), each beside its comparison in
the same run:

1. IMDB test into a dataset by one process, then by 4 shard processes at once (`--shard
   I/4`), on the same cores: total docs/s of each, and each process's peak RSS.
2. IMDB test read from an S3-compatible server on loopback (moto) against the same file read
   locally, both into a local dataset: docs/s of each.

    python3 bench/scale_out.py PIPELINE_BIN DATA.parquet WORK_DIR MOTO_PYTHON

`bench/scale_out.sh` builds the binary and installs the server, then calls this.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

pipeline, data, work, moto_python = sys.argv[1:5]
rows_per_part = os.environ.get("ROWS_PER_PART", "2500")


def timed_run(args, env=None):
    """Runs `pipeline run ARGS` under /usr/bin/time; returns (process, path of its stats)."""
    stats = os.path.join(work, f"time-{time.monotonic_ns()}.txt")
    command = ["/usr/bin/time", "-f", "%M %e", "-o", stats, pipeline, "run", *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), stats


def finish(process, stats):
    _, err = process.communicate()
    if process.returncode != 0:
        sys.exit(f"pipeline failed ({process.returncode}):\n{err.decode()[-2000:]}")
    rss_kib, seconds = open(stats).read().split()[-2:]
    return int(rss_kib) / 1024, float(seconds)


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    return path


def cpu_seconds(pid):
    """User + system CPU time a process has used so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rows_in(manifest_dir):
    with open(os.path.join(manifest_dir, "_SUCCESS")) as f:
        return json.load(f)["rows"]


common = ["--input", data, "--rows-per-part", rows_per_part]

# 1. One process, then four shards at once.
out = fresh(os.path.join(work, "single"))
start = time.monotonic()
rss, _ = finish(*timed_run(common + ["--output", out + "/"]))
single_seconds = time.monotonic() - start
rows = rows_in(out)
single = rows / single_seconds
print(f"one process:      {rows} rows in {single_seconds:.1f} s = {single:,.0f} docs/s, peak RSS {rss:.0f} MiB")

def four_shards(extra, label):
    out = fresh(os.path.join(work, "sharded"))
    start = time.monotonic()
    running = [timed_run(common + extra + ["--output", out + "/", "--shard", f"{i}/4"]) for i in range(4)]
    results = [finish(*r) for r in running]
    seconds = time.monotonic() - start
    assert rows_in(out) == rows, "the shards wrote a different number of rows"
    sharded = rows / seconds
    print(
        f"4 shards at once, {label}: {rows} rows in {seconds:.1f} s = {sharded:,.0f} docs/s, peak RSS per process "
        + ", ".join(f"{r:.0f}" for r, _ in results)
        + " MiB"
    )
    print(f"  ratio 4 shards / one process: {sharded / single:.2f}x")


# Each shard sizing itself to the whole machine, and each given its share of the cores (as a
# Kubernetes CPU limit would: the default thread count follows the cgroup's quota).
four_shards([], "default threads")
share = max(1, (os.cpu_count() or 1) // 4)
four_shards(["--threads", str(share)], f"--threads {share} each")

# 2. The same file from loopback S3.
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
server = subprocess.Popen(
    [moto_python, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
try:
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(endpoint, timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    subprocess.run(
        [moto_python, "-c", f"""
import boto3
s3 = boto3.client("s3", endpoint_url="{endpoint}", aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")
s3.create_bucket(Bucket="corpus")
s3.upload_file("{data}", "corpus", "imdb/test.parquet")
"""],
        check=True,
    )
    env = dict(
        os.environ,
        AWS_ENDPOINT_URL=endpoint,
        AWS_ALLOW_HTTP="true",
        AWS_ACCESS_KEY_ID="test",
        AWS_SECRET_ACCESS_KEY="test",
        AWS_REGION="us-east-1",
    )
    figures = {}
    for name, source in [("local file", data), ("loopback S3", "s3://corpus/imdb/test.parquet"), ("local file (again)", data)]:
        out = fresh(os.path.join(work, "from-" + name.split()[0]))
        start, server_cpu = time.monotonic(), cpu_seconds(server.pid)
        rss, _ = finish(*timed_run(["--input", source, "--rows-per-part", rows_per_part, "--output", out + "/"], env))
        seconds = time.monotonic() - start
        figures[name] = rows_in(out) / seconds
        print(
            f"read from {name}: {figures[name]:,.0f} docs/s, peak RSS {rss:.0f} MiB; "
            f"the S3 server used {cpu_seconds(server.pid) - server_cpu:.1f} CPU-s of the same cores"
        )
    local = (figures["local file"] + figures["local file (again)"]) / 2
    print(f"  ratio S3 / local (mean of the two local runs): {figures['loopback S3'] / local:.2f}x")

    # Both ends in the bucket: each part a multipart upload, committed as it completes.
    start, server_cpu = time.monotonic(), cpu_seconds(server.pid)
    rss, _ = finish(*timed_run(
        ["--input", "s3://corpus/imdb/test.parquet", "--rows-per-part", rows_per_part, "--output", "s3://corpus/out/"],
        env,
    ))
    seconds = time.monotonic() - start
    with urllib.request.urlopen(f"{endpoint}/corpus/out/_SUCCESS") as manifest:  # moto reads unsigned
        both = json.load(manifest)["rows"] / seconds
    print(
        f"read from and write to loopback S3: {both:,.0f} docs/s, peak RSS {rss:.0f} MiB; "
        f"the S3 server used {cpu_seconds(server.pid) - server_cpu:.1f} CPU-s of the same cores"
    )
    print(f"  ratio S3 both ways / local (mean of the two local runs): {both / local:.2f}x")
finally:
    server.terminate()
    server.wait()
