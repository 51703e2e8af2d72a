"""What a Delta table, metrics and lineage cost a run (docs/tables-metrics-lineage.md, "Tables, metrics and
lineage"), each beside its comparison in the same run:

1. IMDB test by 4 shards in turn (`--shard I/4`), into a Parquet dataset and into a Delta
   table, locally and on an S3-compatible server on loopback (moto): each shard's wall time
   and its Delta commit's own seconds (read from `--metrics-json`).
2. The OpenLineage events of one run (START and COMPLETE, caught by a loopback HTTP server):
   their size in bytes; and the Pushgateway text body's.

    python3 bench/lakehouse.py PIPELINE_BIN DATA.parquet WORK_DIR MOTO_PYTHON

`bench/lakehouse.sh` builds the binary and installs the server, then calls this.
"""

import http.server
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time

pipeline, data, work, moto_python = sys.argv[1:5]
SHARDS = 4


def run(args, env=None):
    """`pipeline run ARGS`; returns (wall seconds, the --metrics-json summary)."""
    summary = os.path.join(work, "summary.json")
    if os.path.exists(summary):
        os.remove(summary)
    started = time.monotonic()
    done = subprocess.run([pipeline, "run", *args, "--metrics-json", summary], env=env, capture_output=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"pipeline failed ({done.returncode}):\n{done.stderr.decode()[-2000:]}")
    with open(summary) as f:
        return seconds, json.load(f)


def shards(output, extra, env=None):
    """The 4 shards one after the other: [(wall seconds, commit seconds or None)]."""
    figures = []
    for index in range(SHARDS):
        seconds, summary = run(["--input", data, "--output", output, "--shard", f"{index}/{SHARDS}", *extra], env)
        table = (summary.get("parts") or {}).get("table")
        figures.append((seconds, table["seconds"] if table else None))
    return figures


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto():
    port = free_port()
    server = subprocess.Popen(
        [moto_python, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            break
        except OSError:
            time.sleep(0.1)
    env = dict(os.environ, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_ALLOW_HTTP="true",
               AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1")
    import urllib.request
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/bench", method="PUT")).read()
    return server, env


class Catch(http.server.BaseHTTPRequestHandler):
    bodies = []

    def do_POST(self):
        Catch.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.end_headers()

    do_PUT = do_POST

    def log_message(self, *args):
        pass


def describe(name, figures):
    walls = [w for w, _ in figures]
    commits = [c for _, c in figures if c is not None]
    line = f"{name:<28} shard wall s: median {statistics.median(walls):6.2f} (min {min(walls):.2f}, max {max(walls):.2f})"
    if commits:
        line += f"   commit s: median {statistics.median(commits):.3f} (min {min(commits):.3f}, max {max(commits):.3f})"
    print(line, flush=True)
    return statistics.median(walls)


os.makedirs(work, exist_ok=True)
local = os.path.join(work, "local")
shutil.rmtree(local, ignore_errors=True)
os.makedirs(local)
print(f"IMDB test ({data}), {SHARDS} shards in turn, default model, this machine's cores\n")
parquet = describe("local Parquet dataset", shards(os.path.join(local, "dataset"), []))
delta = describe("local Delta table", shards(os.path.join(local, "table"), ["--output-format", "delta"]))
again = describe("local Delta, rerun (no-op)", shards(os.path.join(local, "table"), ["--output-format", "delta"]))
server, env = start_moto()
try:
    s3_parquet = describe("S3 (moto) Parquet dataset", shards("s3://bench/dataset/", [], env))
    s3_delta = describe("S3 (moto) Delta table", shards("s3://bench/table/", ["--output-format", "delta"], env))
finally:
    server.kill()
print(f"\nDelta against Parquet, median shard wall time: local {delta / parquet:.3f}x, S3 {s3_delta / s3_parquet:.3f}x")

catcher = http.server.HTTPServer(("127.0.0.1", 0), Catch)
threading.Thread(target=catcher.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{catcher.server_address[1]}"
run(["--input", data, "--output", os.path.join(local, "lineage.parquet"), "--openlineage-url", url,
     "--metrics-push", url, "--pass-through", "id"])
catcher.shutdown()
for body in Catch.bodies:
    try:
        kind = json.loads(body)["eventType"] + " event"
    except ValueError:
        kind = "Pushgateway body"
    print(f"{kind:<18} {len(body):6d} bytes")
