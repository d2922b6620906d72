// The kernel guide, `docs/KERNELS.md`, as this module's documentation: its Rust blocks are
// this crate's doctests (`cargo test -p nrt-kernel --doc`), so the guide's code compiles and
// runs as shown; its shell blocks are run by `cli/tests/guide.rs`.
#![doc = include_str!("../../docs/KERNELS.md")]
