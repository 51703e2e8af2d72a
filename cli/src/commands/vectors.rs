//! `pipeline vectors`: word vectors pre-trained on unlabelled texts, for `train --word-vectors`.

use std::path::{Path, PathBuf};

use batch_io::earlier_output::OutputKind;
use clap::Args;
use training::data::corpus::read_texts;
use training::data::vocabulary::VocabularyConfig;
use training::data::word_vectors::{WordVectorConfig, train_word_vectors};

use super::checked_output;

#[derive(Args)]
pub struct VectorArgs {
    /// Parquet corpora to learn from (repeat the flag for several), e.g. the unlabelled and
    /// the training reviews.
    #[arg(long, required = true)]
    corpus: Vec<PathBuf>,
    /// Output file, word2vec text format.
    #[arg(long)]
    out: PathBuf,
    /// Replace --out if it exists.
    #[arg(long)]
    force: bool,
    /// Column holding the text in every corpus.
    #[arg(long, default_value = "text")]
    text_column: String,
    #[command(flatten)]
    vocabulary: VocabularyConfig,
    #[command(flatten)]
    vectors: WordVectorConfig,
}

pub fn run(args: VectorArgs) -> anyhow::Result<()> {
    if args.out.exists() && !args.force {
        anyhow::bail!("{} already exists; pass --force to replace it", args.out.display());
    }
    let corpora: Vec<&Path> = args.corpus.iter().map(PathBuf::as_path).collect();
    let temp = checked_output("out", &args.out, &corpora, OutputKind::WordVectors)?;
    args.vectors.validate()?;
    let mut texts = Vec::new();
    for path in &args.corpus {
        texts.extend(read_texts(path, &args.text_column)?);
    }
    let vectors = train_word_vectors(&texts, &args.vocabulary, &args.vectors)?;
    vectors.write(temp.path())?;
    temp.publish(&args.out)?;
    batch_io::command_line::print_report(&format!(
        "wrote {} ({} words × {} dimensions from {} documents)\n",
        args.out.display(),
        vectors.words.len(),
        vectors.dim,
        texts.len()
    ))?;
    Ok(())
}
