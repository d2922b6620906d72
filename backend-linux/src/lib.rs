//! nrt-linux (work in progress).
