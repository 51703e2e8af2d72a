#!/usr/bin/env bash
# A 6:4 re-split of IMDB's 50,000 labelled reviews, the protocol of Shetty et al. (Table I),
# so that HAN and NAL can be compared with their published figures on like terms.
#
# The official train and test folds are pooled and each review goes to the new train part when
# (k · 7919 + 1009) mod 12500 < 7500, where k is the review's number in its fold and label
# (ids look like `test_neg_123`). 7919 is prime to 12,500, so this is a fixed permutation of each
# fold × label group: 60 % of every group, 30,000 / 20,000 reviews, balanced, reproducible, and
# neighbouring numbers (often the same film) scattered over both parts.
#
#   bench/resplit.sh [OUT_DIR]     # default /tmp/imdb-resplit; writes train.parquet, test.parquet
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/imdb-resplit}
data=../shared/datasets/imdb
mkdir -p "$out"
# The same build as the tests (`cargo test` resolves dev-dependency features too): a
# `--bins`-only build would resolve features differently and rebuild the workspace.
cargo test --release --workspace --no-run --quiet
pipeline="${CARGO_TARGET_DIR:-target}/release/pipeline"
for part in "train:<" "test:>="; do
    name=${part%%:*}
    comparison=${part#*:}
    "$pipeline" sql "
        SELECT id, text, label, rating
        FROM (SELECT * FROM '$data/train.parquet' UNION ALL SELECT * FROM '$data/test.parquet')
        WHERE (CAST(split_part(id, '_', 3) AS BIGINT) * 7919 + 1009) % 12500 $comparison 7500
        ORDER BY id" --output "$out/$name.parquet" --format parquet
done
