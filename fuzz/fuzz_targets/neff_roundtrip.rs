//! An arbitrary NEFF spec → `neff::write` → `neff::parse` (every member kept, hash validated):
//! what the writer accepts must parse back to the same spec (tensors in the parser's
//! documented order, the generated `def.json` / `tensor_map.json` members left out).
//!
//! Preconditions the parser documents and the harness establishes rather than tests: at least
//! one tensor, unique tensor and subgraph names, sizes that match shape × dtype, a supported
//! major version (1 or 2), `lnc_size` ≤ 8, names without NUL (the header and tar fields are
//! C strings).
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use nrt_core::NrtStatus;
use nrt_core::io::{Dtype, TensorUsage};
use nrt_core::neff::{
    self, KeepMembers, MAX_DIMS, NeffFeatures, NeffSpec, NeffTensor, ParseOptions, SubgraphSpec,
};

const DTYPES: [Dtype; 15] = [
    Dtype::Float32,
    Dtype::Fp32r,
    Dtype::Float16,
    Dtype::Bfloat16,
    Dtype::Fp8E3,
    Dtype::Fp8E4,
    Dtype::Fp8E5,
    Dtype::Int8,
    Dtype::Uint8,
    Dtype::Int16,
    Dtype::Uint16,
    Dtype::Int32,
    Dtype::Uint32,
    Dtype::Int64,
    Dtype::Uint64,
];

/// An arbitrary string without NUL, at most `max` bytes (cut on a char boundary).
fn text(u: &mut Unstructured<'_>, max: usize) -> arbitrary::Result<String> {
    let s: String = String::arbitrary(u)?;
    let mut s: String = s.chars().filter(|&c| c != '\0').collect();
    while s.len() > max {
        s.pop();
    }
    Ok(s)
}

/// Mostly short ASCII names (so structure is explored), sometimes arbitrary text.
fn name(u: &mut Unstructured<'_>, max: usize, slash_ok: bool) -> arbitrary::Result<String> {
    let s = if u.ratio(3, 4)? {
        let len = u.int_in_range(1..=12)?;
        let mut s = String::new();
        for _ in 0..len {
            s.push(*u.choose(&['a', 'b', 's', 'g', '0', '1', '.', '_', '-', 'x'])?);
        }
        s
    } else {
        text(u, max)?
    };
    let mut s: String = if slash_ok {
        // No empty path components.
        s.split('/')
            .filter(|c| !c.is_empty())
            .collect::<Vec<_>>()
            .join("/")
    } else {
        s.replace('/', "")
    };
    while s.len() > max {
        s.pop();
    }
    Ok(s)
}

#[derive(Debug)]
struct Input {
    spec: NeffSpec,
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let mut subgraphs: Vec<SubgraphSpec> = Vec::new();
        for _ in 0..u.int_in_range(1..=4)? {
            let sg = name(u, 100, false)?;
            // Names the writer refuses ("", ".", "..", duplicates) are mostly avoided so the
            // target goes deeper; "." and ".." still come through and must be refused.
            if sg.is_empty() || subgraphs.iter().any(|s| s.name == sg) {
                continue;
            }
            let mut members = Vec::new();
            for _ in 0..u.int_in_range(0..=3)? {
                let m = name(u, 200, true)?;
                if m.is_empty() {
                    continue;
                }
                let len = u.int_in_range(0..=600)?;
                let data = u.bytes(len.min(u.len()))?.to_vec();
                members.push((m, data));
            }
            subgraphs.push(SubgraphSpec { name: sg, members });
        }
        if subgraphs.is_empty() {
            subgraphs.push(SubgraphSpec {
                name: "sg00".into(),
                members: vec![],
            });
        }
        let mut tensors: Vec<NeffTensor> = Vec::new();
        for _ in 0..u.int_in_range(1..=6)? {
            let n = name(u, 255, true)?;
            if n.is_empty() || tensors.iter().any(|t| t.name == n) {
                continue;
            }
            let dtype = *u.choose(&DTYPES)?;
            let rank = u.int_in_range(0..=MAX_DIMS)?;
            let mut shape = Vec::with_capacity(rank);
            for _ in 0..rank {
                shape.push(if u.ratio(7, 8)? {
                    u.int_in_range(1..=64)?
                } else {
                    u.int_in_range(1..=u32::MAX)?
                });
            }
            let Some(size) = shape
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(u64::from(d)))
                .and_then(|e| e.checked_mul(u64::from(dtype.size())))
            else {
                continue;
            };
            tensors.push(NeffTensor {
                name: n,
                usage: if bool::arbitrary(u)? {
                    TensorUsage::Input
                } else {
                    TensorUsage::Output
                },
                size,
                dtype,
                shape,
                var_id: u64::arbitrary(u)?,
            });
        }
        if tensors.is_empty() {
            tensors.push(NeffTensor {
                name: "x".into(),
                usage: TensorUsage::Input,
                size: 4,
                dtype: Dtype::Float32,
                shape: vec![1],
                var_id: 0,
            });
        }
        Ok(Input {
            spec: NeffSpec {
                name: text(u, 255)?,
                uuid: <[u8; 16]>::arbitrary(u)?,
                version: (u.int_in_range(1..=2)?, u64::arbitrary(u)?),
                feature_bits: if bool::arbitrary(u)? {
                    NeffFeatures::TESTED & NeffFeatures::from_bits_retain(u64::arbitrary(u)?)
                } else {
                    NeffFeatures::from_bits_retain(u64::arbitrary(u)?)
                },
                lnc_size: u.int_in_range(0..=8)?,
                num_tpb: u32::arbitrary(u)?,
                gzip: bool::arbitrary(u)?,
                subgraphs,
                tensors,
            },
        })
    }
}

fuzz_target!(|input: Input| {
    let spec = input.spec;
    let bytes = match neff::write(&spec) {
        Ok(b) => b,
        Err(e) => {
            assert_eq!(e.status(), NrtStatus::Invalid, "{e:?}");
            return;
        }
    };
    let parsed = match neff::parse(
        &bytes,
        &ParseOptions {
            keep: KeepMembers::All,
            validate_hash: true,
            ..Default::default()
        },
    ) {
        Ok(p) => p,
        Err(e) => panic!("the writer wrote a NEFF its parser refuses: {e:?}\nspec: {spec:#?}"),
    };
    let mut expected = spec.clone();
    expected.tensors.sort_by(|a, b| {
        (a.usage as u32, a.name.as_bytes()).cmp(&(b.usage as u32, b.name.as_bytes()))
    });
    for s in &mut expected.subgraphs {
        s.members
            .retain(|(n, _)| n != "def.json" && n != "tensor_map.json");
    }
    assert_eq!(parsed.to_spec(), expected, "parse(write(x)) != x");
    assert_eq!(
        parsed.warnings.is_empty(),
        spec.feature_bits
            .difference(NeffFeatures::TESTED)
            .is_empty(),
        "warnings {:?}",
        parsed.warnings
    );
    // The default options keep only the simulator program; everything still parses.
    let default = neff::parse(&bytes, &ParseOptions::default());
    assert!(default.is_ok(), "{default:?}");
});
