//! The crate's one `unsafe` call: the `gemm` crate's single-threaded f32 GEMM over slices
//! whose lengths are checked here. Everything else in `nrt-sim` is safe code.
#![allow(unsafe_code)]

/// `c[i][j] = Σ_k a[k][i] · b[k][j]` for `a` = `[k][m]`, `b` = `[k][n]` with rows `ldb ≥ n`
/// elements apart, `c` = `[m][n]`, all row-major, through the `gemm` crate (β = 0: `c`'s
/// previous contents are never read).
/// Returns `false`, touching nothing, when an operand is shorter than its shape or a dimension
/// does not fit an `isize` stride.
///
/// For `k ≤ 512` the crate takes its whole depth as one block (`kc = min(k, ≥ 512)`), and its
/// micro-kernels keep one register accumulator per output element, zeroed, then fused
/// multiply-added in increasing k (plain multiply and add where the CPU has no FMA), and
/// store `1·acc` (`alpha` is ignored without `read_dst`). That holds on the main path only:
/// for `k ≤ 2`, or `m` or `n` ≤ 1, the crate switches to vector–vector, matrix–vector or
/// horizontal (dot-product) kernels whose order differs, so the caller keeps those shapes off
/// this function (see `gemm_eligible` in the parent module), and `gemm_is_sequential` checks
/// the order at first use.
pub(super) fn gemm(
    a: &[f32],
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    k: usize,
    m: usize,
    n: usize,
) -> bool {
    if ldb < n {
        return false;
    }
    // `b`'s last row needs only its first `n` elements.
    let kl = match k.checked_sub(1) {
        None => Some(0),
        Some(last) => last.checked_mul(ldb).and_then(|x| x.checked_add(n)),
    };
    let (Some(km), Some(kl), Some(mn)) = (k.checked_mul(m), kl, m.checked_mul(n)) else {
        return false;
    };
    let (Some(a), Some(b), Some(c)) = (a.get(..km), b.get(..kl), c.get_mut(..mn)) else {
        return false;
    };
    let (Ok(ms), Ok(ns), Ok(ls)) = (isize::try_from(m), isize::try_from(n), isize::try_from(ldb))
    else {
        return false;
    };
    if k == 0 || m == 0 || n == 0 {
        c.fill(0.0);
        return true;
    }
    // SAFETY: the crate reads `lhs(i, kk) = a[kk·m + i]` (row stride 1, column stride m) for
    // i < m, kk < k, and `rhs(kk, j) = b[kk·ldb + j]` (row stride ldb, column stride 1) for
    // j < n ≤ ldb: the largest offsets, (k−1)·m + m−1 < k·m and (k−1)·ldb + n−1 <
    // (k−1)·ldb + n, lie inside the slices just bounded to exactly those lengths. It writes `dst(i, j) = c[i·n + j]` (row stride n,
    // column stride 1), largest offset (m−1)·n + n−1 < m·n, inside `c`, which is a unique
    // borrow and so aliases neither input. `read_dst = false`, so `c`'s prior contents (any
    // bits) are never read. `Parallelism::None` keeps the call on this thread, so the borrows
    // outlive every access. Strides fit `isize` (checked above).
    unsafe {
        ::gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            ns,
            false,
            a.as_ptr(),
            ms,
            1,
            b.as_ptr(),
            1,
            ls,
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            ::gemm::Parallelism::None,
        );
    }
    true
}
