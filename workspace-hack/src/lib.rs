//! Empty on purpose: this crate exists for its `Cargo.toml`, which `cargo hakari generate`
//! keeps equal to the union of the features the workspace builds each dependency with.
