//! Running a submission's programs on the engine: one subgraph on its core, or the
//! subgraphs of one model together in lock step (`engine::Device::execute_group`), and the
//! outcome of each, kept as the machine's reports say.

use nrt_core::driver::{ErrorKind, ExecRequest};

use super::{SimDriver, SimError};
use crate::engine;

impl SimDriver {
    /// The engine options of `request`'s executions.
    fn exec_options(&self, request: &ExecRequest<'_>) -> engine::ExecOptions {
        let max_ticks = request
            .timeout_secs
            .map_or(engine::ExecOptions::default().max_ticks, |s| {
                u64::from(s).saturating_mul(engine::TICKS_PER_SECOND)
            });
        let reports = self.machine.reports();
        engine::ExecOptions {
            max_ticks,
            record_events: reports.records_events(),
            record_descriptors: reports.records_descriptors(),
            ..Default::default()
        }
    }

    /// The engine device of physical core `pnc`.
    fn engine_of(&self, pnc: u32) -> Result<&engine::Device, SimError> {
        self.machine
            .device(self.device_of_pnc(pnc))
            .map(|d| &d.engine)
            .ok_or(SimError::new(ErrorKind::InvalidArgument, "no such device"))
    }

    /// Runs one subgraph's program with its I/O tensors bound to the request's buffers.
    pub(super) fn run_program(
        &self,
        pnc: u32,
        lp: &engine::LoadedProgram,
        bound: &[(usize, u64)],
        request: &ExecRequest<'_>,
    ) -> Result<(), SimError> {
        let report = self
            .engine_of(pnc)?
            .execute_bound(lp, bound, &self.exec_options(request))
            .map_err(cannot_run)?;
        self.finish(pnc, report)
    }

    /// Runs the subgraphs of one model together on their cores of one device, in lock step
    /// (`engine::Device::execute_group`); the first failure is the result, every report is
    /// kept.
    pub(super) fn run_group(
        &self,
        runs: &[Run],
        request: &ExecRequest<'_>,
    ) -> Result<(), SimError> {
        let Some((pnc0, _, _)) = runs.first() else {
            return Ok(());
        };
        let group: Vec<(&engine::LoadedProgram, &[(usize, u64)])> = runs
            .iter()
            .map(|(_, lp, bound)| (lp, bound.as_slice()))
            .collect();
        let reports = self
            .engine_of(*pnc0)?
            .execute_group(&group, &self.exec_options(request))
            .map_err(cannot_run)?;
        let mut result = Ok(());
        for ((pnc, _, _), report) in runs.iter().zip(reports) {
            let r = self.finish(*pnc, report);
            if result.is_ok() {
                result = r;
            }
        }
        result
    }

    /// Keeps core `pnc`'s report as the machine says and turns its outcome into the driver's.
    fn finish(&self, pnc: u32, report: engine::ExecReport) -> Result<(), SimError> {
        let result = report.result().map_err(|e| {
            let kind = match e.status() {
                nrt_core::NrtStatus::Timeout => ErrorKind::Timeout,
                _ => ErrorKind::Execution,
            };
            SimError::with_detail(kind, "execution failed", &e)
        });
        // Kept whether the run succeeded or not (a failed run's hazards are in it).
        self.machine.record_report(pnc, Some(report));
        result
    }
}

/// One subgraph to run: its physical core, its program and its bound tensors.
type Run = (u32, engine::LoadedProgram, Vec<(usize, u64)>);

fn cannot_run(e: nrt_core::Error) -> SimError {
    SimError::with_detail(ErrorKind::InvalidArgument, "cannot run the program", &e)
}
