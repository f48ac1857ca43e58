//! The proxy's integration tests, in one test binary (one link instead of
//! one per file): a module per former `tests/*.rs` file, sharing
//! [`support`] (a scripted upstream and a proxy in front of it) and
//! [`measure`] (recorded client traffic through the proxy, measured; the
//! `traffic` example reads it too).

mod measure;
mod support;

mod anthropic;
mod bounded;
mod expiry;
mod openai;
mod recall;
mod relay;
mod replicas;
mod restored;
mod routes;
mod side;
mod store;
mod strategy;
mod traffic;
