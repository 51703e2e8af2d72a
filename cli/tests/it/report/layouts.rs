//! Outputs of every layout give one report: full, compact and older layouts, and datasets
//! whose parts were written before and after a column was added.

use arrow::array::ListBuilder;

use super::*;

/// Weights as bytes lose nothing the report shows: the same confusion matrix, the same tokens
/// per class and per hop up to near-equal neighbours, the same examples, the same
/// contributions.
#[test]
fn compact_predictions_give_the_report_of_full_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let compact = hops_predictions(dir.path());
    let full = full_predictions(dir.path());
    assert!(std::fs::metadata(&compact).expect("compact").len() * 3 < std::fs::metadata(&full).expect("full").len());
    let page = |predictions: &Path, name: &str| {
        let html_path = dir.path().join(name);
        let output = report(predictions, &html_path, &["--examples", "3"]);
        assert!(output.status.success(), "{}", stderr(&output));
        std::fs::read_to_string(&html_path).expect("report")
    };
    let (compact, full) = (page(&compact, "compact.html"), page(&full, "full.html"));
    let table = |html: &str, id: &str| -> String {
        let start = html.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no {id}"));
        html[start..].split("</table>").next().unwrap_or_default().to_owned()
    };
    assert_eq!(table(&compact, "confusion-matrix"), table(&full, "confusion-matrix"));
    // Token lists ranked by attention mass: bytes round each weight to 1/255 of its hop's
    // heaviest, which can reorder tokens of near-equal mass (the default model's hops, trained
    // without the penalty, spread their weight over many tokens) but not move one far.
    let lists = |html: &str, id: &str| -> Vec<Vec<String>> {
        table(html, id)
            .split("<td class=\"tokens\">")
            .skip(1)
            .map(|cell| cell.split('<').next().unwrap_or_default().split(", ").map(str::to_owned).collect())
            .collect()
    };
    for id in ["class-tokens", "hop-tokens"] {
        let (compact_lists, full_lists) = (lists(&compact, id), lists(&full, id));
        assert!(!full_lists.is_empty() && compact_lists.len() == full_lists.len(), "{id}");
        for (compact_list, full_list) in compact_lists.iter().zip(&full_lists) {
            let shared = compact_list.iter().filter(|t| full_list.contains(t)).count();
            assert!(shared + 2 >= full_list.len(), "{id}: {compact_list:?} vs {full_list:?}");
            for (rank, token) in compact_list.iter().enumerate() {
                if let Some(full_rank) = full_list.iter().position(|t| t == token) {
                    assert!(rank.abs_diff(full_rank) <= 3, "{id}: {token} at {rank} vs {full_rank}");
                }
            }
        }
    }
    // Each example's tokens, in the same order, with the same pushes to two decimals.
    let tokens = |html: &str| -> Vec<String> {
        let text =
            |span: &str| span.split_once('>').map(|(_, rest)| rest.split('<').next().unwrap_or_default().to_owned());
        html.split("class=\"tok\"").skip(1).filter_map(text).collect()
    };
    let (compact_tokens, full_tokens) = (tokens(&compact), tokens(&full));
    assert!(
        compact_tokens == full_tokens,
        "the examples differ ({} vs {} tokens)",
        compact_tokens.len(),
        full_tokens.len()
    );
    let pushes = |html: &str| -> Vec<f32> {
        html.split("data-push=\"").skip(1).filter_map(|s| s.split('"').next()?.parse().ok()).collect()
    };
    let (compact_pushes, full_pushes) = (pushes(&compact), pushes(&full));
    assert!(!full_pushes.is_empty(), "the default model explains its predictions");
    assert_eq!(compact_pushes.len(), full_pushes.len());
    let largest = compact_pushes.iter().zip(&full_pushes).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(largest <= 0.005, "pushes differ by up to {largest}");
}

/// The default output (token spans, no hop's own weights; #50) gives the report and the SQL
/// answers of the layout before it (token strings, every hop), whatever it left out.
#[test]
fn the_default_output_gives_the_report_and_sql_of_the_layout_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (default, before) = (default_predictions(dir.path()), hops_predictions(dir.path()));
    let columns = |path: &Path| {
        sql_last_line(
            path,
            "SELECT array_to_string(array_agg(column_name), ' ') FROM (SELECT column_name FROM information_schema.columns WHERE table_name = 'p')",
        )
    };
    assert!(
        columns(&default).contains("token_spans") && !columns(&default).contains("attention "),
        "{}",
        columns(&default)
    );
    assert!(columns(&before).contains("tokens") && !columns(&before).contains("token_spans"), "{}", columns(&before));
    // The README's queries and docs/sql.md's, each over both.
    let queries = [
        "SELECT id, top_tokens(tokens, attention_summary, 4) FROM p ORDER BY id",
        "SELECT prediction, top_attended(tokens, attention_summary, 20) FROM p GROUP BY prediction ORDER BY prediction",
        "SELECT prediction, distinctive_attended(tokens, attention_summary, 10) FROM p GROUP BY prediction ORDER BY prediction",
        "SELECT t, sum(x) FROM (SELECT unnest(tokens) AS t, unnest(contribution) * contribution_scale AS x FROM p) GROUP BY t ORDER BY 2 DESC, 1 LIMIT 20",
        "SELECT id, attention_html(tokens, attention_summary), contribution_html(tokens, contribution, contribution_scale) FROM p ORDER BY id",
    ];
    for query in queries {
        let whole = |path: &Path| {
            let sql = pipeline(
                &["sql", "--format", "csv", query],
                &[("--table", &PathBuf::from(format!("p={}", path.display())))],
            );
            assert!(sql.status.success(), "{query}: {}", stderr(&sql));
            String::from_utf8_lossy(&sql.stdout).into_owned()
        };
        let (answer, answer_before) = (whole(&default), whole(&before));
        assert!(answer.lines().count() > 1, "{query}: {answer}");
        let first_difference = answer.lines().zip(answer_before.lines()).find(|(a, b)| a != b);
        assert_eq!(first_difference, None, "{query}");
        assert_eq!(answer.lines().count(), answer_before.lines().count(), "{query}");
    }
    // The report: every section both have, alike to the byte.
    let page = |predictions: &Path, name: &str| {
        let html_path = dir.path().join(name);
        let output = report(predictions, &html_path, &["--examples", "3"]);
        assert!(output.status.success(), "{}", stderr(&output));
        std::fs::read_to_string(&html_path).expect("report")
    };
    let (default_page, before_page) = (page(&default, "default.html"), page(&before, "before.html"));
    let section = |html: &str, id: &str, end: &str| -> String {
        let start = html.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no {id}"));
        html[start..].split(end).next().unwrap_or_default().to_owned()
    };
    let sections = [("confusion-matrix", "</table>"), ("class-tokens", "</table>"), ("class-pushes", "</table>")];
    for (id, end) in sections {
        assert_eq!(section(&default_page, id, end), section(&before_page, id, end), "{id}");
    }
    // Each card's pushes and summed attention, token by token (the layout before also drew each
    // hop).
    let examples = |html: &str| {
        let maps = html.split("class=\"heatmap ").skip(1).filter(|map| !map.starts_with("hop"));
        maps.map(|map| map.split("</div>").next().unwrap_or_default().to_owned()).collect::<Vec<_>>()
    };
    assert!(examples(&default_page).len() > 4);
    assert_eq!(examples(&default_page), examples(&before_page));
    assert!(!default_page.contains("id=\"hop-tokens\"") && before_page.contains("id=\"hop-tokens\""));
}

/// The key-value metadata of the Parquet file at `path` (the run's: model, labels, encoding,
/// where the pushes point), without Arrow's schema, less the keys `drop` names.
fn run_metadata(path: &Path, drop: &[&str]) -> Vec<parquet::file::metadata::KeyValue> {
    let source = std::fs::File::open(path).expect("open");
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(source).expect("parquet");
    let metadata: Vec<parquet::file::metadata::KeyValue> = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|kv| kv.key != "ARROW:schema" && !drop.contains(&kv.key.as_str()))
        .collect();
    assert!(metadata.iter().any(|kv| kv.key == "model.sha256"), "{metadata:?}");
    metadata
}

/// Writes `batch` to `path` with `metadata` as the file's key-value metadata.
fn write_with_metadata(
    path: &Path,
    batch: &arrow::array::RecordBatch,
    metadata: Vec<parquet::file::metadata::KeyValue>,
) {
    let schema = Arc::new(batch.schema().as_ref().clone().with_metadata(Default::default()));
    let batch = arrow::array::RecordBatch::try_new(schema, batch.columns().to_vec()).expect("same columns");
    let properties =
        parquet::file::properties::WriterProperties::builder().set_key_value_metadata(Some(metadata)).build();
    let file = std::fs::File::create(path).expect("create");
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(properties)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

/// A dataset resumed across versions: a part written before `contribution_scale` beside one
/// with it. The report reads both and leaves the push table out, as for an old file alone.
#[test]
fn parts_with_and_without_contribution_scale_report_together_without_the_push_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let parts = dir.path().join("parts");
    std::fs::create_dir(&parts).expect("mkdir");
    let new = default_predictions(dir.path());
    std::fs::copy(&new, parts.join("part-00000.parquet")).expect("copy");
    let batch = read(&new);
    let keep: Vec<usize> =
        (0..batch.num_columns()).filter(|&i| batch.schema().field(i).name() != "contribution_scale").collect();
    let old = batch.project(&keep).expect("project");
    write_with_metadata(&parts.join("part-00001.parquet"), &old, run_metadata(&new, &[]));

    let html_path = dir.path().join("report.html");
    let output = report(&parts, &html_path, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let html = std::fs::read_to_string(&html_path).expect("report");
    assert!(html.contains("<th>rows</th><td class=\"num\">600</td>"), "both parts are read");
    assert!(!html.contains("id=\"class-pushes\""), "bytes without their scale are not logit units");
    // The new part alone has it.
    let output = report(&new, &html_path, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(std::fs::read_to_string(&html_path).expect("report").contains("id=\"class-pushes\""));
}

/// An output written before `pipeline.contribution_towards` holds each row's pushes towards
/// its prediction. The report turns both kinds towards each card's prediction, so the same
/// pushes give the same page; a table of the two kinds at once is refused, naming the key.
#[test]
fn pushes_towards_each_prediction_from_before_the_key_report_as_the_same_page() {
    use arrow::array::{Array, AsArray, Int8Builder};
    let dir = tempfile::tempdir().expect("tempdir");
    let new = default_predictions(dir.path());
    let batch = read(&new);
    let predictions = batch.column_by_name("prediction").expect("prediction").as_string::<i32>().clone();
    let pushes = batch.column_by_name("contribution").expect("contribution").as_list::<i32>().clone();
    // What the earlier version wrote: the pushes of `neg` rows the other way round.
    let mut flipped = ListBuilder::new(Int8Builder::new());
    for row in 0..batch.num_rows() {
        if pushes.is_null(row) {
            flipped.append_null();
            continue;
        }
        let sign: i8 = if predictions.value(row) == "neg" { -1 } else { 1 };
        let bytes = pushes.value(row);
        flipped.values().append_slice(
            &bytes.as_primitive::<arrow::datatypes::Int8Type>().values().iter().map(|b| sign * b).collect::<Vec<_>>(),
        );
        flipped.append(true);
    }
    let index = batch.schema().index_of("contribution").expect("contribution");
    let mut columns = batch.columns().to_vec();
    columns[index] = Arc::new(flipped.finish());
    let schema = batch.schema();
    let old = arrow::array::RecordBatch::try_new(schema, columns).expect("same schema");
    let old_path = dir.path().join("old.parquet");
    write_with_metadata(&old_path, &old, run_metadata(&new, &["pipeline.contribution_towards"]));

    let page = |input: &Path| {
        let html_path = dir.path().join("report.html");
        let output = report(input, &html_path, &[]);
        assert!(output.status.success(), "{}", stderr(&output));
        let html = std::fs::read_to_string(&html_path).expect("report");
        // From the push table on; the cards name their file, which differs.
        let from_pushes = html.split("id=\"class-pushes\"").nth(1).expect("a push table");
        from_pushes.replace(&input.file_name().expect("a file").to_string_lossy().to_string(), "FILE")
    };
    let (from_new, from_old) = (page(&new), page(&old_path));
    assert!(from_new.contains("towards <strong>pos</strong>"), "the legend names the class");
    if let Some(at) = from_new.bytes().zip(from_old.bytes()).position(|(a, b)| a != b) {
        let around = |page: &str| page.get(at.saturating_sub(200)..(at + 200).min(page.len())).unwrap_or("").to_owned();
        panic!("the pages differ at byte {at}:\n{}\nvs\n{}", around(&from_new), around(&from_old));
    }
    assert_eq!(from_new.len(), from_old.len(), "the same pushes, pointed two ways, draw one page");

    let parts = dir.path().join("parts");
    std::fs::create_dir(&parts).expect("mkdir");
    std::fs::copy(&new, parts.join("part-00000.parquet")).expect("copy");
    std::fs::copy(&old_path, parts.join("part-00001.parquet")).expect("copy");
    let output = report(&parts, &dir.path().join("mixed.html"), &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("pipeline.contribution_towards"), "{}", stderr(&output));
    assert!(!dir.path().join("mixed.html").exists(), "nothing written");

    // Through `pipeline sql --output`, which keeps the column and says where it points: the
    // same push table and the same pushes on the cards.
    let through_sql = dir.path().join("through-sql.parquet");
    let query = format!("SELECT * FROM '{}'", new.display());
    let sql = pipeline(&["sql", &query], &[("--output", &through_sql)]);
    assert!(sql.status.success(), "{}", stderr(&sql));
    let pushes_of = |html: &str| -> (String, Vec<String>) {
        let table = html.split("</table>").next().unwrap_or_default().to_owned();
        let pushes =
            html.split("data-push=\"").skip(1).filter_map(|s| s.split('"').next()).map(str::to_owned).collect();
        (table, pushes)
    };
    assert_eq!(pushes_of(&page(&through_sql)), pushes_of(&from_new), "pushes read back the same way round");

    // A label that is none of the model's would turn every card's pushes round: refused.
    let altered = dir.path().join("altered.parquet");
    let mut metadata = run_metadata(&new, &["pipeline.contribution_towards"]);
    metadata.push(parquet::file::metadata::KeyValue::new(
        "pipeline.contribution_towards".to_owned(),
        "label:positive".to_owned(),
    ));
    write_with_metadata(&altered, &batch, metadata);
    let output = report(&altered, &dir.path().join("altered.html"), &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("altered.parquet") && message.contains("`positive`"), "{message}");
    assert!(!dir.path().join("altered.html").exists(), "nothing written");
}

/// Spans whose text column is not named, or names no text, are left unread with a warning that
/// says why, never read from another column; `tokens(text, token_spans)` still reads them,
/// and a Parquet output of `pipeline sql` keeps the key that names their text.
#[test]
fn token_spans_without_their_text_column_are_named_not_misread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let predictions = default_predictions(dir.path());
    let batch = read(&predictions);
    let key = "pipeline.token_spans_text";
    // A copy by a tool that drops the Parquet metadata, and one whose key names a number.
    let lost = dir.path().join("lost.parquet");
    write_with_metadata(&lost, &batch, run_metadata(&predictions, &[key]));
    let number = dir.path().join("number.parquet");
    let mut metadata = run_metadata(&predictions, &[key]);
    metadata.push(parquet::file::metadata::KeyValue::new(key.to_owned(), "confidence".to_owned()));
    write_with_metadata(&number, &batch, metadata);
    for (file, why) in [(&lost, "no `pipeline.token_spans_text` key"), (&number, "is Float32, not text")] {
        let html = dir.path().join("page.html");
        let output = report(file, &html, &[]);
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(
            stderr(&output).contains("token_spans cannot be read") && stderr(&output).contains(why),
            "{}",
            stderr(&output)
        );
        assert!(!std::fs::read_to_string(&html).expect("report").contains("class=\"tok\""), "no tokens read");
    }
    let first_token =
        |path: &Path| sql_last_line(path, "SELECT tokens(text, token_spans)[1] FROM p ORDER BY id LIMIT 1");
    assert_eq!(first_token(&lost), first_token(&predictions));
    let copy = dir.path().join("copy.parquet");
    let sql = pipeline(
        &["sql", "SELECT id, text, token_spans FROM p", "--output", &copy.to_string_lossy()],
        &[("--table", &PathBuf::from(format!("p={}", predictions.display())))],
    );
    assert!(sql.status.success(), "{}", stderr(&sql));
    let tokens = |path: &Path| sql_last_line(path, "SELECT sum(array_length(tokens)) FROM p");
    assert_eq!(tokens(&copy), tokens(&predictions));
}
