//! Unit tests of the request/struct layer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io;
use std::path::Path;

use super::*;

#[test]
fn composers_match_kernel_macros() {
    // Values of the kernel's own macros for well-known requests.
    assert_eq!(io(b'N', 1), 0x0000_4e01);
    assert_eq!(ior(b'N', 2, 1), 0x8001_4e02);
    assert_eq!(iow(b'N', 93, 8), 0x4008_4e5d);
    assert_eq!(iowr(b'N', 85, 80), 0xc050_4e55);
    // The size field is 14 bits wide.
    assert_eq!(ior(b'N', 133, 12296), 0xb008_4e85);
}

#[test]
fn tables_are_consistent_with_the_types() {
    assert_eq!(STRUCTS.len(), 23);
    for s in STRUCTS {
        let mut end = 0;
        for f in s.fields {
            assert!(f.offset >= end, "{}: {} overlaps", s.c_name, f.name);
            end = f.offset + f.size;
        }
        assert!(end <= s.size, "{}", s.c_name);
    }
    for r in REQUESTS {
        assert!(
            STRUCTS
                .iter()
                .any(|s| s.c_name == r.arg && s.size == r.arg_size),
            "{} has no struct table entry",
            r.name
        );
    }
}

#[test]
fn opening_a_missing_node_fails_with_enoent() {
    let err = DeviceFd::open(Path::new("/nonexistent-nrt-linux/neuron0"), OpenMode::Misc)
        .expect_err("must not exist");
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
}

#[test]
fn ioctl_on_a_regular_file_is_enotty() {
    let path = std::env::temp_dir().join(format!("nrt-linux-sys-{}", std::process::id()));
    std::fs::write(&path, b"").unwrap();
    let fd = DeviceFd::open(&path, OpenMode::Misc).unwrap();
    assert_eq!(fd.mode(), OpenMode::Misc);
    let mut v = CompatibleVersion::default();
    let err = ioctl(&fd, COMPATIBLE_VERSION, &mut v).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTTY));
    drop(fd);
    let _ = std::fs::remove_file(&path);
}

fn temp_file(tag: &str, len: u64) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("nrt-linux-{tag}-{}", std::process::id()));
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(len).unwrap();
    path
}

#[test]
fn mappings_of_a_sparse_file_are_volatile_bounded_and_shared() {
    let path = temp_file("map", 8192);
    let fd = DeviceFd::open(&path, OpenMode::Attach).unwrap();
    let rw = Mapping::map(&fd, 4096, 4096, true).unwrap();
    assert_eq!(rw.len(), 4096);
    assert!(!rw.is_empty());
    assert!(rw.write_bytes(3, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]));
    assert_eq!(rw.read_u32(4), Some(u32::from_le_bytes([2, 3, 4, 5])));
    assert_eq!(
        rw.read_u64(8),
        Some(u64::from_le_bytes([6, 7, 8, 9, 10, 11, 12, 13]))
    );
    let mut back = [0u8; 13];
    assert!(rw.read_bytes(3, &mut back));
    assert_eq!(back, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    // Out of bounds or misaligned: refused, nothing touched.
    assert_eq!(rw.read_u64(4090), None);
    assert_eq!(rw.read_u32(2), None);
    assert!(!rw.write_bytes(4095, &[0, 0]));
    assert!(!rw.read_bytes(usize::MAX, &mut back));
    // A read-only mapping of the same bytes sees them and refuses writes.
    let ro = Mapping::map(&fd, 4096, 4096, false).unwrap();
    assert_eq!(ro.read_u32(4), rw.read_u32(4));
    assert!(!ro.write_bytes(0, &[1]));
    drop((rw, ro));
    // MAP_SHARED: the file holds what was written.
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[4096 + 3..4096 + 16], &back);
    assert!(Mapping::map(&fd, 0, 0, false).is_err());
    let _ = std::fs::remove_file(&path);
}

#[test]
fn pointer_requests_on_a_regular_file_are_enotty() {
    let path = temp_file("ptr", 0);
    let fd = DeviceFd::open(&path, OpenMode::Attach).unwrap();
    let params = AllocParams {
        size: 64,
        align: 64,
        location: MemLocation::empty(),
        dram_channel: 0,
        nc_id: 0,
        mem_type: MemType::TENSORS_DEVICE,
    };
    for form in [MemForm::Wide, MemForm::Typed, MemForm::Untyped] {
        let err = mem_alloc(&fd, form, &params).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTTY), "{form:?}");
        let err = mem_buf_write(&fd, form, 1, 0, &[1, 2, 3]).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTTY), "{form:?}");
        let err = mem_buf_read(&fd, form, 1, 0, &mut [0; 3]).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTTY), "{form:?}");
    }
    // The narrow forms refuse what their 32-bit fields cannot carry, before any call.
    let big = AllocParams {
        size: 1 << 32,
        ..params
    };
    let err = mem_alloc(&fd, MemForm::Typed, &big).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    let err = mem_buf_write(&fd, MemForm::Untyped, 1, 1 << 32, &[1]).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    // Nothing to copy: no request at all.
    mem_buf_write(&fd, MemForm::Wide, 1, 0, &[]).unwrap();
    let _ = std::fs::remove_file(&path);
}

#[test]
fn memory_forms_follow_the_feature_flags() {
    assert_eq!(MemForm::from_features(DriverFeatures::all()), MemForm::Wide);
    assert_eq!(
        MemForm::from_features(DriverFeatures::MEM_ALLOC_TYPE),
        MemForm::Typed
    );
    assert_eq!(
        MemForm::from_features(DriverFeatures::BIG_CORE_MAPS),
        MemForm::Untyped
    );
    assert!(MemForm::Wide.is_wide());
    assert!(!MemForm::Typed.is_wide());
}

#[test]
fn user_pointer_table_matches_the_structs() {
    assert_eq!(USER_POINTERS.len(), 5);
    for p in USER_POINTERS {
        let s = STRUCTS
            .iter()
            .find(|s| s.c_name == p.c_struct)
            .unwrap_or_else(|| panic!("{} has no layout", p.c_struct));
        let f = s.fields.iter().find(|f| f.name == p.field).unwrap();
        assert_eq!(f.size, 8, "{}.{} is a 64-bit pointer", p.c_struct, p.field);
        if let Span::Field(name) = p.span {
            assert!(s.fields.iter().any(|f| f.name == name));
        }
    }
}

#[test]
fn plain_requests_carry_no_user_pointer() {
    // The request table's pointer-carrying entries are exactly the user-pointer structs.
    for r in REQUESTS {
        let has_pointer = USER_POINTERS.iter().any(|p| p.c_struct == r.arg);
        let expected = matches!(
            r.name,
            "NEURON_IOCTL_MEM_ALLOC_V2"
                | "NEURON_IOCTL_MEM_ALLOC_V2MT"
                | "NEURON_IOCTL_MEM_ALLOC_V2MT64"
                | "NEURON_IOCTL_MEM_BUF_COPY"
                | "NEURON_IOCTL_MEM_BUF_COPY64"
        );
        assert_eq!(has_pointer, expected, "{}", r.name);
    }
}
