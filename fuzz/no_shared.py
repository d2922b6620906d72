#!/usr/bin/env python3
"""Removes from the given folders every file that holds a copy of part of a file under
`../shared/` (beside the repository): the project may read `shared/` at run time but must not
commit anything copied from it, and a fuzzing input grown from the compiler fixture seed would
carry its bytes. A file is removed when it contains any 64-byte block of a shared file at a
64-byte-aligned offset, anywhere (so a block shifted by a mutation still counts).

    fuzz/no_shared.py FOLDER...

Prints what it removed; exits 0 (also when `shared/` is absent: nothing to compare).
"""
import pathlib
import sys

BLOCK = 64


def main() -> int:
    shared = pathlib.Path(__file__).resolve().parent.parent.parent / "shared"
    blocks = set()
    for f in shared.rglob("*") if shared.is_dir() else []:
        if f.is_file():
            data = f.read_bytes()
            for i in range(0, len(data) - BLOCK + 1, BLOCK):
                chunk = data[i : i + BLOCK]
                if len(set(chunk)) > 4:  # skip runs of padding bytes: no content
                    blocks.add(chunk)
    removed = 0
    for folder in sys.argv[1:]:
        for f in sorted(pathlib.Path(folder).rglob("*")):
            if not f.is_file():
                continue
            data = f.read_bytes()
            if any(data[i : i + BLOCK] in blocks for i in range(0, len(data) - BLOCK + 1)):
                f.unlink()
                removed += 1
                print(f"removed {f}: holds bytes of a file under shared/")
    print(f"no_shared: {removed} file(s) removed, {len(blocks)} shared blocks compared")
    return 0


if __name__ == "__main__":
    sys.exit(main())
