#!/usr/bin/env python3
"""Structure checks of the workspace's source files, run by .ci/run.

1. File size: no source file over 800 lines, except test code (files under `tests/`,
   `benches/`, `examples/`, `fuzz/`, files named `tests.rs`), generated tables (none yet) and
   the files of `ALLOWED_BIG`, each printed with its reason.
2. Import cycles: within each crate, the graph "file A refers to an item defined in file B"
   has no cycle. References are `use` declarations and inline paths (`crate::x::Y`,
   `super::Y`, `child::Y`) outside `#[cfg(test)]` modules; `pub use` re-exports are not
   references of the file that re-exports (they are followed to the file that defines the item).
3. Module map: every non-test source file of the workspace's crates and of `firmware/` is
   named in `docs/ARCHITECTURE.md` — its file name in backticks (`x.rs`, `dir/x.rs`, or a
   backticked pattern with `*` or `{a,b}` that matches it), or its directory as `dir/` where
   the map describes that directory as a whole (names none of its files but `mod.rs`); a
   `mod.rs` passes only with its own directory named (`dir/` or `dir/mod.rs`). A file added
   without a line in the map fails.

Prints what it checked and exits 1 on any finding.
"""

import fnmatch
import os
import re
import sys

MAX_LINES = 800
# Files allowed over MAX_LINES for now, with the reason; each is printed on every run.
ALLOWED_BIG = {}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def strip(src):
    """Source without comments, string and char literals (replaced by spaces)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:]) and (i == 0 or not src[i - 1].isalnum()):
            m = re.match(r'r(#*)"', src[i:])
            end = src.find('"' + m.group(1), i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append(re.sub(r"[^\n]", " ", src[i:end]))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", src[i : j + 1]))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", src[i:]):
            m = re.match(r"'(\\.|[^\\'])'", src[i:])
            out.append(" " * len(m.group(0)))
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def drop_test_modules(code):
    """Removes `#[cfg(test)] mod x { ... }` blocks."""
    while True:
        m = re.search(
            r"#\[cfg\([^\]]*\btest\b[^\]]*\)\]\s*(#\[[^\]]*\]\s*)*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{",
            code,
        )
        if not m:
            return code
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        code = code[: m.start()] + re.sub(r"[^\n]", " ", code[m.start() : j]) + code[j:]


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+", "", tree)
    m = re.match(r"^(.*?)\{(.*)\}$", tree)
    if not m:
        return [re.sub(r"as\w+$", "", tree)]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if p:
            out.extend(expand_use(prefix + p))
    return out


class Crate:
    def __init__(self, src_dir):
        self.files = {}  # module path tuple -> file path
        for dirpath, _, names in os.walk(src_dir):
            for name in names:
                if not name.endswith(".rs"):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, src_dir)[:-3].split(os.sep)
                if rel in (["lib"], ["main"]):
                    mod = ()
                elif rel[-1] == "mod":
                    mod = tuple(rel[:-1])
                else:
                    mod = tuple(rel)
                if rel[0] == "bin" or (rel != ["main"] and name == "main.rs" and len(rel) > 1):
                    continue
                self.files[mod] = path
        self.code = {}
        self.children = {}
        self.reexports = {}  # mod -> {name: full path}
        self.macros = {}  # macro name -> module defining it
        for mod, path in self.files.items():
            code = drop_test_modules(strip(open(path, encoding="utf-8").read()))
            self.code[mod] = code
            self.children[mod] = set(re.findall(r"\bmod\s+(\w+)\s*;", code))
            for name in re.findall(r"\bmacro_rules!\s*(\w+)", code):
                self.macros[name] = mod
            self.reexports[mod] = {}
            for m in re.finditer(r"\bpub(\([^)]*\))?\s+use\s+([^;]+);", code):
                for p in expand_use(m.group(2)):
                    name = p.split("::")[-1]
                    if name in ("*", "self"):
                        continue
                    self.reexports[mod][name] = self.absolute(mod, p.split("::"))

    def absolute(self, mod, segs):
        """The absolute module path of `segs` as written in module `mod`."""
        segs = [s for s in segs if s]
        if not segs:
            return None
        if segs[0] == "crate":
            return list(segs[1:])
        if segs[0] == "self":
            return list(mod) + segs[1:]
        if segs[0] == "super":
            base = list(mod)
            while segs and segs[0] == "super":
                base = base[:-1]
                segs = segs[1:]
            return base + segs
        if segs[0] in self.children.get(mod, ()):
            return list(mod) + segs
        return None  # an external crate or a prelude name

    def target(self, path, depth=0):
        """The file module that defines the item at absolute `path`."""
        if path is None or depth > 20:
            return None
        best = ()
        for i in range(1, len(path) + 1):
            if tuple(path[:i]) in self.files:
                best = tuple(path[:i])
            else:
                break
        rest = path[len(best) :]
        if best == () and len(rest) == 1 and rest[0] in self.macros:
            return self.macros[rest[0]]  # an exported macro lives at the root
        if rest and rest[0] in self.reexports.get(best, {}):
            again = self.reexports[best][rest[0]]
            if again is not None:
                return self.target(again + rest[1:], depth + 1)
        return best

    def edges(self):
        graph = {mod: set() for mod in self.files}
        for mod, code in self.code.items():
            refs = []
            for m in re.finditer(r"(?<![\w:])(pub(\([^)]*\))?\s+)?use\s+([^;]+);", code):
                if m.group(1):
                    continue
                refs.extend(p.split("::") for p in expand_use(m.group(3)))
            body = re.sub(r"\buse\s+[^;]+;", " ", code)
            heads = {"crate", "super", "self"} | self.children.get(mod, set())
            for m in re.finditer(r"(?<![\w:$])(\w+)((?:\s*::\s*\w+)+)", body):
                if m.group(1) in heads:
                    refs.append([m.group(1)] + re.findall(r"\w+", m.group(2)))
            for segs in refs:
                t = self.target(self.absolute(mod, segs))
                if t is not None and t != mod and t in self.files:
                    graph[mod].add(t)
        return graph


def cycles(graph):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def is_test_code(rel):
    parts = rel.split(os.sep)
    return (
        "tests" in parts
        or "benches" in parts
        or parts[0] == "fuzz"
        or parts[-1] == "tests.rs"
        or "examples" in parts
    )


def expand_braces(pattern):
    """`a{b,c}d` → [`abd`, `acd`] (one level, enough for the map's patterns)."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [
        x
        for alt in m.group(1).split(",")
        for x in expand_braces(pattern[: m.start()] + alt + pattern[m.end() :])
    ]


def unmapped(members):
    """Source files `docs/ARCHITECTURE.md` does not name (rule 3 of the module docs)."""
    text = open(os.path.join(ROOT, "docs", "ARCHITECTURE.md"), encoding="utf-8").read()
    spans = re.findall(r"`([^`\n]+)`", text)
    # File names, directories named as `dir/`, directories whose `mod.rs` is named as
    # `dir/mod.rs` or as `dir/`, and patterns.
    names, dirs, mod_dirs, patterns = set(), set(), set(), []
    for span in spans:
        # Split at spaces, commas, parentheses and `+`, but not at the commas of `{a,b}`.
        guarded = re.sub(r"\{[^{}]*\}", lambda m: m.group(0).replace(",", "\0"), span)
        for token in re.split(r"[\s,()+]+", guarded):
            for t in expand_braces(token.replace("\0", ",")):
                if "*" in t and t.endswith(".rs"):
                    patterns.append(t.rsplit("/", 1)[-1])
                elif t.endswith("/mod.rs"):
                    mod_dirs.add(t[: -len("/mod.rs")].rsplit("/", 1)[-1])
                elif t.endswith(".rs"):
                    names.add(t.rsplit("/", 1)[-1])
                elif t.endswith("/"):
                    dirs.add(t.rstrip("/").rsplit("/", 1)[-1])
    mod_dirs |= dirs
    missing = []
    for top in members + ["firmware"]:
        src = os.path.join(ROOT, top, "src")
        for dirpath, _, files in os.walk(src):
            rs = sorted(f for f in files if f.endswith(".rs"))
            # A directory is described file by file (when the map names any of its files
            # other than `mod.rs`) or as a whole (`dir/`); in the first case every file must
            # be named.
            by_file = dirpath == src or any(f in names for f in rs if f != "mod.rs")
            whole = os.path.basename(dirpath) in dirs
            for name in rs:
                rel = os.path.relpath(os.path.join(dirpath, name), ROOT)
                if is_test_code(rel) or (dirpath == src and name in ("lib.rs", "main.rs")):
                    continue
                if name == "mod.rs":
                    # Many directories have one: it counts only with its own directory named.
                    if os.path.basename(dirpath) not in mod_dirs:
                        missing.append(rel)
                    continue
                if name in names or any(fnmatch.fnmatch(name, p) for p in patterns):
                    continue
                if whole and not by_file:
                    continue
                missing.append(rel)
    return missing


def main():
    failed = False
    members = []
    for line in open(os.path.join(ROOT, "Cargo.toml"), encoding="utf-8"):
        m = re.match(r'\s*"([\w-]+)",?\s*$', line)
        if m and os.path.isdir(os.path.join(ROOT, m.group(1), "src")):
            if m.group(1) not in members:
                members.append(m.group(1))
    big = []
    for dirpath, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in ("target", ".git") and not d.startswith("target")]
        for name in names:
            if name.endswith(".rs"):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)
                n = sum(1 for _ in open(path, encoding="utf-8"))
                if n > MAX_LINES and not is_test_code(rel):
                    big.append((rel, n))
    print(f"file size: source files over {MAX_LINES} lines (test code excepted): {len(big)}")
    for rel, n in sorted(big):
        if rel in ALLOWED_BIG:
            print(f"  {rel}: {n} lines (allowed: {ALLOWED_BIG[rel]})")
        else:
            print(f"  {rel}: {n} lines")
            failed = True
    total = 0
    for member in members:
        crate = Crate(os.path.join(ROOT, member, "src"))
        graph = crate.edges()
        total += len(graph)
        found = cycles(graph)
        for comp in found:
            failed = True
            names = [os.path.relpath(crate.files[m], ROOT) for m in comp]
            print(f"import cycle in {member}: " + " <-> ".join(sorted(names)))
    print(f"import cycles: {len(members)} crates, {total} files checked")
    missing = unmapped(members)
    for rel in missing:
        failed = True
        print(f"  not in docs/ARCHITECTURE.md's module map: {rel}")
    print(f"module map: source files not named in docs/ARCHITECTURE.md: {len(missing)}")
    if failed:
        print("structure check FAILED")
        return 1
    print("structure check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
