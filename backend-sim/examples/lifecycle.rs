//! Brings a simulated Neuron runtime up and down, printing what it did.
//!
//! ```text
//! cargo run -p nrt-sim --example lifecycle -- [inf2|trn1|trn2] [DEVICES]
//! ```
//!
//! `NEURON_RT_*` variables from the environment apply (for example
//! `NEURON_RT_VISIBLE_CORES=1-2` or `NEURON_RT_LOG_LEVEL=INFO`).

use std::process::ExitCode;

use nrt_core::version::{STRUCT_SIZE, write_version};
use nrt_core::{FrameworkType, Runtime};
use nrt_host::{EnvVars, StdHost};
use nrt_sim::{Instance, SimDriver};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let instance = match args.next() {
        None => Instance::Trn2,
        Some(name) => match Instance::from_name(&name) {
            Some(i) => i,
            None => {
                eprintln!("unknown instance {name:?}: expected inf2, trn1 or trn2");
                return ExitCode::from(2);
            }
        },
    };
    let devices = match args.next().map(|d| d.parse::<u32>()) {
        None => 1,
        Some(Ok(d)) => d,
        Some(Err(e)) => {
            eprintln!("bad device count: {e}");
            return ExitCode::from(2);
        }
    };

    let mut version = [0u8; STRUCT_SIZE];
    if let Err(e) = write_version(&mut version) {
        eprintln!("nrt_get_version: {e}");
        return ExitCode::FAILURE;
    }
    let detail_end = version[32..]
        .iter()
        .position(|&b| b == 0)
        .map_or(version.len(), |n| n + 32);
    println!("{}", String::from_utf8_lossy(&version[32..detail_end]));

    let rt = Runtime::with_host(SimDriver::new(instance, devices), StdHost::new());
    let env = EnvVars::capture();
    println!(
        "simulated machine: {devices} x {} (funtime)",
        instance.name()
    );
    if let Err(e) = rt.init(FrameworkType::NoFw, "", "", &env) {
        eprintln!("nrt_init failed: {e} (status {})", e.status().code());
        return ExitCode::FAILURE;
    }
    match rt.allocation() {
        Ok(a) => println!(
            "nrt_init: OK, {} logical core(s) of {} physical core(s): lnc {}-{}, pnc {:?}",
            a.topology.lnc_count(),
            a.topology.lnc_size(),
            a.topology.first_lnc(),
            a.topology.last_lnc(),
            a.reserved
        ),
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    }
    rt.close();
    println!("nrt_close: OK, state {}", rt.state().name());
    ExitCode::SUCCESS
}
