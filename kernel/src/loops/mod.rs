//! Explicit loops: [`Kernel::for_range`] records a loop body once for all its iterations and
//! emits it as a format-1.1 loop (`LoopBegin`/`LoopEnd` with dynamic terms), so a kernel's
//! instruction and descriptor counts — and its build time — are those of its loop bodies,
//! not of its iteration space.
//!
//! How: the body is *probed* — called with the index 0, 1, 2 and `n - 1` while the kernel
//! captures the operations it records instead of emitting them (`Node`s: an engine
//! operation's instructions, a DMA operation's descriptors, an inner loop). Iterations 1, 2
//! and `n - 1` must record the same operations, differing only in what dynamic terms can
//! move — access-pattern offsets and start partitions, DMA source and destination offsets —
//! by a constant step per iteration (`diff.rs`); iteration 0 may differ (a matmul that
//! overwrites PSUM where the others accumulate). The loop is then emitted (`emit.rs`) as
//! iteration 0, iteration 1 and a loop over iterations `2..n` whose body is iteration 2's
//! operations with their steps as terms; the synchronisation plans the body once for every
//! iteration (`sync/loops.rs`).

mod diff;
mod emit;
pub(crate) mod node;

use node::Node;

use nrt_core::{Error, err};
use nrt_sim::engine::{LOOP_REGS, MAX_DESCRIPTORS, MAX_LOOP_COUNT};

use crate::alloc::Allocator;
use crate::format::FormatUse;
use crate::kernel::{Kernel, TileRec};
use crate::sync::Rect;

/// The kernel state a probe may change (allocation, accumulation, format, DMA rotation, the
/// capture itself), saved to undo it.
struct Saved {
    tiles: Vec<TileRec>,
    sbuf: Allocator,
    psum: Allocator,
    scopes: Vec<Vec<u32>>,
    mm_started: Vec<Rect>,
    format: FormatUse,
    next_dma: usize,
    capture: Vec<usize>,
}

impl Kernel {
    fn save(&self) -> Saved {
        Saved {
            tiles: self.tiles.clone(),
            sbuf: self.sbuf.clone(),
            psum: self.psum.clone(),
            scopes: self.scopes.clone(),
            mm_started: self.mm_started.clone(),
            format: self.format.clone(),
            next_dma: self.next_dma,
            capture: self.capture.iter().map(Vec::len).collect(),
        }
    }

    fn restore(&mut self, s: Saved) {
        self.tiles = s.tiles;
        self.sbuf = s.sbuf;
        self.psum = s.psum;
        self.scopes = s.scopes;
        self.mm_started = s.mm_started;
        self.format = s.format;
        self.next_dma = s.next_dma;
        self.capture.truncate(s.capture.len());
        for (buf, len) in self.capture.iter_mut().zip(s.capture) {
            buf.truncate(len);
        }
    }

    /// Runs iteration `i` of a loop body, refusing a body that leaves a tile allocated
    /// (its allocation would grow with the iterations).
    fn iteration(
        &mut self,
        i: usize,
        body: &mut impl FnMut(&mut Kernel, usize) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let before = self.tiles.len();
        body(self, i)?;
        if let Some(t) = self.tiles.iter().skip(before).find(|t| t.live) {
            return Err(err!(
                Invalid,
                "for_range: the loop body allocates tile {} and leaves it allocated (its \
                 allocation would grow with every iteration); allocate it before the loop, or \
                 inside a scope of the body",
                t.name
            ));
        }
        Ok(())
    }

    /// Runs iteration `i` of a loop body, capturing what it records.
    fn probe(
        &mut self,
        i: usize,
        body: &mut impl FnMut(&mut Kernel, usize) -> Result<(), Error>,
    ) -> Result<Vec<Node>, Error> {
        self.capture.push(Vec::new());
        let r = self.iteration(i, body);
        let nodes = self.capture.pop().unwrap_or_default();
        r.map(|()| nodes)
    }

    /// Records `body` for every `i` in `0..n`, as one loop of the program — NKI's
    /// `nl.affine_range` / `nl.sequential_range` (the iterations run in order; every
    /// dependence between them is synchronised). `body` receives the kernel and the index.
    ///
    /// The body is recorded once for all iterations, so a kernel's build time and its
    /// instruction and descriptor counts are those of its loop bodies. For that the body
    /// must record the **same operations in every iteration from 1 on**, differing only in
    /// addresses that are affine in `i`: view offsets and partition starts (`slice`,
    /// `select`, ... with bounds computed from `i`), DMA source and destination offsets.
    /// Shapes, dtypes, engines, flags, scalars and the tiles used must not depend on `i`
    /// (iteration 0 may differ: it is emitted apart, so `accumulate: Some(i > 0)` works). A
    /// body that allocates tiles must free them (`Kernel::scope`): its allocation may not
    /// grow with the iterations. Loops nest up to 4 deep (the format's iteration registers).
    ///
    /// The body is called with `i` = 0, 1, 2 and `n - 1` (fewer than 4 iterations: once per
    /// index, unrolled), and its iterations 1, 2 and `n - 1` are compared; a difference is
    /// an `NRT_INVALID` error naming the operation. State outside the kernel that the body
    /// changes (a counter, a [`TilePool`](crate::TilePool)'s rotation) is not rolled back:
    /// write bodies as functions of `i`. Errors leave the kernel's operations unchanged.
    ///
    /// The loop runs exactly the operations the same body written with a Rust loop records
    /// (bit-identical outputs), with synchronisation planned for all iterations at once:
    /// waits on the box of each operation's accesses over the iterations, so it may order a
    /// little more than the unrolled kernel does (see `kernel/src/sync/loops.rs`).
    pub fn for_range(
        &mut self,
        n: usize,
        mut body: impl FnMut(&mut Kernel, usize) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let depth = self.capture.len();
        if depth >= LOOP_REGS {
            return Err(err!(
                Invalid,
                "for_range: loops nest at most {LOOP_REGS} deep (the program format's \
                 iteration registers); this loop would be number {}",
                depth + 1
            ));
        }
        if n > MAX_LOOP_COUNT as usize + 2 {
            return Err(err!(
                Invalid,
                "for_range: {n} iterations; a loop has at most {}",
                MAX_LOOP_COUNT as usize + 2
            ));
        }
        let saved = self.save();
        let r = if n < 4 {
            (0..n).try_for_each(|i| self.iteration(i, &mut body))
        } else {
            self.looped(n, depth as u8, &mut body)
        };
        if r.is_err() {
            self.restore(saved);
        }
        r
    }

    fn looped(
        &mut self,
        n: usize,
        depth: u8,
        body: &mut impl FnMut(&mut Kernel, usize) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let first = self.probe(0, body)?;
        let one = self.probe(1, body)?;
        let two = self.probe(2, body)?;
        let after = self.save();
        let last = self.probe(n - 1, body)?;
        self.restore(after);
        let template = diff::template(&one, &two, &last, n, depth)?;
        let node = Node::Loop {
            depth,
            count: n,
            first,
            body: template,
        };
        if let Some(buf) = self.capture.last_mut() {
            buf.push(node);
            return Ok(());
        }
        let need = Node::descriptors(std::slice::from_ref(&node));
        if self.descriptors.len().saturating_add(need) > MAX_DESCRIPTORS {
            return Err(err!(
                Invalid,
                "for_range: the kernel would need more than {MAX_DESCRIPTORS} DMA descriptors"
            ));
        }
        self.emit_node(&node)
    }
}
