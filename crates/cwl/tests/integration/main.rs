//! The engine's integration tests, in one test binary (one link instead of
//! one per file): a module per former `tests/*.rs` file, sharing
//! [`common`] (a transcript builder, the token counter and the checks on a
//! view).

mod common;

mod checkpoint_compat;
mod conformance;
mod horizon;
mod openai;
mod plans;
mod properties;
mod tokenizer;
