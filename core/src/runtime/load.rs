//! `nrt_load` (spec 000 §6): parse, choose the logical core, the stage seam, publish.

use alloc::string::String;
use alloc::vec::Vec;

use super::{ModelHandle, Runtime};
use crate::driver::{Driver, DriverError, StagedModel, SubgraphImage};
use crate::error::{Error, Result};
use crate::events::RuntimeEvent;
use crate::fmt::Level;
use crate::host::{Host, Platform as _};
use crate::io::IoTable;
use crate::model::Model;
use crate::neff::{self, KeepMembers, Neff, ParseOptions, SIM_PROGRAM_MEMBER};

/// Most bytes of subgraph members a load keeps (one member or all together).
const KEPT_LIMIT: usize = neff::MAX_LOADED_MEMBER_BYTES;

impl<D: Driver + Sync, H: Host + Sync> Runtime<D, H> {
    /// `nrt_load`: parse, choose the logical core (`lnc = -1`: the visible core with the fewest
    /// models), stage, publish. Every failure after staging began unstages everything.
    pub fn load(&self, neff_bytes: &[u8], lnc: i32, lnc_count: i32) -> Result<ModelHandle> {
        self.guard()?;
        // A refusal recorded before this load is not this load's.
        let _ = self.host.platform().take_heap_failure();
        let validate_hash = self.with_session(|s| s.config.validate_hash)?;
        let options = if self.driver.stages_subgraph_files() {
            // Every member: the backend stages what it needs from the subgraph's files
            // (instruction streams, constants), bounded by the limits below.
            ParseOptions {
                keep: KeepMembers::All,
                max_member_size: KEPT_LIMIT,
                max_kept_bytes: KEPT_LIMIT,
                validate_hash,
                inflate_window: self.options.inflate_window,
                ..Default::default()
            }
        } else {
            // Only the simulator program is kept; it carries the model's weights as constants,
            // so it is bounded like the staged members, not by the default member limit.
            ParseOptions {
                max_member_size: KEPT_LIMIT,
                max_kept_bytes: KEPT_LIMIT,
                validate_hash,
                inflate_window: self.options.inflate_window,
                ..Default::default()
            }
        };
        let neff = neff::parse(neff_bytes, &options).map_err(|e| self.fail(e))?;
        self.heap_check("parsing")?;
        for w in &neff.warnings {
            self.log(Level::Warning, format_args!("{}: {w}", neff.name()));
        }
        if lnc_count != -1 && lnc_count != 1 {
            self.log(
                Level::Warning,
                format_args!(
                    "vnc_count {lnc_count} is deprecated and ignored: loading on one core"
                ),
            );
        }
        let abs = if lnc < 0 {
            self.least_loaded_lnc()
        } else {
            self.resolve_lnc(lnc.into())?
        };
        let io = neff.io_table().map_err(|e| self.fail(e))?;
        self.heap_check("reading the I/O tensors of")?;
        let staged = self.stage(&neff, abs, &io)?;
        if let Err(e) = self.heap_check("staging") {
            self.unstage_all(&staged);
            return Err(e);
        }
        let plumbing = staged.iter().any(|s| s.plumbing);
        let model = Model::new(String::from(neff.name()), abs, io, staged.clone());
        match self.register_model(model) {
            Ok(h) => {
                if let Err(e) = self.heap_check("publishing") {
                    // Unloading unstages the subgraphs and frees the record.
                    let _ = self.unload(h);
                    return Err(e);
                }
                if plumbing {
                    self.log(
                        Level::Warning,
                        format_args!(
                            "Model {} ({}) carries no simulator program: its executions run in \
                             plumbing mode and zero-fill the outputs, computing nothing",
                            h.id(),
                            neff.name()
                        ),
                    );
                }
                self.log(
                    Level::Info,
                    format_args!(
                        "Loaded model {} ({}) on Neuron Core {abs}",
                        h.id(),
                        neff.name()
                    ),
                );
                self.events.emit(|| RuntimeEvent::ModelLoaded {
                    model: h.id(),
                    lnc: crate::events::relative_core(self.published.topology(), abs),
                    name: neff.name(),
                });
                Ok(h)
            }
            Err(e) => {
                self.unstage_all(&staged);
                Err(e)
            }
        }
    }

    /// `NRT_RESOURCE` when the host recorded a refused heap allocation during the load stage
    /// `what` ([`Platform::take_heap_failure`](crate::host::Platform::take_heap_failure)).
    fn heap_check(&self, what: &str) -> Result<()> {
        if self.host.platform().take_heap_failure() {
            return Err(self.fail(err!(
                Resource,
                "Host heap exhausted while {what} the NEFF: the load is undone"
            )));
        }
        Ok(())
    }

    /// The visible logical core with the fewest models (the lowest on a tie).
    fn least_loaded_lnc(&self) -> u32 {
        let t = self.published.topology();
        let mut load: Vec<u32> = alloc::vec![0; t.lnc_count() as usize];
        for h in self.models.live_handles() {
            if let Ok(m) = self.resolve_unguarded_quiet(h) {
                if let Some(c) = t
                    .relative_lnc(m.lnc())
                    .and_then(|r| load.get_mut(r as usize))
                {
                    *c += 1;
                }
            }
        }
        let best = load
            .iter()
            .enumerate()
            .min_by_key(|(_, c)| **c)
            .map_or(0, |(i, _)| i as u32);
        t.absolute_lnc(best).unwrap_or(t.first_lnc())
    }

    /// The stage seam (`dlr_kelf_stage`): one subgraph inline, several in parallel through the
    /// host, any failure unstaging the ones that succeeded.
    fn stage(&self, neff: &Neff, abs: u32, io: &IoTable) -> Result<Vec<StagedModel>> {
        let required = neff.subgraphs.len() as u32;
        let topology = self.published.topology();
        let lnc_size = topology.lnc_size();
        if lnc_size < required {
            return Err(self.fail(err!(
                Invalid,
                "Insufficient number of pncs, required {required}, available {lnc_size}"
            )));
        }
        if required != 1 && required != lnc_size {
            return Err(self.fail(err!(
                Invalid,
                "NEFF has {required} subgraphs: it needs 1 or exactly the logical core size {lnc_size}"
            )));
        }
        let image = |i: usize| {
            let sg = neff.subgraphs.get(i);
            SubgraphImage {
                lnc: abs,
                index: i as u32,
                pnc: topology.pnc(abs, i as u32),
                name: sg.map_or("", |s| s.name.as_str()),
                model: neff.name(),
                program: sg.and_then(|s| s.member(SIM_PROGRAM_MEMBER)),
                uuid: neff.uuid(),
                files: sg.map_or(&[], |s| s.members.as_slice()),
                io,
            }
        };
        let stage_one = |i: usize| {
            self.driver.stage_subgraph(&image(i)).map_err(|e| {
                Error::new(
                    e.status(),
                    format_args!(
                        "Failed to stage subgraph {} of {} on Neuron Core {abs}: {e}",
                        image(i).name,
                        neff.name()
                    ),
                )
            })
        };
        let results: Vec<Result<StagedModel>> = if required == 1 {
            alloc::vec![stage_one(0)]
        } else {
            let slots: Vec<spin::Mutex<Option<Result<StagedModel>>>> =
                (0..required).map(|_| spin::Mutex::new(None)).collect();
            self.host.platform().run_parallel(required as usize, &|i| {
                if let Some(slot) = slots.get(i) {
                    *slot.lock() = Some(stage_one(i));
                }
            });
            slots
                .into_iter()
                .map(|s| {
                    s.into_inner()
                        .unwrap_or_else(|| Err(err!(Failure, "A staging task did not run")))
                })
                .collect()
        };
        let mut staged = Vec::with_capacity(results.len());
        let mut first_error = None;
        for r in results {
            match r {
                Ok(s) => staged.push(s),
                Err(e) => {
                    if first_error.is_none() {
                        first_error = Some(e);
                    }
                }
            }
        }
        match first_error {
            None => Ok(staged),
            Some(e) => {
                self.unstage_all(&staged);
                Err(self.fail(e))
            }
        }
    }

    fn unstage_all(&self, staged: &[StagedModel]) {
        for &s in staged {
            if let Err(e) = self.driver.stop_model(s) {
                self.log(
                    Level::Error,
                    format_args!("Failed to stop a staged subgraph: {e}"),
                );
            }
            if let Err(e) = self.driver.unstage_model(s) {
                self.log(
                    Level::Error,
                    format_args!("Failed to roll back a staged subgraph: {e}"),
                );
            }
        }
    }
}
