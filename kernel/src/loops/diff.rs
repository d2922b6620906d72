//! Comparing a loop body's probes: iterations 1, 2 and `n - 1` must record the same
//! operations, differing only in term-able fields — access-pattern offsets and start
//! partitions, DMA source and destination offsets — by one step per iteration. The result
//! is iteration 2's operations with those steps as terms of the loop's depth.

use nrt_core::{Error, err};
use nrt_sim::engine::{DmaBlock, DmaDescriptor, DmaEndpoint, Instr, TermSlot};

use super::node::Node;

/// Iterations compared: 1, 2 and the last.
struct Probes {
    last: usize,
}

/// `two` with the steps from `one` to `two` as terms of `depth`, checked against `last`
/// (iteration `n - 1`).
pub(super) fn template(
    one: &[Node],
    two: &[Node],
    last: &[Node],
    n: usize,
    depth: u8,
) -> Result<Vec<Node>, Error> {
    let p = Probes { last: n - 1 };
    nodes(&p, one, two, last, depth)
}

fn nodes(p: &Probes, a: &[Node], b: &[Node], c: &[Node], depth: u8) -> Result<Vec<Node>, Error> {
    if a.len() != b.len() || a.len() != c.len() {
        let (x, y) = if a.len() != b.len() {
            (b.len(), 2)
        } else {
            (c.len(), p.last)
        };
        return Err(err!(
            Invalid,
            "for_range: the loop body records {} operations in iteration 1 and {x} in \
             iteration {y}; every iteration from 1 on must record the same operations",
            a.len()
        ));
    }
    a.iter()
        .zip(b)
        .zip(c)
        .enumerate()
        .map(|(j, ((a, b), c))| node(p, j, a, b, c, depth))
        .collect()
}

fn op_name(n: &Node) -> &str {
    match n {
        Node::Engine { op, .. } | Node::Dma { op, .. } => op,
        Node::Loop { .. } => "for_range",
    }
}

/// The error for operation `j` (`op`) differing in iteration `i` beyond its addresses.
fn differs(op: &str, j: usize, i: usize) -> Error {
    err!(
        Invalid,
        "for_range: {op} (operation {j} of the loop body) differs between iterations 1 and \
         {i} in more than its addresses (a shape, dtype, engine, flag, scalar or tile that \
         depends on the loop index)"
    )
}

/// The step of a value seen as `va`, `vb`, `vc` in iterations 1, 2 and `last`.
fn step(p: &Probes, what: &str, j: usize, vals: [i64; 3]) -> Result<i64, Error> {
    let [va, vb, vc] = vals;
    let d = vb - va;
    let want = i128::from(vb) + i128::from(d) * (p.last as i128 - 2);
    if i128::from(vc) != want {
        return Err(err!(
            Invalid,
            "for_range: {what} is not affine in the loop index (operation {j} of the loop \
             body): it is {va}, {vb} and {vc} in iterations 1, 2 and {}",
            p.last
        ));
    }
    Ok(d)
}

/// The instruction with every term-able field zeroed, and those fields (slot, value).
fn split(ins: &Instr) -> (Instr, Vec<(TermSlot, i64)>) {
    let mut z = *ins;
    let mut vals = Vec::new();
    for k in 0..ins.pattern_count() as u8 {
        if let Some(ap) = z.pattern_mut(k) {
            vals.push((TermSlot::Offset(k), i64::from(ap.offset)));
            vals.push((TermSlot::Partition(k), i64::from(ap.start_partition)));
            ap.offset = 0;
            ap.start_partition = 0;
        }
    }
    (z, vals)
}

fn node(p: &Probes, j: usize, a: &Node, b: &Node, c: &Node, depth: u8) -> Result<Node, Error> {
    let op = op_name(a);
    match (a, b, c) {
        (
            Node::Engine {
                op: oa,
                engine: ea,
                instrs: ia,
                terms: ta,
            },
            Node::Engine {
                op: ob,
                engine: eb,
                instrs: ib,
                terms: tb,
            },
            Node::Engine {
                op: oc,
                engine: ec,
                instrs: ic,
                terms: tc,
            },
        ) => {
            let same = |o: &String, e, i: &Vec<Instr>, t| {
                o == oa && e == ea && i.len() == ia.len() && t == ta
            };
            if !same(ob, eb, ib, tb) {
                return Err(differs(op, j, 2));
            }
            if !same(oc, ec, ic, tc) {
                return Err(differs(op, j, p.last));
            }
            let mut terms = tb.clone();
            for (idx, ((x, y), z)) in ia.iter().zip(ib).zip(ic).enumerate() {
                let ((zx, vx), (zy, vy), (zz, vz)) = (split(x), split(y), split(z));
                if zx != zy {
                    return Err(differs(op, j, 2));
                }
                if zx != zz {
                    return Err(differs(op, j, p.last));
                }
                for ((slot, va), ((_, vb), (_, vc))) in vx.iter().zip(vy.iter().zip(&vz)) {
                    let what = format!("{op}: {slot} of instruction {idx}");
                    let d = step(p, &what, j, [*va, *vb, *vc])?;
                    if d != 0 {
                        terms.push((idx, *slot, depth, d));
                    }
                }
            }
            Ok(Node::Engine {
                op: ob.clone(),
                engine: *eb,
                instrs: ib.clone(),
                terms,
            })
        }
        (
            Node::Dma {
                trigger: ga,
                spread: sa,
                descs: da,
                shifts: ha,
                ..
            },
            Node::Dma {
                op: ob,
                trigger: gb,
                spread: sb,
                descs: db,
                shifts: hb,
            },
            Node::Dma {
                trigger: gc,
                spread: sc,
                descs: dc,
                shifts: hc,
                ..
            },
        ) => {
            let same = |g, s, d: &Vec<DmaDescriptor>, h| {
                g == ga && s == sa && d.len() == da.len() && h == ha && op_name(b) == op
            };
            if !same(gb, sb, db, hb) {
                return Err(differs(op, j, 2));
            }
            if !same(gc, sc, dc, hc) {
                return Err(differs(op, j, p.last));
            }
            let moved = |x: &[DmaDescriptor], y: &[DmaDescriptor], i: usize| {
                shift_between(x, y).ok_or_else(|| {
                    err!(
                        Invalid,
                        "for_range: {op} (operation {j} of the loop body): its DMA descriptors \
                         in iterations 1 and {i} differ by more than one source and one \
                         destination offset (a shape that depends on the loop index, or \
                         addresses that move unevenly)"
                    )
                })
            };
            let (s1, d1) = moved(da, db, 2)?;
            let (s2, d2) = moved(da, dc, p.last)?;
            let src = step(
                p,
                &format!("{op}: the DMA source offset (relative to iteration 1)"),
                j,
                [0, s1, s2],
            )?;
            let dst = step(
                p,
                &format!("{op}: the DMA destination offset (relative to iteration 1)"),
                j,
                [0, d1, d2],
            )?;
            let mut shifts = hb.clone();
            if src != 0 || dst != 0 {
                shifts.push((depth, src, dst));
            }
            Ok(Node::Dma {
                op: ob.clone(),
                trigger: *gb,
                spread: *sb,
                descs: db.clone(),
                shifts,
            })
        }
        (
            Node::Loop {
                depth: la,
                count: ca,
                first: fa,
                body: ba,
            },
            Node::Loop {
                depth: lb,
                count: cb,
                first: fb,
                body: bb,
            },
            Node::Loop {
                depth: lc,
                count: cc,
                first: fc,
                body: bc,
            },
        ) => {
            if (la, ca) != (lb, cb) {
                return Err(differs(op, j, 2));
            }
            if (la, ca) != (lc, cc) {
                return Err(differs(op, j, p.last));
            }
            Ok(Node::Loop {
                depth: *lb,
                count: *cb,
                first: nodes(p, fa, fb, fc, depth)?,
                body: nodes(p, ba, bb, bc, depth)?,
            })
        }
        _ => {
            let (other, i) = if std::mem::discriminant(a) != std::mem::discriminant(b) {
                (op_name(b), 2)
            } else {
                (op_name(c), p.last)
            };
            Err(err!(
                Invalid,
                "for_range: operation {j} of the loop body is {op} in iteration 1 but {other} in \
                 iteration {i}; every iteration from 1 on must record the same operations"
            ))
        }
    }
}

/// An endpoint without its offset, and the offset.
fn endpoint(e: &DmaEndpoint) -> (DmaEndpoint, i128) {
    match *e {
        DmaEndpoint::Hbm { tensor, offset } => {
            (DmaEndpoint::Hbm { tensor, offset: 0 }, i128::from(offset))
        }
        DmaEndpoint::Sbuf { partition, offset } => (
            DmaEndpoint::Sbuf {
                partition,
                offset: 0,
            },
            i128::from(offset),
        ),
        DmaEndpoint::Psum { partition, offset } => (
            DmaEndpoint::Psum {
                partition,
                offset: 0,
            },
            i128::from(offset),
        ),
        DmaEndpoint::Block(b) => (
            DmaEndpoint::Block(DmaBlock { offset: 0, ..b }),
            i128::from(b.offset),
        ),
    }
}

/// The one (source, destination) offset shift taking every descriptor of `x` to `y`'s.
fn shift_between(x: &[DmaDescriptor], y: &[DmaDescriptor]) -> Option<(i64, i64)> {
    let mut shift: Option<(i128, i128)> = None;
    for (dx, dy) in x.iter().zip(y) {
        let ((sx, ox), (sy, oy)) = (endpoint(&dx.src), endpoint(&dy.src));
        let ((tx, px), (ty, py)) = (endpoint(&dx.dst), endpoint(&dy.dst));
        if sx != sy || tx != ty || dx.len != dy.len {
            return None;
        }
        let s = (oy - ox, py - px);
        match shift {
            None => shift = Some(s),
            Some(prev) if prev != s => return None,
            Some(_) => {}
        }
    }
    let (s, d) = shift.unwrap_or((0, 0));
    Some((i64::try_from(s).ok()?, i64::try_from(d).ok()?))
}
