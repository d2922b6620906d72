//! nrt-capi (work in progress).
