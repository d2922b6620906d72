//! Checks every request number, struct layout and constant of `nrt_linux::sys` against the
//! driver's machine-readable ABI (`shared/abi/neuron-driver-ioctl.json`, generated from the
//! driver headers), read at run time. A fresh clone has no `shared/` beside the repository:
//! then each test prints a `SKIPPED` line naming the missing file and passes, unless
//! `NRT_REQUIRE_SHARED=1` (set by `.ci/run`) makes that a failure.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use nrt_core::Driver;
use nrt_linux::sys;
use serde_json::Value;

/// The driver ABI description, or `None` (skip line printed) without `shared/`.
fn abi() -> Option<Value> {
    let path = nrt_tests::shared_path("abi/neuron-driver-ioctl.json")?;
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the driver ABI description {}: {e}",
            path.display()
        )
    });
    Some(
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not valid JSON: {e}", path.display())),
    )
}

fn list<'a>(abi: &'a Value, key: &str) -> &'a [Value] {
    abi[key]
        .as_array()
        .unwrap_or_else(|| panic!("`{key}` is not an array in the ABI description"))
}

fn find<'a>(items: &'a [Value], name: &str) -> &'a Value {
    items
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("{name} not found in the ABI description"))
}

fn uint(v: &Value, what: &str) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("{what} is not an unsigned integer: {v}"))
}

fn parse_hex(v: &Value, what: &str) -> u32 {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {v}"));
    let digits = s
        .strip_prefix("0x")
        .unwrap_or_else(|| panic!("{what} is not hex: {s}"));
    u32::from_str_radix(digits, 16).unwrap_or_else(|e| panic!("{what} = {s}: {e}"))
}

#[test]
fn request_numbers_match_json() {
    let Some(abi) = abi() else {
        return;
    };
    let ioctls = list(&abi, "ioctls");
    assert_eq!(sys::REQUESTS.len(), 28);
    for r in sys::REQUESTS {
        let entry = find(ioctls, r.name);
        let json_number = parse_hex(&entry["request"], r.name);
        assert_eq!(
            r.number, json_number,
            "{}: {:#010x} here, {json_number:#010x} in the JSON",
            r.name, r.number
        );
        assert_eq!(u64::from(r.number), uint(&entry["request_dec"], r.name));
        assert_eq!(entry["kernel_arg"], r.arg, "{}: argument type", r.name);
        assert_eq!(
            uint(&entry["kernel_arg_sizeof"], r.name),
            r.arg_size as u64,
            "{}: bytes the kernel copies",
            r.name
        );
        if r.misc {
            assert_eq!(
                entry["o_wronly_misc_ok"], true,
                "{} is issued on the O_WRONLY fd but the driver does not serve it there",
                r.name
            );
        }
        // Pointer-declared requests encode size 8, the others the struct size.
        let encoded = uint(&entry["size"], r.name);
        if entry["size_encodes_pointer"] == true {
            assert_eq!(encoded, sys::POINTER_ARG_SIZE as u64, "{}", r.name);
        } else {
            assert_eq!(encoded, r.arg_size as u64, "{}", r.name);
        }
    }
}

#[test]
fn composer_reproduces_every_json_request() {
    let Some(abi) = abi() else {
        return;
    };
    let ioctls = list(&abi, "ioctls");
    assert_eq!(ioctls.len(), 94);
    for entry in ioctls {
        let name = entry["name"].as_str().unwrap();
        let dir = uint(&entry["dir_bits"], name) as u32;
        let ty = uint(&entry["type_num"], name) as u8;
        let nr = uint(&entry["nr"], name) as u8;
        let size = uint(&entry["size"], name) as usize;
        assert_eq!(ty, sys::NEURON_IOCTL_BASE, "{name}");
        let composed = sys::ioc(dir, ty, nr, size);
        assert_eq!(composed, parse_hex(&entry["request"], name), "{name}");
        let by_macro = match entry["macro"].as_str().unwrap() {
            "_IO" => sys::io(ty, nr),
            "_IOR" => sys::ior(ty, nr, size),
            "_IOW" => sys::iow(ty, nr, size),
            "_IOWR" => sys::iowr(ty, nr, size),
            other => panic!("{name}: unknown macro {other}"),
        };
        assert_eq!(by_macro, composed, "{name}");
    }
}

#[test]
fn struct_layouts_match_json() {
    let Some(abi) = abi() else {
        return;
    };
    let structs = list(&abi, "structs");
    assert_eq!(sys::STRUCTS.len(), 23);
    for s in sys::STRUCTS {
        let entry = find(structs, s.c_name);
        assert_eq!(
            uint(&entry["sizeof"], s.c_name),
            s.size as u64,
            "{}",
            s.c_name
        );
        assert_eq!(
            uint(&entry["alignof"], s.c_name),
            s.align as u64,
            "{}",
            s.c_name
        );
        let fields = entry["fields"].as_array().unwrap();
        let json_names: Vec<&str> = fields.iter().map(|f| f["name"].as_str().unwrap()).collect();
        let rust_names: Vec<&str> = s.fields.iter().map(|f| f.name).collect();
        assert_eq!(rust_names, json_names, "{}: fields", s.c_name);
        for (f, jf) in s.fields.iter().zip(fields) {
            let what = format!("{}.{}", s.c_name, f.name);
            assert_eq!(uint(&jf["offset"], &what), f.offset as u64, "{what} offset");
            assert_eq!(uint(&jf["size"], &what), f.size as u64, "{what} size");
        }
    }
}

fn enum_value(abi: &Value, enum_name: &str, value: &str) -> u64 {
    let e = find(list(abi, "enums"), enum_name);
    uint(&e["values"][value], value)
}

#[test]
fn constants_match_json() {
    let Some(abi) = abi() else {
        return;
    };
    let hc = &abi["header_constants"];
    assert_eq!(
        uint(&hc["NEURON_IOCTL_BASE"], "base"),
        u64::from(sys::NEURON_IOCTL_BASE)
    );
    assert_eq!(
        uint(&hc["NEURON_NC_MAP_DEVICE"], "map"),
        u64::from(sys::NEURON_NC_MAP_DEVICE)
    );
    assert_eq!(
        uint(&hc["NEURON_DEVICE_DRIVER_INFO_VERSION0"], "v0"),
        u64::from(sys::NEURON_DEVICE_DRIVER_INFO_VERSION0)
    );

    // Every named driver feature flag, by its C name.
    let mut named = 0;
    for (name, flag) in sys::DriverFeatures::all().iter_names() {
        let c_name = format!("NEURON_DRIVER_FEATURE_{name}");
        assert_eq!(
            enum_value(&abi, "neuron_driver_feature_flag", &c_name),
            flag.bits(),
            "{c_name}"
        );
        named += 1;
    }
    assert_eq!(named, 8, "the driver features this backend names");
    let cinit = [
        (
            "NEURON_CINIT_STATE_STARTED",
            sys::NEURON_CINIT_STATE_STARTED,
        ),
        (
            "NEURON_CINIT_STATE_COMPLETED",
            sys::NEURON_CINIT_STATE_COMPLETED,
        ),
        (
            "NEURON_CINIT_STATE_INVALID",
            sys::NEURON_CINIT_STATE_INVALID,
        ),
    ];
    for (name, value) in cinit {
        assert_eq!(
            enum_value(&abi, "neuron_cinit_state", name),
            u64::from(value),
            "{name}"
        );
    }

    let dc = &abi["driver_constants"];
    let arch = &dc["neuron_arch"]["value"];
    for (name, value) in [
        ("NEURON_ARCH_INVALID", sys::NEURON_ARCH_INVALID),
        ("NEURON_ARCH_V1", sys::NEURON_ARCH_V1),
        ("NEURON_ARCH_V2", sys::NEURON_ARCH_V2),
        ("NEURON_ARCH_V3", sys::NEURON_ARCH_V3),
    ] {
        assert_eq!(uint(&arch[name], name), u64::from(value), "{name}");
    }
    let rev = &dc["pci_revision_special"]["value"];
    assert_eq!(uint(&rev["REVID_EMU"], "emu"), u64::from(sys::REVID_EMU));
    assert_eq!(uint(&rev["REVID_QEMU"], "qemu"), u64::from(sys::REVID_QEMU));
    assert_eq!(
        uint(&dc["MAX_NEURON_DEVICE_COUNT"]["value"], "devices"),
        u64::from(sys::MAX_NEURON_DEVICE_COUNT)
    );
    assert_eq!(
        uint(&dc["MAX_NC_PER_DEVICE"]["value"], "ncs"),
        u64::from(sys::MAX_NC_PER_DEVICE)
    );
}

#[test]
fn discovery_core_counts_match_json() {
    let Some(abi) = abi() else {
        return;
    };
    let ncs = &abi["driver_constants"]["nc_per_device"]["value"];
    for (device_name, key) in [
        ("Inferentia", "V1"),
        ("Trainium1", "V2"),
        ("Trainium2", "V3"),
    ] {
        // Without a readable core_count, discovery falls back on the architecture's count.
        let tree = common::FakeTree::new("json-cores");
        tree.node(0);
        tree.class_device(0, device_name, None);
        let info = tree.driver().discover().unwrap();
        assert_eq!(
            u64::from(info.cores_per_device),
            uint(&ncs[key], key),
            "{device_name}"
        );
    }
}

#[test]
fn user_pointers_are_exactly_the_pointer_fields_of_the_json() {
    let Some(abi) = abi() else {
        return;
    };
    let structs = list(&abi, "structs");
    // Every pointer field of a mirrored struct is described, and nothing else.
    let mut pointer_fields = Vec::new();
    for s in sys::STRUCTS {
        let entry = find(structs, s.c_name);
        for f in entry["fields"].as_array().unwrap() {
            if f["ctype"].as_str().unwrap().ends_with('*') {
                pointer_fields.push((s.c_name, f["name"].as_str().unwrap().to_string()));
            }
        }
    }
    assert_eq!(pointer_fields.len(), sys::USER_POINTERS.len());
    for p in sys::USER_POINTERS {
        assert!(
            pointer_fields
                .iter()
                .any(|(s, f)| *s == p.c_struct && f == p.field),
            "{}.{} is not a pointer field in the JSON",
            p.c_struct,
            p.field
        );
        if let sys::Span::Field(name) = p.span {
            let entry = find(structs, p.c_struct);
            assert!(
                entry["fields"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|f| f["name"] == name),
                "{}: span field {name}",
                p.c_struct
            );
        }
    }
}

#[test]
fn memory_categories_and_queue_types_match_json() {
    let Some(abi) = abi() else {
        return;
    };
    for (name, value) in [
        (
            "NEURON_MEMALLOC_TYPE_UNKNOWN_HOST",
            sys::MemType::UNKNOWN_HOST,
        ),
        ("NEURON_MEMALLOC_TYPE_MISC_HOST", sys::MemType::MISC_HOST),
        (
            "NEURON_MEMALLOC_TYPE_UNKNOWN_DEVICE",
            sys::MemType::UNKNOWN_DEVICE,
        ),
        (
            "NEURON_MEMALLOC_TYPE_CODE_DEVICE",
            sys::MemType::CODE_DEVICE,
        ),
        (
            "NEURON_MEMALLOC_TYPE_TENSORS_DEVICE",
            sys::MemType::TENSORS_DEVICE,
        ),
    ] {
        assert_eq!(
            enum_value(&abi, "mem_alloc_category_t", name),
            u64::from(value.0),
            "{name}"
        );
    }
    assert_eq!(
        enum_value(&abi, "NQ_TYPE", "NQ_TYPE_NOTIFY"),
        u64::from(sys::NQ_TYPE_NOTIFY)
    );
    assert_eq!(
        enum_value(&abi, "NQ_DEVICE_TYPE", "NQ_DEVICE_TYPE_NEURON_CORE"),
        u64::from(sys::NQ_DEVICE_TYPE_NEURON_CORE)
    );
}
