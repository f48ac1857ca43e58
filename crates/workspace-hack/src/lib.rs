//! No code. Cargo resolves dependency features over the packages it
//! builds; depending on this crate, `cwl-cli` and `cwl-py` built alone (as
//! maturin builds their wheels) get the features the whole workspace gets,
//! so CI's wheel builds reuse its test build instead of compiling most
//! dependencies again. The list is in this crate's `Cargo.toml`.
