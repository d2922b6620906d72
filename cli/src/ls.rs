//! `nrt ls`: devices and cores of a backend, in the style of `neuron-ls`.

use nrt_backend::{AnyDriver, BackendKind};
use nrt_core::driver::{Arch, DeviceInfo, Platform};
use nrt_core::{CoreBitmap, Driver, Runtime, topology};
use nrt_sim::Reports;

use crate::args::LsArgs;
use crate::backend::{CliHost, choose, init, rt_err};
use crate::error::{CliError, Result};
use crate::out::{self, Report};

fn arch_name(a: Arch) -> &'static str {
    match a {
        Arch::V1 => "NeuronCore-v1",
        Arch::V2 => "NeuronCore-v2",
        Arch::V3 => "NeuronCore-v3",
        Arch::V4 => "NeuronCore-v4",
        Arch::Invalid => "unknown cores",
    }
}

/// A boxed table as neuron-ls draws it.
fn boxed(r: &mut Report, header: &[&str], rows: &[Vec<String>]) {
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, c) in row.iter().enumerate() {
            if let Some(x) = w.get_mut(i) {
                *x = (*x).max(c.chars().count());
            }
        }
    }
    let rule: String = w
        .iter()
        .map(|n| format!("+{}", "-".repeat(n + 2)))
        .collect::<String>()
        + "+";
    let line = |cells: Vec<&str>| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let width = w.get(i).copied().unwrap_or(0);
            s.push_str(&format!(
                "| {c}{} ",
                " ".repeat(width.saturating_sub(c.chars().count()))
            ));
        }
        s + "|"
    };
    r.line(&rule);
    r.line(line(header.to_vec()));
    r.line(&rule);
    for row in rows {
        r.line(line(row.iter().map(String::as_str).collect()));
    }
    r.line(&rule);
}

fn show(
    driver: AnyDriver,
    backend: &str,
    title: String,
    hbm_per_device: Option<u64>,
) -> Result<()> {
    let info: DeviceInfo = driver
        .discover()
        .map_err(|e| CliError::new(format!("{backend} backend: no usable Neuron device: {e}")))?;
    let rt = Runtime::with_host(driver, CliHost::new());
    init(&rt, backend)?;
    let alloc = rt
        .allocation()
        .map_err(rt_err("cannot read the core allocation"))?;
    rt.close();
    let reserved = alloc.reserved;
    let t = alloc.topology;

    let mut r = Report::new();
    r.field("backend", title);
    r.field(
        "devices",
        format!(
            "{} × {} {} per device ({}), {} physical cores in all",
            info.device_count,
            info.cores_per_device,
            arch_name(info.arch),
            match info.platform {
                Platform::Hardware => "hardware",
                Platform::Simulator => "simulator",
            },
            info.total_physical_cores()
        ),
    );
    let per = info.cores_per_device.max(1);
    let rows: Vec<Vec<String>> = (0..info.device_count)
        .map(|d| {
            let cores = topology::device_pncs(d, per);
            let mine = reserved.intersection(&cores);
            vec![
                d.to_string(),
                per.to_string(),
                cores.to_string(),
                hbm_per_device.map_or("-".to_owned(), out::bytes),
                if mine.is_empty() {
                    "-".to_owned()
                } else {
                    mine.to_string()
                },
            ]
        })
        .collect();
    boxed(
        &mut r,
        &[
            "NEURON DEVICE",
            "NEURON CORES",
            "CORE IDS",
            "NEURON MEMORY",
            "THIS PROCESS COULD RESERVE",
        ],
        &rows,
    );
    r.field(
        "logical",
        format!(
            "{} physical core{} per logical core; this process could reserve {} logical core{} \
             ({}), physical cores {}",
            t.lnc_size(),
            if t.lnc_size() == 1 { "" } else { "s" },
            t.lnc_count(),
            if t.lnc_count() == 1 { "" } else { "s" },
            or_none(CoreBitmap::range(t.first_lnc(), t.lnc_count())),
            or_none(reserved)
        ),
    );
    r.line("           (NEURON_RT_VISIBLE_CORES, NEURON_RT_NUM_CORES and NEURON_RT_VIRTUAL_CORE_SIZE are honoured)");
    r.print();
    Ok(())
}

pub(crate) fn ls(a: &LsArgs) -> Result<()> {
    let chosen = choose(a.target.backend, a.target.instance, a.devices, Reports::Off)?;
    let driver = chosen.open();
    match chosen.kind {
        BackendKind::Sim => {
            let instance = chosen.selection.instance;
            show(
                driver,
                chosen.name(),
                format!(
                    "sim: simulated {} instance, funtime mode (no kernel driver)",
                    instance.name()
                ),
                Some(instance.hbm_bytes_per_device()),
            )
        }
        BackendKind::Linux => {
            let title = match driver.as_linux() {
                Some(d) => format!(
                    "linux: {} (kernel driver)",
                    d.dev_dir().join("neuron*").display()
                ),
                None => "linux (kernel driver)".to_owned(),
            };
            show(driver, chosen.name(), title, None)
        }
    }
}

/// `0-3,6`, or "none" for no core.
fn or_none(cores: CoreBitmap) -> String {
    if cores.is_empty() {
        "none".to_owned()
    } else {
        cores.to_string()
    }
}
