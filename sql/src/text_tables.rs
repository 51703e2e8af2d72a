//! CSV, TSV and JSON Lines files as SQL tables, by the location's extension (`FROM
//! 'reviews.csv'`, `--table r=data/*.jsonl`), read by DataFusion's own readers as `pipeline
//! run` reads them: CSV columns as the text they hold (`CAST` them), JSON Lines with the types
//! of their first rows.

use std::sync::Arc;

use anyhow::{Context, bail};
use batch_io::inputs::{InputFiles, resolve_input_files};
use batch_io::object_storage::is_url;
use batch_io::text_formats::{INFER_ROWS, TextFormat, schema_of};
use datafusion::catalog::TableProvider;
use datafusion::datasource::listing::{ListingOptions, ListingTable, ListingTableConfig};
use datafusion::execution::SessionState;
use datafusion::execution::options::ReadOptions;
use datafusion::prelude::{CsvReadOptions, JsonReadOptions};

use batch_io::source::InputFile;

use crate::tables::table_urls;

/// The table over the text files at `location`, and the files; `None` where the location's
/// extension is not a text format's (Parquet, a Delta table, a directory).
pub async fn text_table(
    state: &SessionState,
    location: &str,
) -> anyhow::Result<Option<(Arc<dyn TableProvider>, InputFiles)>> {
    let Some(format) = TextFormat::of(location) else { return Ok(None) };
    if is_url(location) {
        bail!("{location} is {} in object storage; pipeline sql reads it from a local file only", format.name());
    }
    if format == TextFormat::Lines {
        bail!(
            "{location} is plain text, which pipeline run reads (a document per line) and pipeline sql does not; \
             classify it with pipeline run, or query it as CSV"
        );
    }
    let extension = location.rsplit_once('.').map(|(_, extension)| extension.to_owned()).unwrap_or_default();
    let owned = location.to_owned();
    // Listing the files and reading a CSV header are file I/O: off the query runtime's threads.
    let (input, text_columns) = tokio::task::spawn_blocking(move || {
        let input = resolve_input_files(&owned, &[extension.as_str()])?;
        let text_columns = match (format, input.files.first()) {
            (TextFormat::Csv { .. }, Some(InputFile::Local(first))) => Some(schema_of(first, format)?),
            _ => None,
        };
        anyhow::Ok((input, text_columns))
    })
    .await
    .context("listing a table's files failed")??;
    let options = match format {
        TextFormat::Csv { delimiter } => {
            let mut read = CsvReadOptions::new().has_header(true).delimiter(delimiter);
            if let Some(schema) = &text_columns {
                read = read.schema(schema);
            }
            listing_options(state, read)
        }
        _ => listing_options(state, JsonReadOptions::default().schema_infer_max_records(INFER_ROWS)),
    };
    let config = ListingTableConfig::new_with_multi_paths(table_urls(&input.files)?).with_listing_options(options);
    let config = match text_columns {
        Some(schema) => config.with_schema(schema),
        None => config
            .infer_schema(state)
            .await
            .with_context(|| format!("{location} is not readable as {}", format.name()))?,
    };
    Ok(Some((Arc::new(ListingTable::try_new(config)?), input)))
}

/// `read`'s listing options for files chosen already, whatever their extension.
fn listing_options<'a>(state: &SessionState, read: impl ReadOptions<'a>) -> ListingOptions {
    read.to_listing_options(state.config(), state.default_table_options()).with_file_extension("")
}
