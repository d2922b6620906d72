#!/usr/bin/env python3
"""The hand-written seeds of the `linux_emu` target (fuzz/seeds/linux_emu/): five valid
sequences (a clean add cycle on trn1; matmul on host tensors with re-init; tensors, sets and a
wrong-set execute on trn2 x 2 with a fault; mutated and garbage NEFFs on inf2 with a
request-wide fault; four ordinal faults on trn1 x 2), encoded as arbitrary 1.5 decodes the
target's `Input` (enum variant: u32 LE scaled by the variant count; Vec: a continue byte before
each element; integers little-endian). Check an encoding with
`cargo +nightly fuzz fmt linux_emu FILE`. Usage: python3 linux_emu_seeds.py seeds/linux_emu
"""
import os, struct, sys

def var(i, n):
    return struct.pack('<I', (i * 2**32 + n - 1) // n)

def b(x): return bytes([x & 0xff])
def vec(items):  # items: list of bytes (already encoded)
    return b''.join(b'\x01' + it for it in items) + b'\x00'
def u16(x): return struct.pack('<H', x)
def u64(x): return struct.pack('<Q', x)

OPS = ['Init','Close','Load','LoadMutated','LoadRaw','Unload','Allocate','Drop','Read','Write',
       'Memset','Copy','SetAdd','Execute','ExecuteProper']
def op(name, payload=b''): return var(OPS.index(name), len(OPS)) + payload
def issued(i): return var(0, 2) + b(i)
def forged(x): return var(1, 2) + u64(x)
def small(x): return var(0, 2) + b(x)
def anyoff(x): return var(1, 2) + u64(x)

def init(*choices): return op('Init', vec([b(c) for c in choices]))
def close(): return op('Close')
def load(which, vnc): return op('Load', b(which) + b(vnc))
def load_mut(which, edits): return op('LoadMutated', b(which) + vec([u16(a) + b(v) for a, v in edits]))
def load_raw(data): return op('LoadRaw', vec([b(x) for x in data]))
def unload(h): return op('Unload', h)
def alloc(host, vnc, size, name): return op('Allocate', b(host) + b(vnc) + u16(size) + b(name))
def drop(t): return op('Drop', b(t))
def read(t, off, n): return op('Read', b(t) + off + u16(n))
def write(t, off, data): return op('Write', b(t) + off + vec([b(x) for x in data]))
def memset(t, off, v, n): return op('Memset', b(t) + off + b(v) + u16(n))
def copy(s, so, d, do, n): return op('Copy', b(s) + so + b(d) + do + u16(n))
def setadd(s, name, t): return op('SetAdd', b(s) + b(name) + b(t))
def execute(h, i, o): return op('Execute', h + b(i) + b(o))
def proper(h, host): return op('ExecuteProper', h + b(host))

def inp(instance, two, faults, request, ops):
    out = b(instance) + b(two) + vec([u16(n) + b(e) for n, e in faults])
    out += (b'\x01' + b(request[0]) + b(request[1])) if request else b'\x00'
    return out + vec(ops)

# VAR_CHOICES indices: 0 RESET=0, 1 RESET=1, 2 TIMEOUT=1, 3 TIMEOUT=30, 4 VIS=0, 5 VIS=1,
# 6 VIS=0-1, 7 VIS=2-9, 8 NUM=1, 9 NUM=2, 10 VCS=1, 11 VCS=2, 12 HASH=1, 13 VIS=nonsense
# ERRNOS: 0 EIO 1 ENOMEM 2 EINVAL 3 EBUSY 4 EFAULT 5 EAGAIN 6 ENODEV 7 EPERM 8 EINTR 9 ENOTTY
seeds = {
  'add-cycle-trn1': inp(0, 0, [], None,
      [init(), load(0, 0), proper(issued(0), 0), unload(issued(0)), close()]),
  'mm-host-reinit-trn1': inp(0, 0, [], None,
      [init(), load(1, 0xff), proper(issued(0), 1), close(), init(0), load(2, 0),
       proper(issued(1), 0), unload(issued(1)), unload(issued(1)), close()]),
  'tensors-trn2-2dev-fault': inp(2, 1, [(30, 0)], None,
      [init(3), load(0, 0), alloc(0, 0, 64, 0), alloc(1, 0, 32, 1), write(0, small(4), [1, 2, 3, 4]),
       read(0, small(0), 16), memset(1, small(0), 7, 32), copy(1, small(0), 0, small(8), 16),
       setadd(0, 0, 0), setadd(0, 1, 1), setadd(1, 2, 0), execute(issued(0), 0, 1),
       proper(issued(0), 0), unload(issued(0)), proper(issued(0), 0), drop(0), close()]),
  'inf2-request-fault-garbage': inp(1, 0, [(3, 1)], (12, 0),
      [init(6, 2), load_mut(0, [(100, 0xff), (7, 0)]), load_raw(b'NEFF\x00garbage'), load(1, 1),
       proper(issued(0), 0), unload(forged(12345)), close(), close(), init(), load(0, 0xff),
       proper(issued(1), 1), close()]),
  'faults-everywhere-trn1-2dev': inp(0, 1, [(5, 0), (40, 1), (80, 3), (120, 8)], None,
      [init(9), load(0, 0), load(2, 0), proper(issued(0), 0), proper(issued(1), 1), alloc(0, 1, 4096, 2),
       read(0, anyoff(2**63), 8), write(0, small(200), [9] * 16), unload(issued(0)), close(),
       init(), load(1, 0), proper(issued(2), 0), close()]),
}
outdir = sys.argv[1]
os.makedirs(outdir, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(outdir, name), 'wb') as f:
        f.write(data)
    print(name, len(data))
