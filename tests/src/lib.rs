//! nrt-tests (work in progress).
