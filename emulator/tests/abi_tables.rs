//! Checks the emulator's own field tables and request table against the driver's
//! machine-readable ABI (`shared/abi/neuron-driver-ioctl.json`), read at run time: every
//! layout's struct name, `sizeof` and fields (name, offset, size, in order), every request's
//! number, direction, `_IOC_NR`, `_IOC_SIZE`, copied struct and per-request rules, and that
//! the table covers every request of the JSON. Without `shared/` beside the repository each
//! test prints a `SKIPPED` line and passes, unless `NRT_REQUIRE_SHARED=1`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_emu::abi::{self, REQUESTS};
use serde_json::Value;

fn abi_json() -> Option<Value> {
    let path = nrt_tests::shared_path("abi/neuron-driver-ioctl.json")?;
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    Some(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("`{key}` is not an array"))
}

fn uint(v: &Value, what: &str) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("{what} is not an unsigned integer: {v}"))
}

#[test]
fn every_layout_matches_the_json() {
    let Some(json) = abi_json() else { return };
    let structs = list(&json, "structs");
    assert!(abi::layouts::ALL.len() >= 31);
    for layout in abi::layouts::ALL {
        let name = format!("struct {}", layout.name);
        let s = structs
            .iter()
            .find(|s| s["name"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} is not in the JSON"));
        assert_eq!(
            layout.sizeof as u64,
            uint(&s["sizeof"], "sizeof"),
            "{name} sizeof"
        );
        let fields = list(s, "fields");
        assert_eq!(layout.fields.len(), fields.len(), "{name}: field count");
        for (mine, theirs) in layout.fields.iter().zip(fields) {
            assert_eq!(
                mine.name,
                theirs["name"].as_str().unwrap(),
                "{name}: field order"
            );
            assert_eq!(
                mine.offset as u64,
                uint(&theirs["offset"], "offset"),
                "{name}.{}: offset",
                mine.name
            );
            assert_eq!(
                mine.size as u64,
                uint(&theirs["size"], "size"),
                "{name}.{}: size",
                mine.name
            );
        }
    }
}

#[test]
fn every_request_matches_the_json() {
    let Some(json) = abi_json() else { return };
    let ioctls = list(&json, "ioctls");
    assert_eq!(
        REQUESTS.len(),
        ioctls.len(),
        "the table covers every request"
    );
    for (mine, theirs) in REQUESTS.iter().zip(ioctls) {
        let full = format!("NEURON_IOCTL_{}", mine.name);
        assert_eq!(theirs["name"].as_str().unwrap(), full, "header order");
        assert_eq!(
            u64::from(mine.request),
            uint(&theirs["request_dec"], "request_dec"),
            "{full}: request"
        );
        assert_eq!(
            u64::from(mine.dir()),
            uint(&theirs["dir_bits"], "dir"),
            "{full}: dir"
        );
        assert_eq!(
            u64::from(mine.nr()),
            uint(&theirs["nr"], "nr"),
            "{full}: nr"
        );
        assert_eq!(
            u64::from(mine.size()),
            uint(&theirs["size"], "size"),
            "{full}: size"
        );
        assert_eq!(
            u64::from(abi::requests::ioc_type(mine.request)),
            uint(&theirs["type_num"], "type"),
            "{full}: type"
        );
        assert_eq!(
            Some(mine.misc_ok),
            theirs["o_wronly_misc_ok"].as_bool(),
            "{full}: O_WRONLY"
        );
        assert_eq!(
            Some(mine.attach_checked),
            theirs["pid_attach_checked"].as_bool(),
            "{full}: attach check"
        );
        if let Some(layout) = mine.arg {
            assert_eq!(
                theirs["kernel_arg"].as_str(),
                Some(format!("struct {}", layout.name).as_str()),
                "{full}: copied struct"
            );
            assert_eq!(
                layout.sizeof as u64,
                uint(&theirs["kernel_arg_sizeof"], "kernel_arg_sizeof"),
                "{full}: copied size"
            );
        }
    }
    // Every request the emulator serves has a table.
    for name in [
        "COMPATIBLE_VERSION",
        "DEVICE_BASIC_INFO",
        "DRIVER_INFO_GET",
        "CRWL_NC_RANGE_MARK",
        "CRWL_NC_RANGE_MARK_EXT0",
        "CRWL_NC_RANGE_UNMARK",
        "CRWL_NC_RANGE_UNMARK_EXT0",
        "CRWL_READER_ENTER",
        "NC_RESET",
        "NC_RESET_READY",
        "CINIT_SET_STATE",
        "NC_MODEL_STARTED_COUNT",
        "MEM_ALLOC",
        "MEM_ALLOC_V2",
        "MEM_ALLOC_V2MT",
        "MEM_ALLOC_V2MT64",
        "MEM_FREE",
        "MEM_GET_EXTENDED_INFO",
        "MEM_GET_PA",
        "MEM_GET_INFO",
        "MEM_BUF_COPY",
        "MEM_BUF_COPY64",
        "MEM_BUF_ZEROCOPY64",
        "MEM_COPY",
        "MEM_COPY64",
        "MEMSET",
        "MEMSET64",
        "MEM_MC_GET_INFO",
        "MEM_MC_GET_INFO_V2",
        "SEMAPHORE_READ",
        "SEMAPHORE_WRITE",
        "SEMAPHORE_INCREMENT",
        "SEMAPHORE_DECREMENT",
        "EVENT_SET",
        "EVENT_GET",
        "NOTIFICATIONS_INIT_V2",
        "NOTIFICATIONS_INIT_WITH_REALLOC_V2",
        "HOST_DEVICE_ID",
    ] {
        let r = REQUESTS.iter().find(|r| r.name == name).unwrap();
        assert!(r.arg.is_some(), "{name} has no field table");
    }
}

#[test]
fn driver_constants_match_the_json() {
    let Some(json) = abi_json() else { return };
    let c = &json["driver_constants"];
    assert_eq!(
        c["driver_version"]["value"].as_str(),
        Some(nrt_emu::DRIVER_VERSION)
    );
    for (instance, key) in [
        (nrt_sim::Instance::Trn1, "V2"),
        (nrt_sim::Instance::Inf2, "V2"),
        (nrt_sim::Instance::Trn2, "V3"),
    ] {
        let range = instance.driver_compat_range();
        let want = &c["rt_compatible_version"][key];
        assert_eq!(u64::from(range.min), uint(&want["min"], "min"));
        assert_eq!(u64::from(range.max), uint(&want["max"], "max"));
        assert_eq!(
            u64::from(instance.cores_per_device()),
            uint(&c["nc_per_device"]["value"][key], "nc_per_device")
        );
        assert_eq!(
            u64::from(nrt_emu::identity::arch_number(instance)),
            uint(
                &c["neuron_arch"]["value"][format!("NEURON_ARCH_{key}").as_str()],
                "arch"
            )
        );
    }
    let flags = json["enums"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "neuron_driver_feature_flag")
        .unwrap();
    let all: u64 = flags["values"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| uint(v, "flag"))
        .fold(0, |a, b| a | b);
    assert_eq!(nrt_emu::identity::FEATURE_FLAGS, all);
    assert_eq!(
        uint(
            &json["header_constants"]["NEURON_MAX_PROCESS_PER_DEVICE"],
            "max"
        ),
        16
    );
}
