//! Self-GC's integration tests, in one test binary (one link instead of one
//! per file): a module per former `tests/*.rs` file.

mod expiry;
mod properties;
mod rehearsal;
mod strategy;
