//! The CLI's integration tests, in one test binary (one link instead of one
//! per file): a module per former `tests/*.rs` file, each running the real
//! `cwl` binary.

mod evict;
mod exit_codes;
mod help;
mod pipes;
mod proxy_process;
mod replay_many;
mod replay_model;
mod replicas_nginx;
