//! No panic is reachable from input: random and hostile configuration values, templates and
//! buffers, driven by a fixed-seed generator so failures reproduce.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_core::config::{Config, parse_core_list, vars};
use nrt_core::coredump::{PathVariables, format_path};
use nrt_core::version::write_version;
use nrt_core::{InitState, NrtStatus};
use nrt_sim::{Instance, SimConfig, SimMachine};
use nrt_tests::{init, runtime_on};

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A string biased towards the grammar's alphabet.
    fn value(&mut self) -> String {
        const ALPHABET: &[char] = &[
            '0', '1', '2', '3', '9', '-', ',', ' ', 'a', '%', '\0', 'é', '5', '1', '2', '7',
        ];
        let len = self.below(24) as usize;
        (0..len)
            .map(|_| ALPHABET[self.below(ALPHABET.len() as u64) as usize])
            .collect()
    }
}

#[test]
fn config_parse_never_panics_on_random_values() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..20_000 {
        let name = vars::ALL[rng.below(vars::ALL.len() as u64) as usize];
        let value = rng.value();
        match Config::parse(&[(name, value.as_str())]) {
            Ok(_) => {}
            Err(e) => {
                assert_eq!(e.status(), NrtStatus::Invalid);
                assert!(
                    e.message()
                        .starts_with(&format!("Invalid value for {name}: \""))
                );
            }
        }
        let _ = parse_core_list(name, &value);
    }
}

#[test]
fn core_list_results_are_sorted_and_in_range() {
    let mut rng = Rng(42);
    for _ in 0..20_000 {
        let v = rng.value();
        if let Ok(set) = parse_core_list("X", &v) {
            let cores: Vec<u32> = set.iter().collect();
            assert!(cores.windows(2).all(|w| w[0] < w[1]), "{v:?} -> {cores:?}");
            assert!(!cores.is_empty());
        }
    }
}

#[test]
fn templater_never_overflows_on_random_templates_and_sizes() {
    let vars = PathVariables {
        pid: "1",
        tid: "22",
        log_id: "333",
        cluster_id: "none",
        datetime: "20260101-000000",
        instance_id: "i-abc",
    };
    let mut rng = Rng(7);
    const ALPHABET: &[u8] = b"%ptlcdixyz/";
    for _ in 0..20_000 {
        let len = rng.below(40) as usize;
        let t: Vec<u8> = (0..len)
            .map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize])
            .collect();
        let cap = rng.below(48) as usize;
        let mut buf = vec![0xEEu8; cap + 16];
        let n = format_path(Some(&t), &mut buf[..cap], &vars);
        if cap == 0 {
            assert_eq!(n, 0);
        } else {
            assert!(n < cap);
            assert_eq!(buf[n], 0);
        }
        assert!(buf[cap..].iter().all(|&b| b == 0xEE));
    }
}

#[test]
fn version_never_writes_past_the_buffer() {
    for size in 0..=256 {
        let mut buf = vec![0x5Au8; 300];
        let r = write_version(&mut buf[..size]);
        assert_eq!(r.is_ok(), size >= 160);
        assert!(buf[size..].iter().all(|&b| b == 0x5A), "size {size}");
    }
}

#[test]
fn init_with_random_environments_ends_in_init_or_start() {
    let mut rng = Rng(99);
    for _ in 0..2_000 {
        let instance = [Instance::Inf2, Instance::Trn1, Instance::Trn2][rng.below(3) as usize];
        let devices = rng.below(4) as u32;
        let machine = if rng.below(2) == 0 {
            SimMachine::new(SimConfig::funtime(instance, devices))
        } else {
            SimMachine::new(SimConfig::emulate_driver(instance, devices))
        };
        let (rt, _host) = runtime_on(&machine);
        let mut env: Vec<(String, String)> = Vec::new();
        for _ in 0..rng.below(4) {
            let name = [
                vars::VISIBLE_CORES,
                vars::NUM_CORES,
                vars::VIRTUAL_CORE_SIZE,
            ][rng.below(3) as usize];
            let value = match rng.below(3) {
                0 => rng.below(10).to_string(),
                1 => format!("{}-{}", rng.below(10), rng.below(10)),
                _ => rng.value(),
            };
            env.push((name.to_string(), value));
        }
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        match init(&rt, &pairs) {
            Ok(()) => {
                assert_eq!(rt.state(), InitState::Init);
                let a = rt.allocation().unwrap();
                assert_eq!(a.reserved, a.topology.physical_cores());
                rt.close();
            }
            Err(e) => {
                assert!(
                    matches!(e.status(), NrtStatus::Invalid | NrtStatus::Failure),
                    "{e:?} for {pairs:?}"
                );
                assert_eq!(rt.state(), InitState::Start);
            }
        }
        assert!(
            machine.reserved().is_empty(),
            "{pairs:?} leaked {:?}",
            machine.reserved()
        );
    }
}

#[test]
fn neff_parser_never_panics_on_mutated_files() {
    use nrt_core::io::{Dtype, TensorUsage};
    use nrt_core::neff::{self, NeffSpec, NeffTensor, ParseOptions, SubgraphSpec};
    let spec = |gzip| NeffSpec {
        name: "m".into(),
        uuid: [3; 16],
        version: (2, 0),
        feature_bits: nrt_core::neff::NeffFeatures::empty(),
        lnc_size: 1,
        num_tpb: 1,
        gzip,
        subgraphs: vec![SubgraphSpec {
            name: "sg00".into(),
            members: vec![("nrt-sim.prog".into(), vec![1, 2, 3])],
        }],
        tensors: vec![NeffTensor {
            name: "x".into(),
            usage: TensorUsage::Input,
            size: 8,
            dtype: Dtype::Float32,
            shape: vec![2],
            var_id: 1,
        }],
    };
    // The compiler fixture is a seed too when `../shared/` has it (a skip line says otherwise).
    let mut seeds = vec![
        neff::write(&spec(true)).unwrap(),
        neff::write(&spec(false)).unwrap(),
    ];
    seeds.extend(nrt_tests::matmul_fixture());
    let mut rng = Rng(0xDEAD_BEEF);
    for i in 0..3_000 {
        let mut b = seeds[i % seeds.len()].clone();
        let payload = b.len() - 1024;
        for _ in 0..1 + rng.below(4) {
            // Mostly the plain-tar payload and the header, where JSON and tar parsing are reached.
            let at = match rng.below(3) {
                0 => rng.below(64) as usize,
                _ => 1024 + rng.below(payload as u64) as usize,
            };
            b[at] = rng.next() as u8;
        }
        if rng.below(10) == 0 {
            let cut = 1024 + rng.below(payload as u64) as usize;
            b.truncate(cut);
            let len = (b.len() - 1024) as u64;
            b[16..24].copy_from_slice(&len.to_le_bytes());
        }
        match neff::parse(&b, &ParseOptions::default()) {
            Ok(n) => assert!(!n.tensors.is_empty()),
            Err(e) => assert!(
                matches!(
                    e.status(),
                    NrtStatus::Invalid | NrtStatus::UnsupportedNeffVersion
                ),
                "{e:?}"
            ),
        }
    }
}
