//! The kernel library's integration tests: one module per file of this folder, built into one
//! test binary (one compile of what they share and one link, instead of one per file). Each file
//! keeps its own `mod common;` / `mod refs;` (resolved in this folder, as before).
//!
//! One file's tests: `cargo test -p nrt-kernel --test suite -- library_gemm::`.

// Each file declares its shared helpers itself (`mod common;`), as it did as a binary of its own.
#![allow(clippy::duplicate_mod)]

#[path = "activation.rs"]
mod activation;
#[path = "alloc_errors.rs"]
mod alloc_errors;
#[path = "builders.rs"]
mod builders;
#[path = "elementwise.rs"]
mod elementwise;
#[path = "library_activation.rs"]
mod library_activation;
#[path = "library_attention.rs"]
mod library_attention;
#[path = "library_axes.rs"]
mod library_axes;
#[path = "library_chain.rs"]
mod library_chain;
#[path = "library_chnorm.rs"]
mod library_chnorm;
#[path = "library_conv.rs"]
mod library_conv;
#[path = "library_conv_cio.rs"]
mod library_conv_cio;
#[path = "library_conv_transpose.rs"]
mod library_conv_transpose;
#[path = "library_conv_transpose3d.rs"]
mod library_conv_transpose3d;
#[path = "library_data.rs"]
mod library_data;
#[path = "library_elementwise.rs"]
mod library_elementwise;
#[path = "library_gather.rs"]
mod library_gather;
#[path = "library_gemm.rs"]
mod library_gemm;
#[path = "library_lrn.rs"]
mod library_lrn;
#[path = "library_matmul.rs"]
mod library_matmul;
#[path = "library_norm.rs"]
mod library_norm;
#[path = "library_onnx_misuse.rs"]
mod library_onnx_misuse;
#[path = "library_onnx_sizes.rs"]
mod library_onnx_sizes;
#[path = "library_pointwise.rs"]
mod library_pointwise;
#[path = "library_pool.rs"]
mod library_pool;
#[path = "library_pool3d.rs"]
mod library_pool3d;
#[path = "library_pool_ext.rs"]
mod library_pool_ext;
#[path = "loops.rs"]
mod loops;
#[path = "matmul.rs"]
mod matmul;
#[path = "misuse.rs"]
mod misuse;
#[path = "ops_activation.rs"]
mod ops_activation;
#[path = "ops_data.rs"]
mod ops_data;
#[path = "ops_elementwise.rs"]
mod ops_elementwise;
#[path = "ops_engines.rs"]
mod ops_engines;
#[path = "ops_reduce.rs"]
mod ops_reduce;
#[path = "pipeline.rs"]
mod pipeline;
#[path = "reroll.rs"]
mod reroll;
#[path = "runtime.rs"]
mod runtime;
#[path = "sync.rs"]
mod sync;
