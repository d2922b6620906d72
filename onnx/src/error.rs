//! The import's one error type: every failure is one line naming what failed.

use core::fmt;

/// Where the supported operators are listed (named by every "unsupported" error).
pub const SUPPORTED_LIST: &str = "docs/ONNX.md, \"Supported operators\"";

/// An import, shape-inference or lowering failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The bytes are not an ONNX model (protobuf decoding, or a missing graph).
    Parse(String),
    /// The model is well-formed but inconsistent (a missing value, mismatched shapes, ...).
    Invalid(String),
    /// A node uses an operator or an attribute value this importer does not lower.
    Unsupported {
        /// The node's name (or `#index` when it has none).
        node: String,
        /// The node's operator (`domain:op` outside the default domain).
        op: String,
        /// What is unsupported.
        what: String,
    },
    /// The kernel library rejected a node's operands (or the kernel could not be built).
    Kernel(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Parse(m) => write!(f, "not an ONNX model: {m}"),
            Error::Invalid(m) => write!(f, "invalid model: {m}"),
            Error::Unsupported { node, op, what } => write!(
                f,
                "node '{node}' ({op}): unsupported: {what} (supported operators: {SUPPORTED_LIST})"
            ),
            Error::Kernel(m) => write!(f, "lowering failed: {m}"),
        }
    }
}

impl std::error::Error for Error {}

/// The crate's result type.
pub type Result<T> = core::result::Result<T, Error>;

/// `Err(Error::Invalid(format!(..)))`.
macro_rules! invalid {
    ($($t:tt)*) => { Err($crate::error::Error::Invalid(format!($($t)*))) };
}
pub(crate) use invalid;
