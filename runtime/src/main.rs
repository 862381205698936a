//! The `lowbit` command.
fn main() {}
