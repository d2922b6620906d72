//! The Chrome/Perfetto trace parses and agrees with the counters.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;

use common::*;
use nrt_sim::engine::{DType, EngineId, kernels, trace};

fn union_len(mut iv: Vec<(u64, u64)>) -> u64 {
    iv.sort_unstable();
    let (mut total, mut cur): (u64, Option<(u64, u64)>) = (0, None);
    for (s, e) in iv {
        cur = match cur {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

#[test]
fn trace_events_match_counters() {
    let (m, k, n) = (256usize, 256usize, 512usize);
    let a = data(20, k * m, DType::Bf16);
    let b = data(21, k * n, DType::Bf16);
    let p = kernels::matmul(m as u64, k as u64, n as u64, DType::Bf16, DType::F32).unwrap();
    let (_, report) = run(p, &[("lhs_t", DType::Bf16, &a), ("rhs", DType::Bf16, &b)]);
    report.result().unwrap();
    assert!(!report.events_truncated);
    let json = trace::chrome_trace_json(&report);
    assert_eq!(json, trace::chrome_trace_json(&report), "deterministic");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["otherData"]["validated_against_hw"], false);
    assert_eq!(v["otherData"]["ticks"], report.ticks);
    let events = v["traceEvents"].as_array().unwrap();
    // Track names.
    let names: BTreeMap<u64, String> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for e in EngineId::ALL {
        assert_eq!(names[&(e.index() as u64)], e.name());
    }
    assert!(names.values().any(|n| n.starts_with("DMA queue")));
    assert!(names.values().any(|n| n.starts_with("DMA engine")));
    // Per track and category: slice intervals in ticks.
    let mut by: BTreeMap<(u64, String), Vec<(u64, u64)>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let s = e["args"]["tick"].as_u64().unwrap();
        let d = e["args"]["ticks"].as_u64().unwrap();
        assert!(s + d <= report.ticks);
        let ts = e["ts"].as_f64().unwrap();
        assert!((ts - s as f64 / 1400.0).abs() < 1e-5);
        by.entry((
            e["tid"].as_u64().unwrap(),
            e["cat"].as_str().unwrap().to_owned(),
        ))
        .or_default()
        .push((s, s + d));
    }
    let get = |tid: u64, cat: &str| by.get(&(tid, cat.to_owned())).cloned().unwrap_or_default();
    for e in EngineId::ALL {
        let c = report.engine(e);
        let tid = e.index() as u64;
        // Instruction slices cover exactly the active ticks.
        assert_eq!(union_len(get(tid, "instr")), c.active, "{e} active");
        let count = get(tid, "instr").len() as u64;
        assert_eq!(count, c.instructions, "{e} instructions");
        let waits: u64 = get(tid, "sem_wait").iter().map(|(s, e)| e - s).sum();
        assert_eq!(
            waits,
            c.stall_semaphore + c.stall_dma,
            "{e} semaphore waits"
        );
        let ports: u64 = get(tid, "port_wait").iter().map(|(s, e)| e - s).sum();
        assert_eq!(ports, c.stall_port, "{e} port waits");
    }
    for (d, c) in report.dma_engines.iter().enumerate() {
        let descs = get(16 + d as u64, "dma_desc");
        assert_eq!(descs.len() as u64, c.instructions, "DMA {d} descriptors");
        assert_eq!(
            union_len(descs),
            c.active + c.stall_bandwidth,
            "DMA {d} busy"
        );
    }
    // Transfers on queue tracks carry every byte the engines moved.
    let moved: u64 = report.dma_engines.iter().map(|c| c.bytes).sum();
    let carried: u64 = events
        .iter()
        .filter(|e| e["cat"] == "dma_transfer")
        .map(|e| e["args"]["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(moved, carried);
    // One M group and one N block: each operand is loaded once, the result stored once.
    assert_eq!(moved as usize, k * m * 2 + k * n * 2 + m * n * 4);
}
