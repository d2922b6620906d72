//! Configuration: every variable, the `NEURON_RT_VISIBLE_CORES` grammar, malformed values.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_core::bitmap::CoreBitmap;
use nrt_core::config::{Config, LogLevel, MAX_DMA_PACKET_SIZES, parse_core_list};
use nrt_core::{Level, NrtStatus};
use nrt_sim::{Instance, SimConfig, SimMachine};
use nrt_tests::{assert_err, init, runtime_on};

fn cores(list: &str) -> Vec<u32> {
    parse_core_list("NEURON_RT_VISIBLE_CORES", list)
        .unwrap()
        .iter()
        .collect()
}

#[test]
fn visible_cores_grammar() {
    assert_eq!(cores("3"), [3]);
    assert_eq!(cores("3-6"), [3, 4, 5, 6]);
    assert_eq!(cores("1,2,3"), [1, 2, 3]);
    assert_eq!(cores("3-5,6"), [3, 4, 5, 6]);
    assert_eq!(cores("0,2-3,7"), [0, 2, 3, 7]);
    assert_eq!(cores(" 1 , 2 - 3 "), [1, 2, 3]);
    assert_eq!(cores("4-4"), [4]);
    // Deduplicated and sorted.
    assert_eq!(cores("6,1,3-4,4,1"), [1, 3, 4, 6]);
    assert_eq!(cores("511"), [511]);
}

#[test]
fn each_malformed_value_is_invalid_with_the_variable_and_value() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "NEURON_RT_VISIBLE_CORES",
            "3-1",
            "range start 3 is greater than range end 1",
        ),
        (
            "NEURON_RT_VISIBLE_CORES",
            "a",
            "\"a\" is not a non-negative integer",
        ),
        ("NEURON_RT_VISIBLE_CORES", "1,,2", "empty item in core list"),
        (
            "NEURON_RT_VISIBLE_CORES",
            "-1",
            "\"-1\" is not a core index or range (negative?)",
        ),
        ("NEURON_RT_VISIBLE_CORES", "", "empty core list"),
        ("NEURON_RT_VISIBLE_CORES", " ", "empty core list"),
        ("NEURON_RT_VISIBLE_CORES", "1,", "empty item in core list"),
        ("NEURON_RT_VISIBLE_CORES", "1-", "expected a number"),
        (
            "NEURON_RT_VISIBLE_CORES",
            "1-2-3",
            "\"2-3\" is not a non-negative integer",
        ),
        (
            "NEURON_RT_VISIBLE_CORES",
            "99999999999",
            "99999999999 is out of range",
        ),
        (
            "NEURON_RT_VISIBLE_CORES",
            "512",
            "core 512 is out of range (largest core index is 511)",
        ),
        (
            "NEURON_RT_VISIBLE_CORES",
            "0-4294967295",
            "core 4294967295 is out of range (largest core index is 511)",
        ),
        (
            "NEURON_RT_NUM_CORES",
            "a",
            "\"a\" is not a non-negative integer",
        ),
        (
            "NEURON_RT_NUM_CORES",
            "-1",
            "\"-1\" is not a non-negative integer",
        ),
        ("NEURON_RT_NUM_CORES", "", "expected a number"),
        (
            "NEURON_RT_NUM_CORES",
            "4294967296",
            "4294967296 is out of range",
        ),
        ("NEURON_RT_NUM_CORES", "513", "must be between 0 and 512"),
        (
            "NEURON_RT_NUM_CORES",
            "1.5",
            "\"1.5\" is not a non-negative integer",
        ),
        (
            "NEURON_RT_VIRTUAL_CORE_SIZE",
            "0",
            "must be between 1 and 8",
        ),
        (
            "NEURON_RT_VIRTUAL_CORE_SIZE",
            "two",
            "\"two\" is not a non-negative integer",
        ),
        (
            "NEURON_RT_LOG_LEVEL",
            "LOUD",
            "expected ERROR, WARNING, INFO, DEBUG, TRACE or QUIET",
        ),
        (
            "NEURON_RT_LOG_LEVEL",
            "",
            "expected ERROR, WARNING, INFO, DEBUG, TRACE or QUIET",
        ),
        ("NEURON_RT_EXEC_TIMEOUT", "0", "must be between 1 and 86400"),
        (
            "NEURON_RT_EXEC_TIMEOUT",
            "-5",
            "\"-5\" is not a non-negative integer",
        ),
        (
            "NEURON_RT_EXEC_TIMEOUT",
            "99999999999999999999",
            "99999999999999999999 is out of range",
        ),
        (
            "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS",
            "x",
            "\"x\" is not a non-negative integer",
        ),
        (
            "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS",
            "65537",
            "must be between 0 and 65536",
        ),
        ("NEURON_RT_RESET_CORES", "2", "expected 0, 1, true or false"),
        ("NEURON_RT_RESET_CORES", "", "expected 0, 1, true or false"),
        (
            "NEURON_RT_VALIDATE_HASH",
            "maybe",
            "expected 0, 1, true or false",
        ),
        (
            "NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY",
            "/tmp/a\0b",
            "contains a NUL byte",
        ),
        ("NEURON_RT_DBG_CC_DMA_PACKET_SIZE", "", "empty list"),
        (
            "NEURON_RT_DBG_CC_DMA_PACKET_SIZE",
            "1,,2",
            "empty item in list",
        ),
        (
            "NEURON_RT_DBG_CC_DMA_PACKET_SIZE",
            "4096,-1",
            "\"-1\" is not a non-negative integer",
        ),
    ];
    for &(var, value, why) in cases {
        let vars = [(var, value)];
        let shown = value.replace('\0', "\\0");
        assert_err(
            Config::parse(&vars),
            NrtStatus::Invalid,
            &format!("Invalid value for {var}: \"{shown}\": {why}"),
        );
    }
}

#[test]
fn overlong_values_are_refused_and_shown_truncated() {
    let long = "x".repeat(2000);
    let vars = [("NEURON_RT_S3_CORE_DUMP_PREFIX", long.as_str())];
    let e = Config::parse(&vars).unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid);
    assert_eq!(
        e.message(),
        format!(
            "Invalid value for NEURON_RT_S3_CORE_DUMP_PREFIX: \"{}...\": longer than 1024 bytes",
            "x".repeat(64)
        )
    );
}

#[test]
fn every_variable_is_parsed() {
    let vars = [
        ("NEURON_RT_VISIBLE_CORES", "2-3"),
        ("NEURON_RT_NUM_CORES", "2"),
        ("NEURON_RT_VIRTUAL_CORE_SIZE", "2"),
        ("NEURON_RT_LOG_LEVEL", "debug"),
        ("NEURON_RT_EXEC_TIMEOUT", "600"),
        ("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "8"),
        ("NEURON_RT_RESET_CORES", "0"),
        ("NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY", "/var/dumps/%p"),
        ("NEURON_RT_S3_CORE_DUMP_PREFIX", "s3://bucket/x"),
        ("NEURON_RT_VALIDATE_HASH", "true"),
        ("NEURON_RT_DBG_CC_DMA_PACKET_SIZE", "4096, 8192"),
        ("NEURON_RT_SOMETHING_ELSE", "ignored"),
    ];
    let c = Config::parse(&vars).unwrap();
    assert_eq!(c.visible_cores, Some(CoreBitmap::range(2, 2)));
    assert_eq!(c.num_cores, 2);
    assert_eq!(c.virtual_core_size, Some(2));
    assert_eq!(c.log_level, LogLevel::Level(Level::Debug));
    assert_eq!(c.exec_timeout_secs, Some(600));
    assert_eq!(c.async_exec_max_inflight, 8);
    assert!(c.implicit_async());
    assert!(!c.reset_cores);
    assert_eq!(c.local_core_dump_directory(), Some("/var/dumps/%p"));
    assert_eq!(c.s3_core_dump_prefix(), Some("s3://bucket/x"));
    assert!(c.validate_hash);
    assert_eq!(c.dbg_cc_dma_packet_size.as_slice(), &[4096, 8192]);
    assert_eq!(c.dbg_cc_dma_packet_size_ignored, 0);
}

#[test]
fn defaults_when_nothing_is_set() {
    let c = Config::parse(&[]).unwrap();
    assert_eq!(c, Config::default());
    assert_eq!(c.visible_cores, None);
    assert_eq!(c.num_cores, 0);
    assert_eq!(c.log_level, LogLevel::Level(Level::Error));
    assert!(c.reset_cores);
    assert!(!c.implicit_async());
    assert_eq!(c.local_core_dump_directory(), None);
    assert_eq!(c.s3_core_dump_prefix(), None);
}

#[test]
fn the_last_assignment_of_a_variable_wins() {
    let c = Config::parse(&[("NEURON_RT_NUM_CORES", "1"), ("NEURON_RT_NUM_CORES", "2")]).unwrap();
    assert_eq!(c.num_cores, 2);
}

#[test]
fn dbg_cc_dma_packet_size_is_clamped_to_16_with_a_warning() {
    let list: Vec<String> = (1..=20).map(|i| (i * 512).to_string()).collect();
    let joined = list.join(",");
    let c = Config::parse(&[("NEURON_RT_DBG_CC_DMA_PACKET_SIZE", joined.as_str())]).unwrap();
    assert_eq!(c.dbg_cc_dma_packet_size.len(), MAX_DMA_PACKET_SIZES);
    assert_eq!(c.dbg_cc_dma_packet_size[15], 16 * 512);
    assert_eq!(c.dbg_cc_dma_packet_size_ignored, 4);

    let m = SimMachine::new(SimConfig::funtime(Instance::Trn1, 1));
    let (rt, host) = runtime_on(&m);
    init(
        &rt,
        &[
            ("NEURON_RT_DBG_CC_DMA_PACKET_SIZE", joined.as_str()),
            ("NEURON_RT_LOG_LEVEL", "WARNING"),
        ],
    )
    .unwrap();
    assert!(host.contains(
        Level::Warning,
        "NEURON_RT_DBG_CC_DMA_PACKET_SIZE has more items than the maximum of 16 (4 streams x 4 \
         architectures), ignoring extra 4 item(s)"
    ));
    // Exactly 16: no warning.
    let sixteen = list[..16].join(",");
    let (rt, host) = runtime_on(&m);
    init(
        &rt,
        &[
            ("NEURON_RT_DBG_CC_DMA_PACKET_SIZE", sixteen.as_str()),
            ("NEURON_RT_LOG_LEVEL", "WARNING"),
        ],
    )
    .unwrap();
    assert!(!host.contains(Level::Warning, "NEURON_RT_DBG_CC_DMA_PACKET_SIZE"));
}

#[test]
fn init_uses_the_parsed_configuration() {
    let m = SimMachine::new(SimConfig::emulate_driver(Instance::Trn1, 1));
    let (rt, _host) = runtime_on(&m);
    init(&rt, &[("NEURON_RT_RESET_CORES", "0")]).unwrap();
    assert!(m.cores().iter().all(|c| c.resets == 0));
    rt.close();
    init(&rt, &[]).unwrap();
    assert!(m.cores().iter().all(|c| c.resets == 1));
    assert!(rt.config().unwrap().reset_cores);
}
