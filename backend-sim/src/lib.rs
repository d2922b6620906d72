//! nrt-sim (work in progress).
