//! A kernel library built on the tile-level API: each routine emits its operations into a
//! [`Kernel`](crate::Kernel) given HBM tensor views (so several can share one kernel), and
//! has a convenience builder that declares the tensors and returns the built
//! [`Program`](crate::Program).
//!
//! * [`attention`] — scaled-dot-product attention, one head or several, optionally causal;
//! * [`conv`] — 2-D convolution (NCHW, OIHW; stride, padding, dilation, groups, bias);
//! * [`pool`] — 2-D max and average pooling.

pub mod attention;
pub mod conv;
pub mod pool;
