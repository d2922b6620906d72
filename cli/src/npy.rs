//! `.npy` files: the header through `npyz`, the data as raw little-endian C-order bytes, so
//! every element type (including `float16`) is handled the same way without conversions.

use npyz::{DType, Endianness, NpyFile, Order, TypeChar, WriteOptions, WriterBuilder};

/// An array read from (or to be written to) a `.npy` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NpyArray {
    /// Normalised NumPy type string: `<` + kind + size (`<f4`, `<i4`), or `|` + kind + `1`
    /// for one-byte types (`|i1`, `|u1`, `|b1`).
    pub(crate) descr: String,
    /// Shape (row-major).
    pub(crate) shape: Vec<u64>,
    /// Elements, little-endian, C order.
    pub(crate) data: Vec<u8>,
}

/// The normalised type string of a kind character and an element size.
pub(crate) fn descr(kind: char, size: u64) -> String {
    if size == 1 {
        format!("|{kind}1")
    } else {
        format!("<{kind}{size}")
    }
}

/// Parses a `.npy` file. Accepts little- or big-endian plain element types in C order (or
/// any order for arrays of rank ≤ 1); refuses structured, object (pickled) and Fortran-order
/// arrays and files whose data size does not match their header.
pub(crate) fn parse(bytes: &[u8]) -> Result<NpyArray, String> {
    if !bytes.starts_with(b"\x93NUMPY") {
        return Err("not a .npy file (no \\x93NUMPY magic)".into());
    }
    let file = NpyFile::new(bytes).map_err(|e| format!("invalid .npy header: {e}"))?;
    let shape = file.shape().to_vec();
    let ts = match file.dtype() {
        DType::Plain(ts) => ts,
        other => {
            return Err(format!(
                "structured .npy arrays are not supported (dtype {})",
                other.descr()
            ));
        }
    };
    if file.uses_pickled_array() {
        return Err("object (pickled) .npy arrays are not supported".into());
    }
    if file.order() == Order::Fortran && shape.iter().filter(|&&d| d > 1).count() > 1 {
        return Err(
            "Fortran-order .npy arrays are not supported (save with np.ascontiguousarray)".into(),
        );
    }
    let kind = match ts.type_char() {
        TypeChar::Bool => 'b',
        TypeChar::Int => 'i',
        TypeChar::Uint => 'u',
        TypeChar::Float => 'f',
        TypeChar::Complex => 'c',
        other => return Err(format!("unsupported .npy element type {other} ({ts})")),
    };
    let size = ts.size_field();
    let elems = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or("the .npy shape overflows")?;
    let expected = elems
        .checked_mul(size)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or("the .npy array is too large")?;
    let data = file.into_inner();
    if data.len() != expected {
        return Err(format!(
            "the .npy data has {} bytes, its header ({ts}, shape {shape:?}) says {expected}",
            data.len()
        ));
    }
    let mut data = data.to_vec();
    if ts.endianness() == Endianness::Big && size > 1 {
        // `size` divides the length (checked above); chunks are elements.
        for e in data.chunks_mut(size as usize) {
            e.reverse();
        }
    }
    Ok(NpyArray {
        descr: descr(kind, size),
        shape,
        data,
    })
}

/// Encodes an array as a version-1 `.npy` file (C order).
pub(crate) fn to_bytes(a: &NpyArray) -> Result<Vec<u8>, String> {
    let ts: npyz::TypeStr = a
        .descr
        .parse()
        .map_err(|e| format!("bad .npy type string '{}': {e}", a.descr))?;
    let mut out = WriteOptions::new_header_only()
        .dtype(DType::Plain(ts))
        .shape(&a.shape)
        .writer(Vec::new())
        .write_header_only()
        .map_err(|e| format!("cannot write the .npy header: {e}"))?;
    out.extend_from_slice(&a.data);
    Ok(out)
}

/// A short human name of a normalised type string (`<f4` → `float32`).
pub(crate) fn type_name(descr: &str) -> String {
    let name = match descr {
        "<f2" => "float16",
        "<f4" => "float32",
        "<f8" => "float64",
        "|i1" => "int8",
        "<i2" => "int16",
        "<i4" => "int32",
        "<i8" => "int64",
        "|u1" => "uint8",
        "<u2" => "uint16",
        "<u4" => "uint32",
        "<u8" => "uint64",
        "|b1" => "bool",
        other => return other.to_owned(),
    };
    format!("{name} ({descr})")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    /// `np.save(f, np.arange(6, dtype=np.float32).reshape(2, 3))` (NumPy 2.4).
    fn numpy_f32_2x3() -> Vec<u8> {
        let mut v = b"\x93NUMPY\x01\x00v\x00".to_vec();
        let mut h = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }".to_vec();
        h.resize(117, b' ');
        h.push(b'\n');
        v.extend_from_slice(&h);
        for i in 0..6 {
            v.extend_from_slice(&(i as f32).to_le_bytes());
        }
        v
    }

    #[test]
    fn reads_a_numpy_file() {
        let a = parse(&numpy_f32_2x3()).unwrap();
        assert_eq!(a.descr, "<f4");
        assert_eq!(a.shape, [2, 3]);
        assert_eq!(a.data.len(), 24);
        assert_eq!(a.data[4..8], 1f32.to_le_bytes());
    }

    #[test]
    fn writes_what_it_reads() {
        let a = parse(&numpy_f32_2x3()).unwrap();
        let bytes = to_bytes(&a).unwrap();
        // npyz writes the shape as "(2, 3, )" where NumPy writes "(2, 3)"; both are valid and
        // NumPy reads it. The layout is NumPy's: version 1.0, data aligned to 64 bytes.
        assert_eq!(bytes.len(), numpy_f32_2x3().len());
        assert_eq!(bytes[..10], numpy_f32_2x3()[..10]);
        assert_eq!(bytes[128..], numpy_f32_2x3()[128..]);
        assert_eq!(parse(&bytes).unwrap(), a);
        for (descr, shape, data) in [
            ("<f2", vec![3u64], vec![0u8; 6]),
            ("|i1", vec![2, 2], vec![1, 2, 3, 4]),
            ("<i4", vec![], vec![7, 0, 0, 0]),
            ("<f4", vec![0, 4], vec![]),
        ] {
            let a = NpyArray {
                descr: descr.into(),
                shape,
                data,
            };
            assert_eq!(parse(&to_bytes(&a).unwrap()).unwrap(), a);
        }
    }

    #[test]
    fn converts_big_endian() {
        let mut v = b"\x93NUMPY\x01\x00v\x00".to_vec();
        let mut h = b"{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }".to_vec();
        h.resize(117, b' ');
        h.push(b'\n');
        v.extend_from_slice(&h);
        v.extend_from_slice(&[0, 0, 0, 1, 0, 0, 1, 0]);
        let a = parse(&v).unwrap();
        assert_eq!(a.descr, "<i4");
        assert_eq!(a.data, [1, 0, 0, 0, 0, 1, 0, 0]);
    }

    #[test]
    fn refuses_bad_files() {
        assert!(parse(b"hello").unwrap_err().contains("not a .npy file"));
        let mut short = numpy_f32_2x3();
        short.pop();
        assert!(parse(&short).unwrap_err().contains("23 bytes"));
        let mut fortran = numpy_f32_2x3();
        let text = String::from_utf8_lossy(&fortran[10..]).replace("False", "True ");
        fortran.truncate(10);
        fortran.extend_from_slice(text.as_bytes());
        // Re-append the data the lossy conversion may have mangled.
        fortran.truncate(128);
        for i in 0..6 {
            fortran.extend_from_slice(&(i as f32).to_le_bytes());
        }
        assert!(parse(&fortran).unwrap_err().contains("Fortran"));
        assert!(parse(b"\x93NUMPY\x01\x00\x05\x00{'a'}").is_err());
    }

    #[test]
    fn names_types() {
        assert_eq!(type_name("<f4"), "float32 (<f4)");
        assert_eq!(type_name("<c8"), "<c8");
        assert_eq!(descr('u', 1), "|u1");
        assert_eq!(descr('f', 2), "<f2");
    }
}
