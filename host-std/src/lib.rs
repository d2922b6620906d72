//! nrt-host (work in progress).
