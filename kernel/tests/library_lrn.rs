//! `library::lrn`: ONNX LRN against a reference of the documented order (squares, the window
//! sum in channel order per 128-channel block, `fl(fl(s·fl(α/size)) + bias)`, `pow`, the
//! division), within 1 ULP (the simulator's power is its own binary64 `pow` rounded once, the
//! reference's is the host's; they differ only by a double rounding), with windows crossing
//! channel blocks (C = 200), even and odd sizes, bf16 output; hazard-free.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_kernel::library::lrn::{LrnOpts, lrn};
use nrt_kernel::{DType, Kernel};
use refs::{cast, dec, enc, ulps};

#[test]
fn lrn_matches_onnx_order() {
    for (shape, size, dt) in [
        ([2usize, 7, 5, 6], 3usize, DType::F32),
        ([1, 200, 3, 4], 5, DType::F32),
        ([1, 130, 9, 70], 4, DType::Bf16),
    ] {
        let opts = LrnOpts {
            size,
            alpha: 1e-2,
            beta: 0.75,
            bias: 1.0,
        };
        let mut k = Kernel::new("lrn_test");
        let x = k.input("x", DType::F32, &shape).unwrap();
        let y = k.output("y", dt, &shape).unwrap();
        lrn(&mut k, &y, &x, &opts).unwrap();
        let p = k.build().unwrap();
        let n: usize = shape.iter().product();
        let mut rng = Rng(5);
        let xv: Vec<f32> = (0..n).map(|_| rng.unit() * 8.0).collect();
        let (outs, _) = run(&p, &[("x", enc(DType::F32, &xv))]);
        let got = dec(dt, output(&outs, "y"));
        let (c, l) = (shape[1], shape[2] * shape[3]);
        let (lo, hi) = ((size - 1) / 2, size - 1 - (size - 1) / 2);
        let scale = (f64::from(1e-2f32) / size as f64) as f32;
        for i in 0..n {
            let (img, ch, pos) = (i / (c * l), (i / l) % c, i % l);
            let first = ch.saturating_sub(lo);
            let last = (ch + hi).min(c - 1);
            // Per 128-channel block, then the block sums in order.
            let mut total = 0f32;
            let mut started = false;
            let mut b0 = first / 128 * 128;
            while b0 <= last {
                let mut s = 0f32;
                for j in first.max(b0)..=last.min(b0 + 127) {
                    let v = xv[(img * c + j) * l + pos];
                    s += v * v;
                }
                total = if started { total + s } else { s };
                started = true;
                b0 += 128;
            }
            let t = total * scale + 1.0;
            let pw = (f64::from(t).powf(0.75)) as f32;
            let want = cast(dt, xv[i] / pw);
            let d = if dt == DType::Bf16 {
                refs::ulps_bf16(got[i], want)
            } else {
                ulps(got[i], want)
            };
            assert!(
                d <= 1,
                "{shape:?} size {size}: y[{i}] {} vs {want} (x {} s {total} t {t} p {pw}, x/y {})",
                got[i],
                xv[i],
                xv[i] / got[i]
            );
        }
    }
}
