//! The `cwl` command.

fn main() {}
