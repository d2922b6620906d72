#!/usr/bin/env python3
"""Hand-written starting inputs of the `capi_ext` target: valid sequences that reach each
extension surface with executions running (inspect capture, continuous profiling with an error
tracker and a completion handle, the datastore's counters and objects, debug streams, trace
filters and nec queries, the inspect variables across a re-init), encoded as arbitrary 1.5
decodes the target's `Input` (enum variant: u32 LE scaled by the variant count; Vec and the
final take-rest Vec: a continue byte before each element; Option and bool: one byte, bit 0;
integers little-endian). Check an encoding with `cargo +nightly fuzz fmt capi_ext FILE`.
Usage: python3 capi_ext_seeds.py DIR (the campaign merges DIR into seeds/capi_ext)."""
import os, struct, sys

def var(i, n): return struct.pack('<I', (i * 2**32 + n - 1) // n)
def u8(x): return bytes([x & 0xff])
def u16(x): return struct.pack('<H', x)
def i32(x): return struct.pack('<i', x)
def u32(x): return struct.pack('<I', x)
def u64(x): return struct.pack('<Q', x)
def boolean(x): return u8(1 if x else 0)
def some(x): return b'\x01' + x
NONE = b'\x00'
def vec(items): return b''.join(b'\x01' + it for it in items) + b'\x00'

OPS = ['Init', 'Close', 'Load', 'Unload', 'Execute', 'Schedule', 'Drain', 'FreeTensor',
       'DestroySet', 'Completed', 'CompletionHandle', 'PollHandle', 'CloseHandle',
       'TrackerCreate', 'TrackerDestroy', 'TrackerList', 'DebugConnect', 'DebugClose',
       'DebugRead', 'InspectBegin', 'InspectEnv', 'InspectStop', 'InspectBeginWith',
       'InspectConfigAllocate', 'InspectConfigFree', 'InspectConfigSet', 'ActivityTypes',
       'ContinuousAllocate', 'ContinuousFree', 'ContinuousSetDir', 'ContinuousStart',
       'ContinuousSave', 'ContinuousStop', 'Trace', 'TraceStop', 'NdsOpen', 'NdsClose',
       'NdsCounter', 'NdsObjNew', 'NdsObjFill', 'NdsObjCommit', 'NdsObjDelete', 'NdsReadAll',
       'NdsReadProcess', 'Nec']
SETS = ['Defaults', 'SessionId', 'OutputDir', 'BadDir', 'MaxEvents', 'CaptureNc', 'EventType',
        'Enable', 'OnFail', 'Activity']
COUNTERS = ['IncNc', 'DecNc', 'GetNc', 'SetNc', 'IncNd', 'DecNd', 'OrNd', 'GetNd', 'SetNd']

def op(name, payload=b''): return var(OPS.index(name), len(OPS)) + payload
def I(i): return var(0, 3) + u8(i)          # Sel::Issued
NULL = var(1, 3)                             # Sel::Null
def forged(x): return var(2, 3) + u64(x)     # Sel::Forged
def core(n): return var(0, 2) + u8(n)        # Core::Small
def iset(name, payload=b''): return var(SETS.index(name), len(SETS)) + payload
def counter(name, payload=b''): return var(COUNTERS.index(name), len(COUNTERS)) + payload

def init(k=0): return op('Init', u8(k))
def load(which, vnc=0, edits=()): return op('Load', u8(which) + vec([u16(a) + u8(v) for a, v in edits]) + u8(vnc))
def execute(m, sets=None, repeat=None):
    s = some(sets[0] + sets[1]) if sets else NONE
    r = some(u8(repeat)) if repeat is not None else NONE
    return op('Execute', m + s + r)
def schedule(m, queue=0): return op('Schedule', m + NONE + u8(queue))
def drain(v=0): return op('Drain', u8(v))
def handle(k): return op('CompletionHandle', some(u8(k)) + u64(0) + boolean(False))
def tracker(c): return op('TrackerCreate', core(c) + boolean(False))
def tlist(t): return op('TrackerList', t + u8(0))
def icfg(dir=0): return op('InspectConfigAllocate', u8(dir) + boolean(False))
def iset_op(c, s): return op('InspectConfigSet', c + s)
def nds_open(device, pid): return op('NdsOpen', u8(device) + u8(pid) + boolean(False))
def nds_counter(inst, c, idx, what): return op('NdsCounter', inst + core(c) + u16(idx) + what + boolean(False))
def nec(which, a=0, b=1): return op('Nec', u8(which) + i32(a) + i32(b))

seeds = {
  'inspect-exec': [
      load(0), icfg(0), iset_op(I(0), iset('Enable', boolean(True))),
      iset_op(I(0), iset('EventType', u8(4) + boolean(False))),
      iset_op(I(0), iset('CaptureNc', core(1) + boolean(False))),
      iset_op(I(0), iset('Activity', u8(3) + boolean(False))),
      iset_op(I(0), iset('SessionId', i32(7))),
      op('InspectBeginWith', I(0)), op('InspectBeginWith', NULL), execute(I(0)),
      schedule(I(0)), drain(0), op('InspectStop'),
      op('ActivityTypes', some(I(0)) + boolean(False)), op('ActivityTypes', NONE + boolean(False)),
      op('InspectConfigFree', I(0)), op('InspectBeginWith', I(0))],
  'continuous-tracker-handle': [
      op('ContinuousAllocate', u8(1) + boolean(False)), load(1), tracker(0),
      op('ContinuousStart', I(0)), execute(I(0)), schedule(I(0)), handle(0),
      op('ContinuousSave', u32(0) + I(0)), drain(0), op('ContinuousSave', u32(1) + I(0)),
      op('ContinuousSetDir', I(0) + some(u8(2))), op('ContinuousSave', u32(0) + I(0)),
      op('ContinuousStop'), tlist(I(0)), op('PollHandle', u8(0)), op('TrackerDestroy', I(0)),
      tlist(I(0)), op('ContinuousFree', I(0))],
  'failing-exec-tracker': [
      tracker(0), tracker(1), load(0xf0), icfg(0), iset_op(I(0), iset('OnFail', boolean(True))),
      op('InspectBeginWith', I(0)), execute(I(0)),
      schedule(I(0)), schedule(I(0)), handle(1), op('FreeTensor', I(0)), drain(0),
      tlist(I(0)), tlist(I(1)), op('Unload', I(0)), schedule(I(0)), tlist(I(0))],
  'nds': [
      nds_open(0, 0), nds_open(0, 1), nds_open(1, 0),
      nds_counter(I(0), 1, 5, counter('SetNc', u64(7))), nds_counter(I(1), 1, 5, counter('GetNc')),
      nds_counter(I(0), 0, 3, counter('IncNd', u64(2))), nds_counter(I(0), 0, 3, counter('OrNd', u64(8))),
      nds_counter(I(1), 0, 3, counter('GetNd')), nds_counter(I(0), 2, 94, counter('DecNc', u64(1))),
      nds_counter(I(1), 0, 1, counter('SetNd', u64(1))), nds_counter(I(0), 16, 95, counter('IncNc', u64(1))),
      op('NdsObjNew', I(0) + u8(0)), op('NdsObjNew', I(0) + u8(1)), op('NdsObjNew', I(0) + u8(2)),
      op('NdsObjNew', I(1) + u8(0)),
      op('NdsObjFill', I(0) + u8(0x41)), op('NdsObjFill', I(1) + u8(0x42)), op('NdsObjFill', I(2) + u8(0x43)),
      op('NdsObjCommit', I(0)), op('NdsObjCommit', I(1)), op('NdsObjCommit', I(2)), op('NdsObjCommit', I(3)),
      op('NdsReadAll', I(1) + boolean(False) + boolean(False)),
      op('NdsReadProcess', I(1) + boolean(False)), op('NdsReadProcess', I(1) + boolean(True)),
      op('NdsObjDelete', I(0)), op('NdsClose', I(0)), op('NdsObjCommit', I(1)),
      op('NdsReadAll', I(1) + boolean(False) + boolean(True)), op('NdsObjDelete', I(1)),
      op('NdsClose', I(1)), op('NdsClose', I(1)), op('NdsObjFill', I(4) + u8(1))],
  'debug-trace-nec': [
      op('DebugConnect', core(0) + boolean(False)), op('DebugConnect', core(0) + boolean(False)),
      op('DebugConnect', core(1) + boolean(False)), op('DebugConnect', core(2) + boolean(False)),
      op('DebugRead', some(u8(0)) + i32(0) + u8(0)), op('DebugClose', some(u8(0)) + i32(0)),
      op('DebugRead', some(u8(0)) + i32(0) + u8(0)),
      op('Trace', u16(0x8010) + some(core(1)) + u8(5) + some(u8(3) + some(u64(0))) + boolean(False)),
      load(0), execute(I(0)),
      op('Trace', u16(0) + NONE + u8(0) + some(u8(0) + NONE) + boolean(True))]
      + [nec(k, 1, 2) for k in range(16)]
      + [op('Close'), handle(0), tracker(0), op('DebugConnect', core(1) + boolean(False)),
         nec(2), init(1), op('ContinuousAllocate', u8(0) + boolean(False)),
         op('ContinuousStart', I(0)), load(2, 0), execute(I(0)), op('Close')],
  'inspect-env-reinit': [
      op('Close'), op('InspectEnv', u8(1) + u8(3) + u8(1 + 3 * 1)), init(0), op('InspectBegin'),
      load(0), load(1), execute(I(0)), execute(I(1)), schedule(I(1)), op('InspectBegin'),
      op('InspectStop'), op('Close'), op('InspectEnv', u8(2) + u8(4) + u8(2 + 9)), init(0),
      op('InspectBegin'), load(0), execute(I(2)), op('InspectStop')],
}
outdir = sys.argv[1]
os.makedirs(outdir, exist_ok=True)
for name, ops in seeds.items():
    data = vec(ops)
    with open(os.path.join(outdir, name), 'wb') as f:
        f.write(data)
    print(name, len(data))
