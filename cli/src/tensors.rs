//! Model tensors ↔ `.npy` / `.bin` files, and values for display.
//!
//! Element types map to NumPy types one to one, except `bfloat16`, which NumPy lacks: a
//! bfloat16 tensor is read from a `float32` array (each value rounded to nearest even) and
//! written as `float32` (exact). FP8 tensors are raw bytes (`uint8`).

use std::path::Path;

use nrt_core::io::{Dtype, TensorInfo};
use nrt_core::neff::dtype_str;
use nrt_sim::engine::{bf16_to_f32, f16_to_f32, f32_to_bf16};

use crate::error::{Context, Result, bail};
use crate::npy::{self, NpyArray};

/// The NumPy type string a tensor of `d` is stored as in `.npy` files.
pub(crate) fn npy_descr(d: Dtype) -> String {
    let (kind, size) = match d {
        Dtype::Float32 | Dtype::Fp32r | Dtype::Bfloat16 => ('f', 4),
        Dtype::Float16 => ('f', 2),
        Dtype::Int8 => ('i', 1),
        Dtype::Int16 => ('i', 2),
        Dtype::Int32 => ('i', 4),
        Dtype::Int64 => ('i', 8),
        Dtype::Uint16 => ('u', 2),
        Dtype::Uint32 => ('u', 4),
        Dtype::Uint64 => ('u', 8),
        Dtype::Uint8 | Dtype::Fp8E3 | Dtype::Fp8E4 | Dtype::Fp8E5 | Dtype::Unknown => ('u', 1),
    };
    npy::descr(kind, size)
}

/// Short name of a model element type (`bf16`, `fp32`, ... as NEFFs spell them).
pub(crate) fn dtype_name(d: Dtype) -> &'static str {
    match d {
        Dtype::Float32 => "fp32",
        Dtype::Bfloat16 => "bf16",
        Dtype::Float16 => "fp16",
        Dtype::Int32 => "int32",
        other => dtype_str(other),
    }
}

/// `[a, b, c]`.
pub(crate) fn shape_str<T: std::fmt::Display>(shape: &[T]) -> String {
    let parts: Vec<String> = shape.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

fn shape_u64(t: &TensorInfo) -> Vec<u64> {
    t.shape.iter().map(|&d| u64::from(d)).collect()
}

/// The tensor bytes for `t` from a parsed `.npy` array, after checking shape and type.
pub(crate) fn from_npy(t: &TensorInfo, a: &NpyArray, file: &str) -> Result<Vec<u8>> {
    let want_shape = shape_u64(t);
    // A 0-d array (a scalar, as ONNX models take them) is the one element of a `[1]` tensor:
    // NEFF tensors have at least one dimension.
    let scalar_for_one = a.shape.is_empty() && want_shape == [1];
    if a.shape != want_shape && !scalar_for_one {
        bail!(
            "input '{}': {file} has shape {}, the model expects {}",
            t.name,
            shape_str(&a.shape),
            shape_str(&want_shape)
        );
    }
    let want = npy_descr(t.dtype);
    if a.descr != want {
        let extra = if t.dtype == Dtype::Bfloat16 {
            " (bf16 tensors are read from float32 arrays)"
        } else {
            ""
        };
        bail!(
            "input '{}': {file} holds {}, the model expects {} for a {} tensor{extra}",
            t.name,
            npy::type_name(&a.descr),
            npy::type_name(&want),
            dtype_name(t.dtype)
        );
    }
    let bytes = if t.dtype == Dtype::Bfloat16 {
        a.data
            .chunks_exact(4)
            .flat_map(|c| {
                let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                f32_to_bf16(v).to_le_bytes()
            })
            .collect()
    } else {
        a.data.clone()
    };
    if bytes.len() as u64 != t.size {
        bail!(
            "input '{}': {file} gives {} bytes, the model's tensor has {} (its NEFF shape and \
             size disagree)",
            t.name,
            bytes.len(),
            t.size
        );
    }
    Ok(bytes)
}

/// Reads an input file: `.npy` (shape and type checked) or raw bytes (`.bin`, any other
/// extension: the size must match).
pub(crate) fn read_input(t: &TensorInfo, path: &Path) -> Result<Vec<u8>> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).context(|| format!("cannot read '{shown}'"))?;
    let is_npy = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"));
    if is_npy {
        let a =
            npy::parse(&bytes).map_err(|e| crate::error::CliError::new(format!("{shown}: {e}")))?;
        from_npy(t, &a, &shown)
    } else {
        if bytes.len() as u64 != t.size {
            bail!(
                "input '{}': {shown} has {} bytes, the model expects {} ({} {})",
                t.name,
                bytes.len(),
                t.size,
                dtype_name(t.dtype),
                shape_str(&t.shape)
            );
        }
        Ok(bytes)
    }
}

/// The `.npy` array of a tensor's bytes (bf16 widened to float32).
pub(crate) fn to_npy(t: &TensorInfo, bytes: &[u8]) -> NpyArray {
    let data = if t.dtype == Dtype::Bfloat16 {
        bytes
            .chunks_exact(2)
            .flat_map(|c| bf16_to_f32(u16::from_le_bytes([c[0], c[1]])).to_le_bytes())
            .collect()
    } else {
        bytes.to_vec()
    };
    let mut shape = shape_u64(t);
    let elem = u64::from(t.dtype.size().max(1));
    if shape.iter().product::<u64>().saturating_mul(elem) != bytes.len() as u64 {
        // A NEFF whose shape does not describe its bytes: save them flat.
        shape = vec![bytes.len() as u64 / elem];
    }
    NpyArray {
        descr: npy_descr(t.dtype),
        shape,
        data,
    }
}

/// Element values as f64 for display (`None` for types shown as raw bytes).
pub(crate) fn values(d: Dtype, bytes: &[u8]) -> Option<Vec<f64>> {
    macro_rules! le {
        ($t:ty, $n:expr) => {
            bytes
                .chunks_exact($n)
                .map(|c| {
                    let mut a = [0u8; $n];
                    a.copy_from_slice(c);
                    <$t>::from_le_bytes(a) as f64
                })
                .collect()
        };
    }
    Some(match d {
        Dtype::Float32 | Dtype::Fp32r => le!(f32, 4),
        Dtype::Float16 => bytes
            .chunks_exact(2)
            .map(|c| f64::from(f16_to_f32(u16::from_le_bytes([c[0], c[1]]))))
            .collect(),
        Dtype::Bfloat16 => bytes
            .chunks_exact(2)
            .map(|c| f64::from(bf16_to_f32(u16::from_le_bytes([c[0], c[1]]))))
            .collect(),
        Dtype::Int8 => le!(i8, 1),
        Dtype::Uint8 => le!(u8, 1),
        Dtype::Int16 => le!(i16, 2),
        Dtype::Uint16 => le!(u16, 2),
        Dtype::Int32 => le!(i32, 4),
        Dtype::Uint32 => le!(u32, 4),
        Dtype::Int64 => le!(i64, 8),
        Dtype::Uint64 => le!(u64, 8),
        Dtype::Fp8E3 | Dtype::Fp8E4 | Dtype::Fp8E5 | Dtype::Unknown => return None,
    })
}

/// A value as printed in summaries: integers plainly, floats with up to 6 significant digits.
pub(crate) fn fmt_value(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == v.trunc() && v.abs() < 1e15 {
        return format!("{v:.0}");
    }
    let s = format!("{v:.6}");
    let a = v.abs();
    if (1e-4..1e6).contains(&a) {
        // Six significant digits, trailing zeros trimmed.
        let digits = 6 - (a.log10().floor() as i32 + 1);
        let s = format!("{v:.*}", digits.clamp(0, 10) as usize);
        let s = s.trim_end_matches('0').trim_end_matches('.');
        return s.to_owned();
    }
    let _ = s;
    format!("{v:.5e}")
}

/// "first values …, min …, max …, mean …" of a tensor.
pub(crate) fn summary(d: Dtype, bytes: &[u8], first: usize) -> String {
    let Some(v) = values(d, bytes) else {
        return format!("{} bytes (raw)", bytes.len());
    };
    if v.is_empty() {
        return "empty".into();
    }
    let head: Vec<String> = v.iter().take(first).map(|&x| fmt_value(x)).collect();
    let more = if v.len() > first { ", …" } else { "" };
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    format!(
        "[{}{more}]  min {}  max {}  mean {}",
        head.join(", "),
        fmt_value(min),
        fmt_value(max),
        fmt_value(mean)
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn info(dtype: Dtype, shape: &[u32]) -> TensorInfo {
        TensorInfo {
            name: "x".into(),
            size: shape.iter().map(|&d| u64::from(d)).product::<u64>() * u64::from(dtype.size()),
            dtype,
            shape: shape.to_vec(),
        }
    }

    #[test]
    fn bf16_goes_through_float32() {
        let t = info(Dtype::Bfloat16, &[2]);
        let a = NpyArray {
            descr: "<f4".into(),
            shape: vec![2],
            data: [
                1.0f32,
                1.0 + 1.0 / 256.0, /* a tie: rounds to even, 1.0 */
            ]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        };
        let bytes = from_npy(&t, &a, "f.npy").unwrap();
        assert_eq!(bytes, [0x80, 0x3f, 0x80, 0x3f]);
        let back = to_npy(&t, &bytes);
        assert_eq!(back.descr, "<f4");
        assert_eq!(back.data[..4], 1f32.to_le_bytes());
    }

    #[test]
    fn checks_shape_and_type() {
        let t = info(Dtype::Float32, &[2, 3]);
        let a = NpyArray {
            descr: "<f8".into(),
            shape: vec![2, 3],
            data: vec![0; 48],
        };
        let e = from_npy(&t, &a, "f.npy").unwrap_err().to_string();
        assert!(
            e.contains("float64 (<f8)") && e.contains("float32 (<f4)"),
            "{e}"
        );
        let a = NpyArray {
            descr: "<f4".into(),
            shape: vec![3, 2],
            data: vec![0; 24],
        };
        let e = from_npy(&t, &a, "f.npy").unwrap_err().to_string();
        assert!(e.contains("shape [3, 2], the model expects [2, 3]"), "{e}");
    }

    #[test]
    fn a_scalar_array_fills_a_one_element_tensor_only() {
        let scalar = NpyArray {
            descr: "<f4".into(),
            shape: vec![],
            data: 2.5f32.to_le_bytes().to_vec(),
        };
        let one = info(Dtype::Float32, &[1]);
        assert_eq!(
            from_npy(&one, &scalar, "s.npy").unwrap(),
            2.5f32.to_le_bytes().to_vec()
        );
        let two = info(Dtype::Float32, &[2]);
        let e = from_npy(&two, &scalar, "s.npy").unwrap_err().to_string();
        assert!(e.contains("has shape [], the model expects [2]"), "{e}");
    }

    #[test]
    fn formats_values() {
        assert_eq!(fmt_value(3.0), "3");
        assert_eq!(fmt_value(0.15625), "0.15625");
        assert_eq!(fmt_value(-1.2890625), "-1.28906");
        assert_eq!(fmt_value(1234.5678), "1234.57");
        assert_eq!(fmt_value(1e-7), "1.00000e-7");
        assert_eq!(fmt_value(f64::NAN), "nan");
        let s = summary(Dtype::Int32, &[1, 0, 0, 0, 3, 0, 0, 0], 1);
        assert_eq!(s, "[1, …]  min 1  max 3  mean 2");
    }
}
