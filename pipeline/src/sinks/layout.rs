//! How every output file of a run is laid out: its schema and its Parquet settings (which
//! columns are compressed, at what zstd level, with or without dictionaries), measured per
//! column on IMDB test (RESULTS.md, #14, #27, #34, #50).

use std::collections::BTreeMap;

use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowSchemaConverter;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::ArrowRowGroupWriterFactory;
use parquet::basic::{Compression, LogicalType, Type as PhysicalType, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use runtime::output::columns::{ATTENTION_ENTROPY, TOKEN_SPANS, TOKENS};

/// zstd's level for the columns that are compressed (passed-through columns, scalars).
const ZSTD_LEVEL: i32 = 6;
/// zstd's level for lists of bytes (`--attention compact`'s weights and pushes), `token_spans`
/// and the `tokens` strings: level 1 packs the bytes a little tighter than 6 (0.58 against 0.61
/// of their size on IMDB test's attention; 3.85 against 3.83 MB of spans) in a seventh of the
/// time, which was a fifth of the default run's CPU (#34). The token strings (dictionary
/// indices, which zstd barely shrinks) are 8 % larger than at 6 (11.67 against 10.83 MB on IMDB
/// test), and the fast tier writes them 14 % faster: level 6's search was a tenth of its CPU.
///
/// The signed pushes would be 10 % smaller at level 16 (2.66 against 2.95 MB on IMDB test:
/// most are 0 or ±1, and only zstd's optimal parser stops paying for short matches), but it
/// cost the default command 12 % of its docs/s and the fast tier 30 %, so they stay at 1
/// (#50; `bench/zstd_levels.py` measures the sizes).
const ZSTD_LEVEL_BYTES: i32 = 1;
/// zstd's level for the text column, the largest of the default output (half of it): 12 on
/// whole pages kept IMDB test's text 7 % smaller than 6 (#50), for about 1.5 s of one core
/// over the 25,000 reviews.
const ZSTD_LEVEL_TEXT: i32 = 12;
/// Pages of up to this many bytes: the text of a chunk in one page, which zstd compresses
/// better whole than in 1 MiB pieces (#50).
const PAGE_BYTES: usize = 8 << 20;

/// What the Parquet settings of a run's files depend on besides the schema.
#[derive(Debug, Clone, Default)]
pub struct LayoutHints {
    /// Most weights in the float lists are 0 (`--attention top-k:N`), which zstd squeezes to
    /// almost nothing, so they are compressed after all.
    pub sparse_floats: bool,
    /// The text column, when the files hold it: every value differs, so no dictionary.
    pub text_column: Option<String>,
}

/// How every output file of a run is laid out: its schema and its Parquet settings.
#[derive(Debug, Clone)]
pub struct ParquetLayout {
    schema: SchemaRef,
    properties: WriterProperties,
}

impl ParquetLayout {
    pub fn new(schema: SchemaRef, hints: &LayoutHints) -> anyhow::Result<Self> {
        let sorted: BTreeMap<&String, &String> = schema.metadata().iter().collect();
        let key_values: Vec<KeyValue> = sorted.into_iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect();
        let mut properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(ZSTD_LEVEL)?))
            .set_data_page_size_limit(PAGE_BYTES)
            .set_key_value_metadata(Some(key_values));
        // Float leaves (probabilities, attention, embeddings) almost never repeat a value: a
        // dictionary for them is built only to be thrown away, and page statistics of
        // weights help no reader. Both cost the write stage most of its time.
        let parquet_schema = ArrowSchemaConverter::new().convert(&schema)?;
        // Lists of floats (attention, probabilities, embeddings) are also left uncompressed:
        // zstd shrank the default model's attention by 4 % and cost the write stage about a
        // third of its time (RESULTS.md, #14).
        for column in parquet_schema.columns() {
            let name = column.path().parts().first().map(String::as_str);
            let list = column.max_rep_level() > 0;
            let bytes_or_tokens = matches!(column.logical_type_ref(), Some(LogicalType::Integer(int)) if int.bit_width == 8)
                || name == Some(TOKEN_SPANS.name)
                || name == Some(TOKENS.name);
            // Statistics of a list's items (the least and greatest token, push or weight of a
            // chunk) let no reader skip anything, and for strings they cost two comparisons a
            // token: a twentieth of the fast tier's time when its output holds the token strings.
            if list {
                properties = properties.set_column_statistics_enabled(column.path().clone(), EnabledStatistics::None);
            }
            if list && bytes_or_tokens {
                properties = properties.set_column_compression(
                    column.path().clone(),
                    Compression::ZSTD(ZstdLevel::try_new(ZSTD_LEVEL_BYTES)?),
                );
            }
            if column.physical_type() == PhysicalType::FLOAT {
                properties = properties.set_column_dictionary_enabled(column.path().clone(), false);
                if !list {
                    properties =
                        properties.set_column_statistics_enabled(column.path().clone(), EnabledStatistics::Chunk);
                }
                // A hop's entropies are a few values a row: compressing them costs nothing.
                if list && !hints.sparse_floats && name != Some(ATTENTION_ENTROPY.name) {
                    properties = properties.set_column_compression(column.path().clone(), Compression::UNCOMPRESSED);
                }
            }
        }
        if let Some(text) = hints.text_column.as_deref().filter(|text| schema.index_of(text).is_ok()) {
            let path = parquet::schema::types::ColumnPath::from(text);
            properties = properties
                .set_column_dictionary_enabled(path.clone(), false)
                .set_column_compression(path, Compression::ZSTD(ZstdLevel::try_new(ZSTD_LEVEL_TEXT)?));
        }
        Ok(Self { schema, properties: properties.build() })
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// A writer of one file in this layout into `sink`.
    pub fn file_writer<W: std::io::Write + Send>(&self, sink: W) -> anyhow::Result<ArrowWriter<W>> {
        Ok(ArrowWriter::try_new(sink, self.schema.clone(), Some(self.properties.clone()))?)
    }

    /// Makes the column writers of each row group. It holds only the schema and the settings,
    /// so one serves every file and part of the run; parquet makes it from a file writer, so
    /// it is taken from one that writes nowhere.
    pub fn row_group_encoder(&self) -> anyhow::Result<ArrowRowGroupWriterFactory> {
        let writer = ArrowWriter::try_new(std::io::sink(), self.schema.clone(), Some(self.properties.clone()))?;
        let (_, factory) = writer.into_serialized_writer()?;
        Ok(factory)
    }
}
