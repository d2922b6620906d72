//! The crate's one `unsafe` call: the `gemm` crate's single-threaded f32 GEMM over slices
//! whose lengths are checked here. Everything else in `nrt-sim` is safe code.
#![allow(unsafe_code)]

/// `c[i][j] = Σ_k a[k][i] · b[k][j]` for `a` = `[k][m]`, `b` = `[k][n]` with rows `ldb ≥ n`
/// elements apart, `c` = `[m][n]`, all row-major, through the `gemm` crate (β = 0: `c`'s
/// previous contents are never read). [`gemm_into`] with `ldc = n`, not accumulating.
pub(super) fn gemm(
    a: &[f32],
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    k: usize,
    m: usize,
    n: usize,
) -> bool {
    gemm_into(a, b, ldb, c, n, k, m, n, false)
}

/// `c[i][j] (+)= Σ_k a[k][i] · b[k][j]` for `a` = `[k][m]`, `b` = `[k][n]` with rows `ldb ≥ n`
/// elements apart, `c`'s rows `ldc ≥ n` elements apart, all row-major, through the `gemm`
/// crate. Without `accumulate`, `c`'s previous contents are never read (the crate stores
/// `1·acc`); with it, each element becomes `c + acc`, one rounding (the crate's `read_dst`
/// epilogue with α = β = 1: both factors exact). Elements between rows are not touched.
/// Returns `false`, touching nothing, when an operand is shorter than its shape or a dimension
/// does not fit an `isize` stride.
///
/// For `k ≤ 512` the crate takes its whole depth as one block (`kc = min(k, ≥ 512)`), and its
/// micro-kernels keep one register accumulator per output element, zeroed, then fused
/// multiply-added in increasing k (plain multiply and add where the CPU has no FMA), and
/// only then combine it with the destination. That holds on the main path only:
/// for `k ≤ 2`, or `m` or `n` ≤ 1, the crate switches to vector–vector, matrix–vector or
/// horizontal (dot-product) kernels whose order differs, so the caller keeps those shapes off
/// this function (see `gemm_eligible` in the parent module), and `gemm_follows_rule` checks
/// the order, the fusion and the accumulation at first use.
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm_into(
    a: &[f32],
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    ldc: usize,
    k: usize,
    m: usize,
    n: usize,
    accumulate: bool,
) -> bool {
    if ldb < n || ldc < n {
        return false;
    }
    // `b`'s and `c`'s last rows need only their first `n` elements.
    let last_row = |rows: usize, ld: usize| match rows.checked_sub(1) {
        None => Some(0),
        Some(last) => last.checked_mul(ld).and_then(|x| x.checked_add(n)),
    };
    let (Some(km), Some(kl), Some(mn)) = (k.checked_mul(m), last_row(k, ldb), last_row(m, ldc))
    else {
        return false;
    };
    let (Some(a), Some(b), Some(c)) = (a.get(..km), b.get(..kl), c.get_mut(..mn)) else {
        return false;
    };
    let (Ok(ms), Ok(ls), Ok(lc)) = (
        isize::try_from(m),
        isize::try_from(ldb),
        isize::try_from(ldc),
    ) else {
        return false;
    };
    if isize::try_from(n).is_err() {
        return false;
    }
    if k == 0 || m == 0 || n == 0 {
        if !accumulate {
            for row in c.chunks_mut(ldc.max(1)) {
                row.iter_mut().take(n).for_each(|x| *x = 0.0);
            }
        }
        return true;
    }
    // The `gemm` facade crate normalises a call before handing it to its f32 kernel: it
    // transposes the product (C^T = B^T A^T) when the destination's column stride is the
    // smaller, which is the case here whenever ldc > 1. The call below makes that same
    // normalisation and calls the kernel with the arguments the facade would pass, so the
    // result is bit for bit the facade's.
    let kernel = gemm_f32::gemm::f32::get_gemm_fn();
    // SAFETY: the crate reads `lhs(i, kk) = a[kk·m + i]` (row stride 1, column stride m) for
    // i < m, kk < k, and `rhs(kk, j) = b[kk·ldb + j]` (row stride ldb, column stride 1) for
    // j < n ≤ ldb: the largest offsets, (k−1)·m + m−1 < k·m and (k−1)·ldb + n−1 <
    // (k−1)·ldb + n, lie inside the slices just bounded to exactly those lengths. It reads
    // (with `read_dst`) and writes `dst(i, j) = c[i·ldc + j]` (row stride ldc, column stride
    // 1) for i < m, j < n ≤ ldc, largest offset (m−1)·ldc + n−1, inside `c` (bounded to
    // (m−1)·ldc + n); `c` is a unique borrow and so aliases neither input. Transposed, the
    // same elements are reached with the roles of rows and columns swapped. Without
    // `read_dst`, `c`'s prior contents (any bits) are never read. `Parallelism::None` keeps
    // the call on this thread, so the borrows outlive every access. Strides fit `isize`
    // (checked above), all positive.
    unsafe {
        if 1 < lc {
            kernel(
                n,
                m,
                k,
                c.as_mut_ptr(),
                lc,
                1,
                accumulate,
                b.as_ptr(),
                ls,
                1,
                a.as_ptr(),
                1,
                ms,
                1.0f32,
                1.0f32,
                false,
                false,
                false,
                gemm_common::Parallelism::None,
            );
        } else {
            kernel(
                m,
                n,
                k,
                c.as_mut_ptr(),
                1,
                lc,
                accumulate,
                a.as_ptr(),
                ms,
                1,
                b.as_ptr(),
                1,
                ls,
                1.0f32,
                1.0f32,
                false,
                false,
                false,
                gemm_common::Parallelism::None,
            );
        }
    }
    true
}
