//! The lab's integration tests, in one test binary (one link instead of
//! one per file): a module per former `tests/*.rs` file, sharing
//! [`lab_common`] (transcript builders and replay configurations) and
//! [`import_support`] (importer fixtures and checks).

mod import_support;
mod lab_common;

mod calibration;
mod calibration_props;
mod cli;
mod import;
mod import_props;
mod import_real;
mod import_wild;
mod judge;
mod policies;
mod replay;
mod replay_cli;
mod scale;
mod strategies;
mod sweep;
