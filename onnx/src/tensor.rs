//! Host tensors: initializers, constants and folded values, with their ONNX element type.

use crate::error::{Result, invalid};
use crate::proto::{TensorProto, data_type as dt};

/// An ONNX element type this importer handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    /// `FLOAT`.
    F32,
    /// `DOUBLE` (held as f64 on the host; lowered as fp32).
    F64,
    /// `FLOAT16`.
    F16,
    /// `BFLOAT16`.
    Bf16,
    /// `INT64`.
    I64,
    /// `INT32`.
    I32,
    /// `INT16`, `INT8`, `UINT8`, `UINT16`, `UINT32`, `UINT64` (host constants only).
    OtherInt(i32),
    /// `BOOL`.
    Bool,
}

impl Elem {
    /// From a `TensorProto.DataType` code.
    pub fn from_code(code: i32) -> Option<Elem> {
        Some(match code {
            dt::FLOAT => Elem::F32,
            dt::DOUBLE => Elem::F64,
            dt::FLOAT16 => Elem::F16,
            dt::BFLOAT16 => Elem::Bf16,
            dt::INT64 => Elem::I64,
            dt::INT32 => Elem::I32,
            dt::BOOL => Elem::Bool,
            dt::UINT8 | dt::INT8 | dt::UINT16 | dt::INT16 | dt::UINT32 | dt::UINT64 => {
                Elem::OtherInt(code)
            }
            _ => return None,
        })
    }

    /// Whether the type is a floating-point one.
    pub fn is_float(self) -> bool {
        matches!(self, Elem::F32 | Elem::F64 | Elem::F16 | Elem::Bf16)
    }

    /// Bytes per element (as ONNX stores it: `bool` one byte).
    pub fn size(self) -> usize {
        match self {
            Elem::F32 | Elem::I32 | Elem::OtherInt(dt::UINT32) => 4,
            Elem::F64 | Elem::I64 => 8,
            Elem::F16 | Elem::Bf16 => 2,
            Elem::Bool | Elem::OtherInt(dt::UINT8 | dt::INT8) => 1,
            Elem::OtherInt(dt::UINT16 | dt::INT16) => 2,
            Elem::OtherInt(_) => 8,
        }
    }

    /// The smallest and largest value of an integer type as i64 (`bool`: 0 and 1; `uint64`:
    /// 0 and `i64::MAX`, the values an i64 holds); `None` for float types.
    pub fn int_range(self) -> Option<(i64, i64)> {
        Some(match self {
            Elem::Bool => (0, 1),
            Elem::I32 => (i64::from(i32::MIN), i64::from(i32::MAX)),
            Elem::OtherInt(dt::UINT8) => (0, i64::from(u8::MAX)),
            Elem::OtherInt(dt::INT8) => (i64::from(i8::MIN), i64::from(i8::MAX)),
            Elem::OtherInt(dt::UINT16) => (0, i64::from(u16::MAX)),
            Elem::OtherInt(dt::INT16) => (i64::from(i16::MIN), i64::from(i16::MAX)),
            Elem::OtherInt(dt::UINT32) => (0, i64::from(u32::MAX)),
            Elem::I64 => (i64::MIN, i64::MAX),
            Elem::OtherInt(_) => (0, i64::MAX),
            _ => return None,
        })
    }

    /// The ONNX name.
    pub fn name(self) -> &'static str {
        match self {
            Elem::F32 => "float32",
            Elem::F64 => "float64",
            Elem::F16 => "float16",
            Elem::Bf16 => "bfloat16",
            Elem::I64 => "int64",
            Elem::I32 => "int32",
            Elem::OtherInt(dt::UINT8) => "uint8",
            Elem::OtherInt(dt::INT8) => "int8",
            Elem::OtherInt(dt::UINT16) => "uint16",
            Elem::OtherInt(dt::INT16) => "int16",
            Elem::OtherInt(dt::UINT32) => "uint32",
            Elem::OtherInt(_) => "uint64",
            Elem::Bool => "bool",
        }
    }
}

/// The elements of a host tensor: floats as f64 (exact for every float type), integers
/// and booleans as i64.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    /// Floating-point elements.
    F(Vec<f64>),
    /// Integer and boolean elements.
    I(Vec<i64>),
}

/// A tensor held on the host.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    /// Element type.
    pub elem: Elem,
    /// Shape (empty: a scalar).
    pub shape: Vec<usize>,
    /// Elements, row-major.
    pub data: Data,
}

/// The number of elements of `shape`, or `None` on overflow.
pub(crate) fn numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

/// At most this many elements in one tensor (4 GiB of fp32).
pub(crate) const MAX_ELEMS: usize = 1 << 30;

impl HostTensor {
    /// A float tensor.
    pub fn floats(elem: Elem, shape: Vec<usize>, v: Vec<f64>) -> HostTensor {
        HostTensor {
            elem,
            shape,
            data: Data::F(v),
        }
    }

    /// An integer tensor.
    pub fn ints(elem: Elem, shape: Vec<usize>, v: Vec<i64>) -> HostTensor {
        HostTensor {
            elem,
            shape,
            data: Data::I(v),
        }
    }

    /// Elements as f64.
    pub fn as_f64(&self) -> Vec<f64> {
        match &self.data {
            Data::F(v) => v.clone(),
            Data::I(v) => v.iter().map(|&x| x as f64).collect(),
        }
    }

    /// Elements as i64 (floats truncated toward zero).
    pub fn as_i64(&self) -> Vec<i64> {
        match &self.data {
            Data::F(v) => v.iter().map(|&x| x as i64).collect(),
            Data::I(v) => v.clone(),
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match &self.data {
            Data::F(v) => v.len(),
            Data::I(v) => v.len(),
        }
    }

    /// The elements as ONNX stores them, little-endian, for an integer or boolean tensor:
    /// each value wrapped to the type's width (two's complement, as NumPy's integer
    /// arithmetic wraps), booleans 0 or 1; floats held for an integer type are truncated
    /// toward zero first. `None` for float types.
    pub fn int_bytes(&self) -> Option<Vec<u8>> {
        self.elem.int_range()?;
        let size = self.elem.size();
        let mut out = Vec::with_capacity(self.len() * size);
        for x in self.as_i64() {
            let x = if self.elem == Elem::Bool {
                i64::from(x != 0)
            } else {
                x
            };
            out.extend_from_slice(&x.to_le_bytes()[..size]);
        }
        Some(out)
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decodes a `TensorProto` (`what` names it in errors).
    pub fn from_proto(t: &TensorProto, what: &str) -> Result<HostTensor> {
        let code = t.data_type.unwrap_or(0);
        let Some(elem) = Elem::from_code(code) else {
            return invalid!("{what}: unsupported element type {code}");
        };
        if t.data_location == Some(1) {
            return invalid!(
                "{what}: external data is not supported (save the model with its weights inside)"
            );
        }
        let mut shape = Vec::with_capacity(t.dims.len());
        for &d in &t.dims {
            let Ok(d) = usize::try_from(d) else {
                return invalid!("{what}: negative dimension {d}");
            };
            shape.push(d);
        }
        let n = match numel(&shape) {
            Some(n) if n <= MAX_ELEMS => n,
            _ => return invalid!("{what}: too many elements"),
        };
        let data = match &t.raw_data {
            Some(raw) if !raw.is_empty() || n == 0 => decode_raw(elem, raw, n, what)?,
            _ => decode_typed(elem, t),
        };
        let got = match &data {
            Data::F(v) => v.len(),
            Data::I(v) => v.len(),
        };
        if got != n {
            return invalid!(
                "{what}: {got} elements for the shape {:?} ({n} expected)",
                shape
            );
        }
        Ok(HostTensor { elem, shape, data })
    }
}

fn decode_raw(elem: Elem, raw: &[u8], n: usize, what: &str) -> Result<Data> {
    let size = match elem {
        Elem::F32 | Elem::I32 => 4,
        Elem::F64 | Elem::I64 => 8,
        Elem::F16 | Elem::Bf16 => 2,
        Elem::Bool => 1,
        Elem::OtherInt(c) => match c {
            dt::UINT8 | dt::INT8 => 1,
            dt::UINT16 | dt::INT16 => 2,
            dt::UINT32 => 4,
            _ => 8,
        },
    };
    if Some(raw.len()) != n.checked_mul(size) {
        return invalid!(
            "{what}: raw data is {} bytes, {n} elements of {} need {}",
            raw.len(),
            elem.name(),
            n.saturating_mul(size)
        );
    }
    let c = raw.chunks_exact(size);
    let le = |b: &[u8]| {
        let mut a = [0u8; 8];
        a[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(a)
    };
    Ok(match elem {
        Elem::F32 => Data::F(c.map(|b| f64::from(f32::from_bits(le(b) as u32))).collect()),
        Elem::F64 => Data::F(c.map(|b| f64::from_bits(le(b))).collect()),
        Elem::F16 => Data::F(c.map(|b| f16_to_f64(le(b) as u16)).collect()),
        Elem::Bf16 => Data::F(
            c.map(|b| f64::from(f32::from_bits((le(b) as u32) << 16)))
                .collect(),
        ),
        Elem::I64 => Data::I(c.map(|b| le(b) as i64).collect()),
        Elem::I32 => Data::I(c.map(|b| i64::from(le(b) as u32 as i32)).collect()),
        Elem::Bool => Data::I(c.map(|b| i64::from(le(b) != 0)).collect()),
        Elem::OtherInt(code) => Data::I(
            c.map(|b| {
                let v = le(b);
                match code {
                    dt::INT8 => i64::from(v as u8 as i8),
                    dt::INT16 => i64::from(v as u16 as i16),
                    _ => v as i64,
                }
            })
            .collect(),
        ),
    })
}

fn decode_typed(elem: Elem, t: &TensorProto) -> Data {
    match elem {
        Elem::F32 => Data::F(t.float_data.iter().map(|&x| f64::from(x)).collect()),
        Elem::F64 => Data::F(t.double_data.clone()),
        // float16 and bfloat16 are stored as their bits in int32_data.
        Elem::F16 => Data::F(t.int32_data.iter().map(|&x| f16_to_f64(x as u16)).collect()),
        Elem::Bf16 => Data::F(
            t.int32_data
                .iter()
                .map(|&x| f64::from(f32::from_bits((x as u32 & 0xffff) << 16)))
                .collect(),
        ),
        Elem::I64 => Data::I(t.int64_data.clone()),
        Elem::OtherInt(dt::UINT32) | Elem::OtherInt(dt::UINT64) => {
            Data::I(t.uint64_data.iter().map(|&x| x as i64).collect())
        }
        Elem::I32 | Elem::Bool | Elem::OtherInt(_) => {
            Data::I(t.int32_data.iter().map(|&x| i64::from(x)).collect())
        }
    }
}

/// IEEE binary16 bits to f64 (exact).
pub(crate) fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f64::from(h & 0x3ff);
    match exp {
        0 => sign * frac * 2f64.powi(-24),
        31 if frac == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        e => sign * (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}
