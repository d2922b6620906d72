//! NEFF container: the compiler fixture, round trips, interoperability, malformed input. The
//! checks on the compiler fixture print a skip line and pass when `../shared/` is absent
//! (`NRT_REQUIRE_SHARED=1` makes that a failure).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_core::NrtStatus;
use nrt_core::io::{Dtype, TensorUsage};
use nrt_core::neff::{self, KeepMembers, NeffSpec, NeffTensor, ParseOptions, SubgraphSpec};
use nrt_tests::{assert_err, matmul_fixture};

#[test]
fn compiler_fixture_parses_to_the_documented_figures() {
    let Some(fixture) = matmul_fixture() else {
        return;
    };
    let n = neff::parse(&fixture, &ParseOptions::default()).unwrap();
    assert_eq!(n.name(), "file.neff");
    assert_eq!(n.header.feature_bits.bits(), 0x209c00);
    assert_eq!(n.header.lnc_size, 2);
    assert_eq!(n.version(), (2, 0));
    assert_eq!(n.header.pkg_version, 2);
    assert_eq!(n.header.num_tpb, 1);
    assert_eq!(
        n.uuid(),
        [
            0x00, 0xa0, 0x4c, 0x53, 0x5f, 0xd9, 0x4f, 0x07, 0xbf, 0xfd, 0xd5, 0xea, 0xcd, 0xef,
            0xc8, 0x52
        ]
    );
    let names: Vec<_> = n.subgraphs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["sg00", "sg01"]);
    assert_eq!(n.subgraphs[0].members.len(), 32);
    assert!(
        n.subgraphs[0]
            .members
            .iter()
            .any(|m| m.name == "PE.bin" && m.size == 768)
    );
    assert_eq!(n.tool_version.as_deref(), Some("2.23.6484.0+3b612583"));
    let io: Vec<_> = n
        .tensors
        .iter()
        .map(|t| (t.name.as_str(), t.usage, t.shape.clone(), t.dtype, t.size))
        .collect();
    assert_eq!(
        io,
        [
            (
                "x",
                TensorUsage::Input,
                vec![128, 256],
                Dtype::Float16,
                65536
            ),
            (
                "y",
                TensorUsage::Input,
                vec![256, 128],
                Dtype::Float16,
                65536
            ),
            (
                "output0",
                TensorUsage::Output,
                vec![128, 128],
                Dtype::Float16,
                32768
            ),
        ]
    );
    assert_eq!(n.tensors[0].dtype.code(), 7);
    assert!(n.warnings.is_empty(), "{:?}", n.warnings);
}

fn sample_spec(gzip: bool) -> NeffSpec {
    NeffSpec {
        name: "sample".into(),
        uuid: [7; 16],
        version: (2, 0),
        feature_bits: nrt_core::neff::NeffFeatures::from_bits_retain(0x1c00),
        lnc_size: 1,
        num_tpb: 1,
        gzip,
        subgraphs: vec![SubgraphSpec {
            name: "sg00".into(),
            members: vec![("nrt-sim.prog".into(), b"program bytes".to_vec())],
        }],
        tensors: vec![
            NeffTensor {
                name: "a".into(),
                usage: TensorUsage::Input,
                size: 16,
                dtype: Dtype::Float32,
                shape: vec![2, 2],
                var_id: 1,
            },
            NeffTensor {
                name: "out".into(),
                usage: TensorUsage::Output,
                size: 8,
                dtype: Dtype::Bfloat16,
                shape: vec![4],
                var_id: 2,
            },
        ],
    }
}

#[test]
fn writer_round_trips() {
    for gzip in [true, false] {
        let spec = sample_spec(gzip);
        let bytes = neff::write(&spec).unwrap();
        let parsed = neff::parse(
            &bytes,
            &ParseOptions {
                keep: KeepMembers::All,
                validate_hash: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(parsed.to_spec(), spec);
        assert_eq!(
            parsed.subgraphs[0].member("nrt-sim.prog"),
            Some(&b"program bytes"[..])
        );
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    }
}

#[test]
fn writer_refuses_names_that_would_not_round_trip() {
    type Mutation = fn(&mut NeffSpec);
    let cases: [(&str, Mutation); 7] = [
        ("cannot write a subgraph named \".\"", |s| {
            s.subgraphs[0].name = ".".into()
        }),
        ("cannot write a subgraph named \"..\"", |s| {
            s.subgraphs[0].name = "..".into()
        }),
        ("cannot write a subgraph named \"\"", |s| {
            s.subgraphs[0].name = String::new()
        }),
        ("cannot write a subgraph named \"a/b\"", |s| {
            s.subgraphs[0].name = "a/b".into()
        }),
        ("cannot write subgraph \"sg00\" twice", |s| {
            let again = s.subgraphs[0].clone();
            s.subgraphs.push(again);
        }),
        (
            "cannot write a member named \"../x\" in subgraph \"sg00\"",
            |s| s.subgraphs[0].members.push(("../x".into(), vec![1])),
        ),
        ("cannot write tensor \"a\" twice", |s| {
            let again = s.tensors[0].clone();
            s.tensors.push(again);
        }),
    ];
    for (message, mutate) in cases {
        let mut spec = sample_spec(true);
        mutate(&mut spec);
        let e = neff::write(&spec).unwrap_err();
        assert_eq!(e.status(), NrtStatus::Invalid, "{message}");
        assert_eq!(e.message(), message);
    }
    // A member in a subdirectory of the subgraph's directory round-trips.
    let mut spec = sample_spec(true);
    spec.subgraphs[0]
        .members
        .push(("dir/x.bin".into(), vec![7]));
    let opts = ParseOptions {
        keep: KeepMembers::All,
        ..Default::default()
    };
    let parsed = neff::parse(&neff::write(&spec).unwrap(), &opts).unwrap();
    assert_eq!(parsed.subgraphs[0].member("dir/x.bin"), Some(&[7u8][..]));
}

#[test]
fn unsupported_major_version() {
    let mut b = neff::write(&sample_spec(true)).unwrap();
    b[24..32].copy_from_slice(&3u64.to_le_bytes());
    b[32..40].copy_from_slice(&1u64.to_le_bytes());
    assert_err(
        neff::parse(&b, &ParseOptions::default()),
        NrtStatus::UnsupportedNeffVersion,
        "NEFF version mismatch supported: 2.0 received: 3.1",
    );
}

// ---- malformed input ----------------------------------------------------------------------

/// A ustar header for `path` claiming `size` bytes, followed by `data` (which may be shorter
/// than the claim) and its padding.
fn member_claiming(path: &str, data: &[u8], size: u64) -> Vec<u8> {
    let mut h = [0u8; 512];
    h[..path.len()].copy_from_slice(path.as_bytes());
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    h[136..148].copy_from_slice(b"00000000000\0");
    h[156] = b'0';
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    let mut out = h.to_vec();
    out.extend_from_slice(data);
    out.resize(out.len() + (512 - data.len() % 512) % 512, 0);
    out
}

fn member(path: &str, data: &str) -> Vec<u8> {
    member_claiming(path, data.as_bytes(), data.len() as u64)
}

fn end() -> Vec<u8> {
    vec![0u8; 1024]
}

/// A plain-tar NEFF (pkg_version 1) around `tar`.
fn neff_of(tar: Vec<u8>) -> Vec<u8> {
    let header = neff::Header {
        pkg_version: neff::PKG_PLAIN_TAR,
        data_size: tar.len() as u64,
        version_major: 2,
        version_minor: 0,
        build_version: String::new(),
        num_tpb: 1,
        hash: [0; 32],
        uuid: [1; 16],
        name: "bad".into(),
        requested_tpb_count: 1,
        tpb_per_node: [0; 64],
        feature_bits: nrt_core::neff::NeffFeatures::empty(),
        lnc_size: 1,
    };
    let mut out = header.encode().to_vec();
    out.extend_from_slice(&tar);
    out
}

const KELF1: &str = r#"{"graphs":[{"definition":"sg00/def.json","name":"sg00"}]}"#;
const DEF: &str = r#"{"var":{"x":{"type":"input","size":16,"var_id":1},"y":{"type":"output","size":16,"var_id":2}}}"#;
const TM: &str = r#"{"x":{"kind":"input","dtype":"float32","tf_shape":[4]},"y":{"kind":"output","dtype":"float32","tf_shape":[2,2]}}"#;

/// A minimal valid archive with the given def.json and tensor_map.json.
fn archive(kelf: &str, def: &str, tm: &str) -> Vec<u8> {
    [
        member("kelf-0.json", kelf),
        member("sg00/def.json", def),
        member("sg00/tensor_map.json", tm),
        end(),
    ]
    .concat()
}

#[test]
fn minimal_hand_built_archive_is_valid() {
    let n = neff::parse(&neff_of(archive(KELF1, DEF, TM)), &ParseOptions::default()).unwrap();
    assert_eq!(n.tensors.len(), 2);
}

#[test]
fn malformed_neffs_are_invalid_with_a_message_naming_the_problem() {
    let good = neff_of(archive(KELF1, DEF, TM));
    let gz = neff::write(&sample_spec(true)).unwrap();
    let mut cases: Vec<(&str, Vec<u8>, &str)> = Vec::new();
    cases.push(("empty file", vec![], "Invalid NEFF: the file is empty"));
    cases.push((
        "truncated header",
        good[..700].to_vec(),
        "Invalid NEFF: the file has 700 bytes, fewer than the 1024-byte header",
    ));
    let mut b = good.clone();
    b[8..16].copy_from_slice(&1000u64.to_le_bytes());
    cases.push((
        "header_size",
        b,
        "Invalid NEFF: header_size is 1000, expected 1024",
    ));
    let payload = (good.len() - 1024) as u64;
    let mut b = good.clone();
    b[16..24].copy_from_slice(&(payload + 1).to_le_bytes());
    let larger = format!(
        "Invalid NEFF: data_size {} is larger than the {payload} bytes after the header",
        payload + 1
    );
    cases.push(("data_size larger", b, &*Box::leak(larger.into_boxed_str())));
    let mut b = good.clone();
    b[16..24].copy_from_slice(&(payload - 1).to_le_bytes());
    let smaller = format!(
        "Invalid NEFF: data_size {} is smaller than the {payload} bytes after the header",
        payload - 1
    );
    cases.push((
        "data_size smaller",
        b,
        &*Box::leak(smaller.into_boxed_str()),
    ));
    let mut four_gib = good[..1024].to_vec();
    four_gib[16..24].copy_from_slice(&(4u64 << 30).to_le_bytes());
    four_gib.extend_from_slice(&[0u8; 1000]);
    cases.push((
        "4 GiB data_size in a 2 KiB file",
        four_gib,
        "Invalid NEFF: data_size 4294967296 is larger than the 1000 bytes after the header",
    ));
    let mut b = gz.clone();
    let mid = 1024 + (gz.len() - 1024) / 2;
    b[mid] ^= 0xff;
    b[mid + 1] ^= 0x55;
    cases.push(("corrupt gzip", b, "Invalid NEFF: corrupt gzip stream:"));
    let mut b = gz.clone();
    b[1024] = 0x1f;
    b[1025] = 0x8c;
    cases.push((
        "gzip magic",
        b,
        "Invalid NEFF: corrupt gzip stream: bad magic or compression method",
    ));
    let mut tar = archive(KELF1, DEF, TM);
    tar[0] = b'K'; // change the name, keep the old checksum
    cases.push((
        "bad tar checksum",
        neff_of(tar),
        "Invalid NEFF: the tar header at offset 0 has a bad checksum",
    ));
    let overrun = [
        member("kelf-0.json", KELF1),
        member_claiming("sg00/weights.bin", &[1u8; 512], 4096),
    ]
    .concat();
    cases.push((
        "member overruns",
        neff_of(overrun),
        "Invalid NEFF: tar member \"sg00/weights.bin\" of 4096 bytes overruns the archive",
    ));
    let huge = [
        member("kelf-0.json", KELF1),
        member_claiming("sg00/blob.bin", &[], 4u64 << 30),
    ]
    .concat();
    cases.push((
        "4 GiB member claim in a 1 KiB archive",
        neff_of(huge),
        "Invalid NEFF: tar member \"sg00/blob.bin\" of 4294967296 bytes overruns the archive",
    ));
    let huge_kept = [
        member("kelf-0.json", KELF1),
        member_claiming("sg00/def.json", &[], 4u64 << 30),
    ]
    .concat();
    cases.push(("4 GiB claim for a kept member", neff_of(huge_kept), "Invalid NEFF: member \"sg00/def.json\" of 4294967296 bytes is larger than the 67108864 bytes allowed"));
    let no_kelf = [
        member("sg00/def.json", DEF),
        member("sg00/tensor_map.json", TM),
        end(),
    ]
    .concat();
    cases.push((
        "missing kelf list",
        neff_of(no_kelf),
        "Invalid NEFF: no subgraph list (kelf-*.json)",
    ));
    let kelf2 = r#"{"graphs":[{"definition":"sg00/def.json","name":"sg00"},{"definition":"sg01/def.json","name":"sg01"}]}"#;
    cases.push((
        "subgraph without def.json",
        neff_of(archive(kelf2, DEF, TM)),
        "Invalid NEFF: subgraph \"sg01\" has no definition sg01/def.json",
    ));
    cases.push((
        "JSON syntax error",
        neff_of(archive(KELF1, "{\"var\": {", TM)),
        "Invalid NEFF: sg00/def.json: EOF while parsing an object at line 1 column 9",
    ));
    let def0 = r#"{"var":{"x":{"type":"input","size":0,"var_id":1}}}"#;
    cases.push((
        "tensor of size 0",
        neff_of(archive(KELF1, def0, TM)),
        "Invalid NEFF: sg00/def.json: tensor \"x\" has size 0",
    ));
    let tm_bad = r#"{"x":{"kind":"input","dtype":"float32","tf_shape":[2,3]},"y":{"kind":"output","dtype":"float32","tf_shape":[2,2]}}"#;
    cases.push((
        "shape product mismatch",
        neff_of(archive(KELF1, DEF, tm_bad)),
        "Invalid NEFF: tensor \"x\": shape [2, 3] of float32 is 24 bytes but its size is 16",
    ));
    let dup = r#"{"var":{"x":{"type":"input","size":16,"var_id":1},"x":{"type":"input","size":16,"var_id":2}}}"#;
    cases.push((
        "duplicate tensor names",
        neff_of(archive(KELF1, dup, TM)),
        "Invalid NEFF: sg00/def.json: duplicate tensor name \"x\" at line 1 column 53",
    ));
    let in_and_out = r#"{"var":{"x":{"type":"input","size":16,"var_id":1}}}"#;
    let tm_out = r#"{"x":{"dtype":"float32","tf_shape":[4]}}"#;
    let kelf_two = r#"{"graphs":[{"definition":"sg00/def.json","name":"sg00"},{"definition":"sg01/def.json","name":"sg01"}]}"#;
    let out_x = r#"{"var":{"x":{"type":"output","size":16,"var_id":1}}}"#;
    let both = [
        member("kelf-0.json", kelf_two),
        member("sg00/def.json", in_and_out),
        member("sg00/tensor_map.json", tm_out),
        member("sg01/def.json", out_x),
        member("sg01/tensor_map.json", tm_out),
        end(),
    ]
    .concat();
    cases.push((
        "a name both input and output",
        neff_of(both),
        "Invalid NEFF: duplicate tensor name \"x\": both an input and an output",
    ));
    cases.push((
        "zero subgraphs",
        neff_of(archive(r#"{"graphs":[]}"#, DEF, TM)),
        "Invalid NEFF: kelf-0.json lists 0 subgraphs (1 to 64 are supported)",
    ));
    let many: Vec<String> = (0..65)
        .map(|i| format!(r#"{{"definition":"sg{i:02}/def.json","name":"sg{i:02}"}}"#))
        .collect();
    let kelf65 = format!(r#"{{"graphs":[{}]}}"#, many.join(","));
    cases.push((
        "65 subgraphs",
        neff_of(archive(&kelf65, DEF, TM)),
        "Invalid NEFF: kelf-0.json lists 65 subgraphs (1 to 64 are supported)",
    ));
    let no_end = [
        member("kelf-0.json", KELF1),
        member("sg00/def.json", DEF),
        member("sg00/tensor_map.json", TM),
    ]
    .concat();
    cases.push((
        "no end marker",
        neff_of(no_end),
        "Invalid NEFF: the tar archive has no end-of-archive marker",
    ));
    let mut trailing = gz.clone();
    let len = trailing.len();
    trailing.extend_from_slice(&[0, 0, 0, 7]);
    trailing[16..24].copy_from_slice(&((len + 4 - 1024) as u64).to_le_bytes());
    cases.push((
        "garbage after gzip",
        trailing,
        "Invalid NEFF: non-zero data 3 bytes after the end of the gzip stream",
    ));
    let mut pkg = good.clone();
    pkg[0..8].copy_from_slice(&9u64.to_le_bytes());
    cases.push((
        "unknown pkg_version",
        pkg,
        "Invalid NEFF: unknown pkg_version 9 (1 = tar, 2 = gzip-compressed tar)",
    ));
    let bad_dtype = r#"{"x":{"kind":"input","dtype":"complex64","tf_shape":[4]},"y":{"kind":"output","dtype":"float32","tf_shape":[2,2]}}"#;
    cases.push((
        "unknown dtype",
        neff_of(archive(KELF1, DEF, bad_dtype)),
        "Invalid NEFF: sg00/tensor_map.json: tensor \"x\" has unknown dtype \"complex64\"",
    ));

    for (what, bytes, message) in cases {
        let e = neff::parse(&bytes, &ParseOptions::default()).expect_err(what);
        assert_eq!(e.status(), NrtStatus::Invalid, "{what}: {e}");
        assert!(
            e.message().starts_with(message),
            "{what}: got {:?}, want {message:?}",
            e.message()
        );
    }
}

#[test]
fn padding_after_the_gzip_stream_is_accepted() {
    let mut b = neff::write(&sample_spec(true)).unwrap();
    let len = b.len();
    b.resize(len + 7839, 0);
    b[16..24].copy_from_slice(&((len + 7839 - 1024) as u64).to_le_bytes());
    let n = neff::parse(&b, &ParseOptions::default()).unwrap();
    assert_eq!(n.name(), "sample");
}

#[test]
fn hash_validation_of_written_and_compiler_neffs() {
    let opts = ParseOptions {
        validate_hash: true,
        ..Default::default()
    };
    let mut b = neff::write(&sample_spec(true)).unwrap();
    assert!(neff::parse(&b, &opts).unwrap().warnings.is_empty());
    b[172] ^= 1;
    assert_err(
        neff::parse(&b, &opts),
        NrtStatus::Invalid,
        "Invalid NEFF: the header hash does not match the payload (NEURON_RT_VALIDATE_HASH)",
    );
    // Without validation the same file loads.
    assert!(neff::parse(&b, &ParseOptions::default()).is_ok());
    // A compiler NEFF: the hash scope is unknown, so it is not checked and a warning says so.
    if let Some(fixture) = matmul_fixture() {
        let n = neff::parse(&fixture, &opts).unwrap();
        assert_eq!(
            n.warnings,
            ["NEFF hash not validated: the scope of this NEFF's header hash is not documented"]
        );
    }
}

#[test]
fn unknown_feature_bits_are_accepted_with_a_warning() {
    let mut spec = sample_spec(true);
    spec.feature_bits = nrt_core::neff::NeffFeatures::from_bits_retain(0x209c00 | 1 << 40);
    let n = neff::parse(&neff::write(&spec).unwrap(), &ParseOptions::default()).unwrap();
    assert_eq!(
        n.warnings,
        ["NEFF feature bits 0x10000000000 are not known to this runtime; loading anyway"]
    );
}

#[test]
fn written_payload_lists_and_extracts_with_python_tarfile() {
    let Ok(out) = std::process::Command::new("python3")
        .arg("--version")
        .output()
    else {
        nrt_tests::print_skipped("python3 not found, so the interoperability check did not run");
        return;
    };
    assert!(out.status.success());
    let dir = std::env::temp_dir().join(format!("nrt-neff-interop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let big = vec![0xA5u8; 3000];
    let mut spec = sample_spec(true);
    spec.subgraphs[0]
        .members
        .push(("weights/layer0.bin".into(), big.clone()));
    let bytes = neff::write(&spec).unwrap();
    let payload = dir.join("payload.tgz");
    std::fs::write(&payload, &bytes[1024..]).unwrap();
    let script = r#"
import sys, tarfile, json
t = tarfile.open(sys.argv[1])
names = t.getnames()
print("\n".join(names))
t.extractall(sys.argv[2])
"#;
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            script,
            payload.to_str().unwrap(),
            dir.join("x").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names = String::from_utf8(out.stdout).unwrap();
    let names: Vec<_> = names.lines().collect();
    assert_eq!(
        names,
        [
            "kelf-0.json",
            "sg00/def.json",
            "sg00/tensor_map.json",
            "sg00/nrt-sim.prog",
            "sg00/weights/layer0.bin",
            "neff.json",
            "info.json"
        ]
    );
    assert_eq!(
        std::fs::read(dir.join("x/sg00/weights/layer0.bin")).unwrap(),
        big
    );
    assert_eq!(
        std::fs::read(dir.join("x/sg00/nrt-sim.prog")).unwrap(),
        b"program bytes"
    );
    let def: serde_json_check::Value =
        serde_json_check::from_slice(&std::fs::read(dir.join("x/sg00/def.json")).unwrap()).unwrap();
    assert_eq!(def["var"]["a"]["size"], 16);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn io_table_from_the_compiler_fixture() {
    let Some(fixture) = matmul_fixture() else {
        return;
    };
    let n = neff::parse(&fixture, &ParseOptions::default()).unwrap();
    let io = n.io_table().unwrap();
    let names: Vec<_> = io
        .tensors(TensorUsage::Input)
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, ["x", "y"]);
    assert_eq!(io.tensors(TensorUsage::Output)[0].size, 32768);
}

/// Header, payload and signature checks that the malformed-NEFF table above does not reach:
/// major version 0, an lnc_size above 8, non-UTF-8 text fields, an empty payload, a NEFF
/// without tensors, and a `neff.json` signature that names an unknown input or disagrees with
/// its subgraph. Each gets its status and the parser's message.
#[test]
fn header_payload_and_signature_refusals() {
    let good = neff_of(archive(KELF1, DEF, TM));
    let mut cases: Vec<(&str, Vec<u8>, NrtStatus, &str)> = Vec::new();
    let mut b = good.clone();
    b[24..32].copy_from_slice(&0u64.to_le_bytes());
    b[32..40].copy_from_slice(&7u64.to_le_bytes());
    cases.push((
        "major version 0",
        b,
        NrtStatus::UnsupportedNeffVersion,
        "NEFF version mismatch supported: 2.0 received: 0.7",
    ));
    let mut b = good.clone();
    b[552..556].copy_from_slice(&9u32.to_le_bytes());
    cases.push((
        "lnc_size 9",
        b,
        NrtStatus::Invalid,
        "Invalid NEFF: lnc_size 9 is above 8",
    ));
    let mut b = good.clone();
    b[220..223].copy_from_slice(&[b'a', 0xff, 0]);
    cases.push((
        "name not UTF-8",
        b,
        NrtStatus::Invalid,
        "Invalid NEFF: the header's name is not UTF-8",
    ));
    let mut b = good.clone();
    b[40..42].copy_from_slice(&[0xc3, 0x28]);
    cases.push((
        "build version not UTF-8",
        b,
        NrtStatus::Invalid,
        "Invalid NEFF: the header's build version is not UTF-8",
    ));
    let mut empty = good[..1024].to_vec();
    empty[16..24].copy_from_slice(&0u64.to_le_bytes());
    cases.push((
        "empty payload",
        empty,
        NrtStatus::Invalid,
        "Invalid NEFF: the payload is empty",
    ));
    cases.push((
        "no tensors",
        neff_of(archive(KELF1, r#"{"var":{}}"#, "{}")),
        NrtStatus::Invalid,
        "Invalid NEFF: no input or output tensors",
    ));
    let with_signature = |sig: &str| {
        let nj = format!(
            r#"{{"metadata":{{"signatures":{{"default":{{"inputs":{sig},"outputs":{{}}}}}}}}}}"#
        );
        neff_of(
            [
                member("kelf-0.json", KELF1),
                member("sg00/def.json", DEF),
                member("sg00/tensor_map.json", TM),
                member("neff.json", &nj),
                end(),
            ]
            .concat(),
        )
    };
    // The archive with an agreeing signature is valid: the refusals below are the signature's.
    neff::parse(
        &with_signature(r#"{"x":{"dtype":"float32","shape":[4]}}"#),
        &ParseOptions::default(),
    )
    .expect("agreeing signature");
    cases.push((
        "signature names an unknown input",
        with_signature(r#"{"z":{"dtype":"float32","shape":[4]}}"#),
        NrtStatus::Invalid,
        "Invalid NEFF: neff.json signature input \"z\" is not an input of any subgraph",
    ));
    cases.push((
        "signature dtype disagrees",
        with_signature(r#"{"x":{"dtype":"int32","shape":[4]}}"#),
        NrtStatus::Invalid,
        "Invalid NEFF: neff.json signature of input \"x\" disagrees with its subgraphs",
    ));
    cases.push((
        "signature shape disagrees",
        with_signature(r#"{"x":{"dtype":"float32","shape":[2,2]}}"#),
        NrtStatus::Invalid,
        "Invalid NEFF: neff.json signature of input \"x\" disagrees with its subgraphs",
    ));
    for (what, bytes, status, message) in cases {
        let e = neff::parse(&bytes, &ParseOptions::default()).expect_err(what);
        assert_eq!(e.status(), status, "{what}: {e}");
        assert_eq!(e.message(), message, "{what}");
    }
}
