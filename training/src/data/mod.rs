//! The data side of training: a labelled corpus read from Parquet, the vocabulary its
//! tokenizer is built from, the train/validation split, and word vectors pre-trained on
//! unlabelled text.

pub mod corpus;
pub mod split;
pub mod vocabulary;
pub mod word_vectors;
