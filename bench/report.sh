#!/usr/bin/env bash
# `pipeline report` on the IMDB test predictions of the embedded default model: wall time and
# peak RSS, beside `pipeline sql` computing only the page's per-class token tables (one scan
# of the same attention columns), and the distinctive Table 4 with the stop-word check.
#   bench/report.sh [PREDICTIONS.parquet]   (default: made here from IMDB test)
set -euo pipefail
cd "$(dirname "$0")/.."
# The same build as the tests (`cargo test` resolves dev-dependency features too): a
# `--bins`-only build would resolve features differently and rebuild the workspace.
cargo test --release --workspace --no-run
bin="${CARGO_TARGET_DIR:-target}/release/pipeline"
work=target/bench/report
mkdir -p "$work"
predictions="${1:-$work/test-predictions.parquet}"
if [[ ! -f "$predictions" ]]; then
    "$bin" run --input ../shared/datasets/imdb/test.parquet --output "$predictions"
fi

timed() { # label, command...
    local label=$1
    shift
    /usr/bin/time -f "%e %M" -o "$work/time.txt" "$@" >"$work/out.txt"
    read -r seconds kib <"$work/time.txt"
    printf '%-44s %6.2f s  peak RSS %5.0f MiB\n' "$label" "$seconds" "$(echo "$kib / 1024" | bc -l)"
}

query="SELECT prediction, top_attended(tokens, attention_summary, 10) AS most_attended,
       distinctive_attended(tokens, attention_summary, 10) AS distinctive
       FROM '$predictions' GROUP BY prediction ORDER BY prediction"
timed "pipeline report (the whole page)" "$bin" report --input "$predictions" --output "$work/report.html"
timed "pipeline sql (per-class token tables only)" "$bin" sql --format csv "$query"
echo
cat "$work/out.txt"
echo
stop_words="the and a of is this to it in i"
python3 - "$work/out.txt" "$stop_words" <<'PY'
import csv, sys
stop = set(sys.argv[2].split())
for row in csv.DictReader(open(sys.argv[1])):
    top = row["distinctive"].strip("[]").split(", ")
    found = [t for t in top if t in stop]
    print(f"{row['prediction']}: distinctive top 10 has {len(found)} stop word(s) {found}")
PY
