//! Arbitrary `NEURON_RT_*` name/value pairs → `Config::parse` and `parse_core_list`, then
//! `Runtime::init` on a simulated machine with those variables, then `close`.
//!
//! Asserted: a parse error is `NRT_INVALID` "Invalid value for NEURON_RT_…"; init ends in INIT
//! (with exactly the allocated physical cores reserved and the parsed configuration in force)
//! or in START with an `NRT_INVALID` / `NRT_FAILURE` status and nothing reserved; close leaves
//! START and nothing reserved; and a retry without variables then succeeds on a machine that
//! has devices (rollback is complete).
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use nrt_core::config::{Config, parse_core_list, vars};
use nrt_core::{FrameworkType, InitState, NrtStatus, Runtime};
use nrt_sim::{Instance, SimConfig, SimDriver, SimMachine};

#[derive(Debug)]
struct Input {
    instance: Instance,
    devices: u32,
    emulate: bool,
    vars: Vec<(String, String)>,
}

fn value(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    Ok(match u.int_in_range(0..=4)? {
        0 => u.int_in_range(0u32..=40)?.to_string(),
        1 => format!(
            "{}-{}",
            u.int_in_range(0u32..=40)?,
            u.int_in_range(0u32..=40)?
        ),
        2 => {
            let parts: Vec<String> = (0..u.int_in_range(1..=4)?)
                .map(|_| u.int_in_range(0u32..=70000).map(|v| v.to_string()))
                .collect::<arbitrary::Result<_>>()?;
            parts.join(",")
        }
        3 => (*u.choose(&[
            "TRACE",
            "DEBUG",
            "INFO",
            "WARNING",
            "ERROR",
            "FATAL",
            "OFF",
            "0",
            "1",
            "yes",
            "no",
            "true",
            "false",
            "/tmp/x%p",
            "s3://b/p",
            "",
            " ",
            "-1",
            "18446744073709551616",
        ])?)
        .to_string(),
        _ => String::arbitrary(u)?,
    })
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let instance = *u.choose(&[Instance::Inf2, Instance::Trn1, Instance::Trn2])?;
        let devices = u.int_in_range(0..=3)?;
        let emulate = bool::arbitrary(u)?;
        let mut v = Vec::new();
        for _ in 0..u.int_in_range(0..=5)? {
            let name = if u.ratio(7, 8)? {
                (*u.choose(&vars::ALL)?).to_string()
            } else {
                format!("NEURON_RT_{}", String::arbitrary(u)?)
            };
            v.push((name, value(u)?));
        }
        Ok(Input {
            instance,
            devices,
            emulate,
            vars: v,
        })
    }
}

fuzz_target!(|input: Input| {
    let pairs: Vec<(&str, &str)> = input
        .vars
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    for (k, v) in &pairs {
        if let Ok(set) = parse_core_list(k, v) {
            let cores: Vec<u32> = set.iter().collect();
            assert!(!cores.is_empty() && cores.windows(2).all(|w| w[0] < w[1]));
        }
    }
    let parsed = Config::parse(&pairs.as_slice());
    if let Err(e) = &parsed {
        assert_eq!(e.status(), NrtStatus::Invalid, "{e:?}");
        assert!(
            e.message().starts_with("Invalid value for NEURON_RT_"),
            "{e:?}"
        );
    }

    let machine = SimMachine::new(if input.emulate {
        SimConfig::emulate_driver(input.instance, input.devices)
    } else {
        SimConfig::funtime(input.instance, input.devices)
    });
    let rt = Runtime::new(SimDriver::attach(&machine));
    match rt.init(FrameworkType::NoFw, "", "", &pairs.as_slice()) {
        Ok(()) => {
            assert!(parsed.is_ok(), "init accepted what Config::parse refused");
            assert_eq!(rt.state(), InitState::Init);
            let a = rt.allocation().expect("allocation while INIT");
            assert_eq!(a.reserved, a.topology.physical_cores());
            assert!(a.topology.lnc_count() > 0);
            assert_eq!(
                rt.visible_lnc_count().expect("vnc count"),
                a.topology.lnc_count()
            );
            assert!(rt.config().is_ok());
            // Idempotent while INIT.
            assert!(
                rt.init(FrameworkType::NoFw, "", "", &pairs.as_slice())
                    .is_ok()
            );
            rt.close();
        }
        Err(e) => {
            assert!(
                matches!(e.status(), NrtStatus::Invalid | NrtStatus::Failure),
                "{e:?} for {pairs:?}"
            );
            assert_eq!(rt.state(), InitState::Start, "{e:?}");
        }
    }
    assert_eq!(rt.state(), InitState::Start);
    assert!(
        machine.reserved().is_empty(),
        "{pairs:?} leaked {:?}",
        machine.reserved()
    );
    if input.devices > 0 {
        let empty: [(&str, &str); 0] = [];
        let r = rt.init(FrameworkType::NoFw, "", "", &empty);
        assert!(r.is_ok(), "retry without variables: {r:?}");
        rt.close();
        assert!(machine.reserved().is_empty());
    }
});
