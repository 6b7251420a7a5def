//! The layering rules of issue 37, checked on the workspace's own source:
//! in every crate, no import circle between source files, and no source file
//! over 1,000 lines. Test code is left out: files named `tests.rs` or
//! `*_tests.rs`, anything under a `tests` directory, and every item under
//! `#[cfg(test)]`.
//!
//! The graph has one node per file. File A points at file B when A names a
//! path — in a `use` item (nested groups too) or written inline in code
//! (`crate::x::y::f()`, inside macro calls as well) — whose longest module
//! prefix is defined in B. Paths starting with `crate`, `$crate`, `self`,
//! any number of `super`, a child module or a name a `use` of the file
//! imports are resolved. When the segment after that module is a name the
//! module only imports (a `pub use` re-export, or any `use` a descendant can
//! see), A points at the file that defines it too. A file naming one of its
//! ancestor modules adds no edge: a child using its parent is allowed. The
//! module tree is read from the `mod` items (`#[path]` honoured), starting at
//! `lib.rs`, `main.rs` and `bin/*.rs`. A small lexer skips comments, string
//! and char literals, so neither prose nor messages make edges.
//!
//! Every circle and the largest files are printed with
//! `cargo test -p xy-core --test layering -- --nocapture`.
#![allow(clippy::print_stderr)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// The workspace's crates, each checked on its own `src/`.
const CRATES: &[&str] = &["xy-core", "xy-actors", "xy-daemon", "xy-cli", "xy-testbins"];

/// Crates whose circles and long files are printed but do not fail the test:
/// a crate goes here only while a change that untangles it is under way
/// (issue 37 emptied it).
const PENDING: &[&str] = &[];

/// The longest a source file may be (tests aside).
const MAX_LINES: usize = 1_000;

#[test]
fn no_import_circles_and_no_long_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the workspace directory");
    let mut report = String::new();
    let mut failures = Vec::new();
    for name in CRATES {
        let krate = check_crate(&root.join(name));
        let pending = PENDING.contains(name);
        let _ = writeln!(
            report,
            "{name}: {} circle(s), {} file(s) over {MAX_LINES} lines{}",
            krate.circles.len(),
            krate.long.len(),
            if pending { " (pending)" } else { "" }
        );
        for circle in &krate.circles {
            let _ = writeln!(report, "  circle of {} files:", circle.files.len());
            for f in &circle.files {
                let _ = writeln!(report, "    {f}");
            }
            for edge in &circle.edges {
                let _ = writeln!(report, "      {edge}");
            }
        }
        for (lines, f) in &krate.long {
            let _ = writeln!(report, "  {lines} lines: {f}");
        }
        for f in &krate.unreached {
            let _ = writeln!(report, "  not in the module tree (not checked): {f}");
        }
        let clean = krate.circles.is_empty() && krate.long.is_empty();
        if !pending && !clean {
            failures.push(*name);
        }
    }
    eprint!("{report}");
    assert!(
        failures.is_empty(),
        "import circles or files over {MAX_LINES} lines in {failures:?}:\n{report}"
    );
}

/// What the check found in one crate.
struct CrateReport {
    circles: Vec<Circle>,
    /// `(lines, file)` of every non-test file over [`MAX_LINES`].
    long: Vec<(usize, String)>,
    /// `.rs` files under `src/` that no `mod` item reaches.
    unreached: Vec<String>,
}

/// One strongly connected set of more than one file.
struct Circle {
    files: Vec<String>,
    /// Each edge inside the set, with the first path that made it.
    edges: Vec<String>,
}

fn check_crate(dir: &Path) -> CrateReport {
    let src = dir.join("src");
    let mut roots = Vec::new();
    for root in ["lib.rs", "main.rs"] {
        if src.join(root).is_file() {
            roots.push(src.join(root));
        }
    }
    if let Ok(entries) = fs::read_dir(src.join("bin")) {
        let mut bins: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter_map(|p| {
                if p.extension().is_some_and(|e| e == "rs") {
                    Some(p)
                } else if p.join("main.rs").is_file() {
                    Some(p.join("main.rs"))
                } else {
                    None
                }
            })
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    assert!(!roots.is_empty(), "no crate root under {}", src.display());

    // Each root is a crate of its own: its own tree, its own `crate::`.
    let mut edges: BTreeMap<(PathBuf, PathBuf), String> = BTreeMap::new();
    let mut reached: BTreeMap<PathBuf, usize> = BTreeMap::new();
    let mut tests = BTreeSet::new();
    for root in &roots {
        let krate = Crate::load(root);
        krate.edges(&mut edges);
        tests.extend(krate.test_files.iter().cloned());
        for (file, info) in &krate.files {
            reached.insert(file.clone(), info.lines);
        }
    }

    let rel = |p: &Path| {
        p.strip_prefix(dir.parent().unwrap_or(dir))
            .unwrap_or(p)
            .display()
            .to_string()
    };
    let nodes: Vec<PathBuf> = reached.keys().cloned().collect();
    let mut circles: Vec<Circle> = strongly_connected(&nodes, &edges)
        .into_iter()
        .map(|set| Circle {
            files: set.iter().map(|f| rel(f)).collect(),
            edges: edges
                .iter()
                .filter(|((a, b), _)| set.contains(a) && set.contains(b))
                .map(|((a, b), why)| format!("{} -> {} ({why})", rel(a), rel(b)))
                .collect(),
        })
        .collect();
    circles.sort_by(|a, b| a.files.cmp(&b.files));

    let mut long: Vec<(usize, String)> = reached
        .iter()
        .filter(|(_, lines)| **lines > MAX_LINES)
        .map(|(f, lines)| (*lines, rel(f)))
        .collect();
    long.sort_by(|a, b| b.cmp(a));

    let mut unreached = Vec::new();
    let mut stack = vec![src];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for p in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs")
                && !is_test_file(&p)
                && !tests.contains(&p)
                && !reached.contains_key(&p)
            {
                unreached.push(rel(&p));
            }
        }
    }
    unreached.sort();

    CrateReport {
        circles,
        long,
        unreached,
    }
}

/// A file that holds only tests, by its name or its directory.
fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name == "tests.rs" || name.ends_with("_tests.rs") {
        return true;
    }
    let mut dirs = path.components().rev().skip(1);
    // Only directories inside `src/` count; `src/` itself ends the walk.
    dirs.by_ref()
        .take_while(|c| c.as_os_str() != "src")
        .any(|c| c.as_os_str() == "tests")
}

// ---- one crate: its module tree and its edges ----

/// One file of a crate.
struct FileInfo {
    /// The module the file defines (`["config", "parse"]`).
    module: Vec<String>,
    parsed: Parsed,
    lines: usize,
}

/// One crate root and every non-test file its `mod` items reach.
struct Crate {
    /// Every module (inline ones included) and the file that holds it.
    tree: BTreeMap<Vec<String>, PathBuf>,
    files: BTreeMap<PathBuf, FileInfo>,
    /// Files that `#[cfg(test)] mod` items name.
    test_files: BTreeSet<PathBuf>,
}

impl Crate {
    fn load(root: &Path) -> Crate {
        let mut krate = Crate {
            tree: BTreeMap::new(),
            files: BTreeMap::new(),
            test_files: BTreeSet::new(),
        };
        // (file, its module, whether its children live beside it as in a `mod.rs`)
        let mut queue = vec![(root.to_path_buf(), Vec::<String>::new(), true)];
        while let Some((file, module, mod_rs)) = queue.pop() {
            if is_test_file(&file) || krate.files.contains_key(&file) {
                continue;
            }
            let Ok(text) = fs::read_to_string(&file) else {
                continue;
            };
            let parsed = parse(&lex(&text));
            krate.tree.insert(module.clone(), file.clone());
            for scope in &parsed.inline {
                krate.tree.insert(cat(&module, scope), file.clone());
            }
            let here = file.parent().unwrap_or(Path::new("")).to_path_buf();
            let children = if mod_rs {
                here.clone()
            } else {
                here.join(file.file_stem().unwrap_or_default())
            };
            let locate = |decl: &ModDecl| match &decl.path {
                Some(p) => (here.join(p), true),
                None => {
                    let dir = decl.scope.iter().fold(children.clone(), |d, s| d.join(s));
                    let flat = dir.join(format!("{}.rs", decl.name));
                    if flat.is_file() {
                        (flat, false)
                    } else {
                        (dir.join(&decl.name).join("mod.rs"), true)
                    }
                }
            };
            for decl in &parsed.mods {
                let child = cat(&cat(&module, &decl.scope), std::slice::from_ref(&decl.name));
                let (path, mod_rs) = locate(decl);
                queue.push((path, child, mod_rs));
            }
            krate
                .test_files
                .extend(parsed.test_mods.iter().map(|decl| locate(decl).0));
            let lines = text.lines().count();
            krate.files.insert(
                file,
                FileInfo {
                    module,
                    parsed,
                    lines,
                },
            );
        }
        krate
    }

    /// Adds an edge for every path each file names.
    fn edges(&self, edges: &mut BTreeMap<(PathBuf, PathBuf), String>) {
        for (file, info) in &self.files {
            let named = info
                .parsed
                .uses
                .iter()
                .map(|u| (&u.scope, &u.path, u.line))
                .chain(info.parsed.refs.iter().map(|r| (&r.scope, &r.path, r.line)));
            for (scope, path, line) in named {
                let Some(abs) = self.absolute(file, scope, path, 0) else {
                    continue;
                };
                let here = cat(&info.module, scope);
                let mut to = BTreeSet::new();
                self.targets(file, &here, &abs, 0, &mut to);
                for t in to {
                    edges
                        .entry((file.clone(), t))
                        .or_insert_with(|| format!("line {line}: {}", path.join("::")));
                }
            }
        }
    }

    /// The absolute module path that `path`, written in `scope` of `file`,
    /// names; `None` for a path outside this crate.
    fn absolute(
        &self,
        file: &Path,
        scope: &[String],
        path: &[String],
        hops: usize,
    ) -> Option<Vec<String>> {
        if hops > 8 || path.is_empty() {
            return None;
        }
        let info = &self.files[file];
        let here = cat(&info.module, scope);
        match path[0].as_str() {
            "crate" => Some(path[1..].to_vec()),
            "self" => Some(cat(&here, &path[1..])),
            "super" => {
                let up = path.iter().take_while(|s| *s == "super").count();
                let base = here.get(..here.len().checked_sub(up)?)?;
                Some(cat(base, &path[up..]))
            }
            "::" => None,
            name => {
                if self
                    .tree
                    .contains_key(&cat(&here, std::slice::from_ref(&path[0])))
                {
                    return Some(cat(&here, path));
                }
                // A name a `use` of this file imports, in this scope first.
                let binds = |u: &&Use| {
                    matches!(&u.bind, Bind::Name(n) if n == name)
                        && !(u.path.len() == 1 && u.path[0] == name)
                };
                let u = info
                    .parsed
                    .uses
                    .iter()
                    .filter(binds)
                    .find(|u| u.scope == scope)
                    .or_else(|| info.parsed.uses.iter().find(binds))?;
                let base = self.absolute(file, &u.scope, &u.path, hops + 1)?;
                Some(cat(&base, &path[1..]))
            }
        }
    }

    /// The files `abs`, named from module `here` of file `from`, points at:
    /// the file of its longest module prefix unless that is `from` or one of
    /// its ancestors, and, when that module only imports the next segment,
    /// where the import leads.
    fn targets(
        &self,
        from: &Path,
        here: &[String],
        abs: &[String],
        hops: usize,
        out: &mut BTreeSet<PathBuf>,
    ) {
        let Some(k) = (0..=abs.len())
            .rev()
            .find(|k| self.tree.contains_key(&abs[..*k]))
        else {
            return;
        };
        let module = &abs[..k];
        let file = &self.tree[module];
        if file != from && !here.starts_with(module) {
            out.insert(file.clone());
        }
        if k == abs.len() || hops >= 8 {
            return;
        }
        let name = &abs[k];
        let info = &self.files[file];
        let scope = &module[info.module.len()..];
        if info.parsed.defines(scope, name) {
            return;
        }
        let uses = || {
            info.parsed
                .uses
                .iter()
                .filter(|u| u.top && u.scope == scope)
        };
        // An import by name shadows what a glob brings.
        let named: Vec<&Use> = uses()
            .filter(|u| matches!(&u.bind, Bind::Name(n) if n == name))
            .collect();
        if !named.is_empty() {
            for u in named {
                if let Some(base) = self.absolute(file, scope, &u.path, 0) {
                    self.targets(from, here, &cat(&base, &abs[k + 1..]), hops + 1, out);
                }
            }
            return;
        }
        for u in uses().filter(|u| matches!(u.bind, Bind::Glob)) {
            if let Some(base) = self.absolute(file, scope, &u.path, 0)
                && self.provides(&base, name, hops + 1)
            {
                let full = cat(&cat(&base, std::slice::from_ref(name)), &abs[k + 1..]);
                self.targets(from, here, &full, hops + 1, out);
            }
        }
    }

    /// Whether module `module` defines or imports `name` publicly (what a
    /// glob import of it brings).
    fn provides(&self, module: &[String], name: &str, hops: usize) -> bool {
        let Some(file) = self.tree.get(module) else {
            return false;
        };
        if hops > 8 {
            return false;
        }
        let info = &self.files[file];
        let scope = &module[info.module.len()..];
        info.parsed
            .pub_items
            .contains(&(scope.to_vec(), name.to_owned()))
            || info
                .parsed
                .uses
                .iter()
                .filter(|u| u.top && u.public && u.scope == scope)
                .any(|u| match &u.bind {
                    Bind::Name(n) => n == name,
                    Bind::Glob => self
                        .absolute(file, scope, &u.path, 0)
                        .is_some_and(|base| self.provides(&base, name, hops + 1)),
                })
    }
}

fn cat(a: &[String], b: &[String]) -> Vec<String> {
    a.iter().chain(b).cloned().collect()
}

/// Tarjan's strongly connected components; only sets of more than one node.
fn strongly_connected(
    nodes: &[PathBuf],
    edges: &BTreeMap<(PathBuf, PathBuf), String>,
) -> Vec<BTreeSet<PathBuf>> {
    struct State<'a> {
        next: BTreeMap<&'a PathBuf, Vec<&'a PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        out: Vec<BTreeSet<PathBuf>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a PathBuf) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.next.get(v).cloned().unwrap_or_default() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut set = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                set.insert(w.clone());
                if w == v {
                    break;
                }
            }
            if set.len() > 1 {
                s.out.push(set);
            }
        }
    }
    let mut s = State {
        next: BTreeMap::new(),
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for (a, b) in edges.keys() {
        s.next.entry(a).or_default().push(b);
    }
    for v in nodes {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

// ---- a file: lexer and item walk ----

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Punct(u8),
    /// A string literal's text as written (for `#[path = "…"]`).
    Str(String),
    /// A number, a char or a lifetime: nothing a path is made of.
    Other,
}

struct Token {
    tok: Tok,
    line: usize,
}

fn is_ident_start(c: u8) -> bool {
    c == b'_' || c.is_ascii_alphabetic()
}

fn is_ident_char(c: u8) -> bool {
    c == b'_' || c.is_ascii_alphanumeric()
}

/// The index after the string literal whose opening `"` is at `i`.
fn skip_quoted(b: &[u8], mut i: usize) -> usize {
    i += 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// The index after the raw string literal whose `#`s or `"` start at `i`.
fn skip_raw(b: &[u8], mut i: usize) -> usize {
    let mut hashes = 0;
    while b.get(i) == Some(&b'#') {
        hashes += 1;
        i += 1;
    }
    i += 1;
    while i < b.len() {
        if b[i] == b'"' && b.len() > i + hashes && b[i + 1..=i + hashes].iter().all(|&c| c == b'#')
        {
            return i + 1 + hashes;
        }
        i += 1;
    }
    b.len()
}

/// The index after the char literal or lifetime whose `'` is at `i`.
fn skip_char_or_lifetime(src: &str, i: usize) -> usize {
    let b = src.as_bytes();
    if b.get(i + 1) == Some(&b'\\') {
        let mut j = i + 3;
        while j < b.len() && b[j] != b'\'' {
            j += 1;
        }
        return j + 1;
    }
    match src.get(i + 1..).and_then(|s| s.chars().next()) {
        Some(c) if b.get(i + 1 + c.len_utf8()) == Some(&b'\'') => i + 2 + c.len_utf8(),
        _ => {
            let mut j = i + 1;
            while j < b.len() && is_ident_char(b[j]) {
                j += 1;
            }
            j
        }
    }
}

fn lex(src: &str) -> Vec<Token> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    while i < b.len() {
        let start = i;
        let mut push = |tok: Tok| out.push(Token { tok, line });
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == b'"' {
            i = skip_quoted(b, i);
            push(Tok::Str(
                src[start + 1..i.saturating_sub(1).max(start + 1)].to_owned(),
            ));
        } else if c == b'\'' {
            i = skip_char_or_lifetime(src, i);
            push(Tok::Other);
        } else if is_ident_start(c) {
            let mut j = i;
            while j < b.len() && is_ident_char(b[j]) {
                j += 1;
            }
            let word = &src[i..j];
            let next = b.get(j).copied();
            let after = b.get(j + 1).copied();
            match (word, next) {
                ("r", Some(b'#')) if !matches!(after, Some(b'"' | b'#')) => {
                    let mut k = j + 1;
                    while k < b.len() && is_ident_char(b[k]) {
                        k += 1;
                    }
                    push(Tok::Ident(src[i..k].to_owned()));
                    i = k;
                }
                ("r" | "br" | "cr", Some(b'"' | b'#')) => {
                    i = skip_raw(b, j);
                    push(Tok::Str(String::new()));
                }
                ("b" | "c", Some(b'"')) => {
                    i = skip_quoted(b, j);
                    push(Tok::Str(String::new()));
                }
                ("b", Some(b'\'')) => {
                    i = skip_char_or_lifetime(src, j);
                    push(Tok::Other);
                }
                _ => {
                    push(Tok::Ident(word.to_owned()));
                    i = j;
                }
            }
        } else if c.is_ascii_digit() {
            while i < b.len() && is_ident_char(b[i]) {
                i += 1;
            }
            push(Tok::Other);
        } else if c == b':' && b.get(i + 1) == Some(&b':') {
            push(Tok::Sep);
            i += 2;
        } else {
            push(Tok::Punct(c));
            i += 1;
        }
        line += b[start..i.min(b.len())]
            .iter()
            .filter(|&&c| c == b'\n')
            .count();
    }
    out
}

/// What one file declares and names.
#[derive(Default)]
struct Parsed {
    /// `mod name;` items.
    mods: Vec<ModDecl>,
    /// `mod name;` items under `#[cfg(test)]`.
    test_mods: Vec<ModDecl>,
    /// Inline `mod name { … }` bodies, as paths inside the file.
    inline: Vec<Vec<String>>,
    /// Every leaf of every `use` item.
    uses: Vec<Use>,
    /// Paths of two or more segments written in code.
    refs: Vec<Ref>,
    /// Names defined by items at module level: (scope in the file, name).
    items: BTreeSet<(Vec<String>, String)>,
    /// Those of them with any `pub` visibility.
    pub_items: BTreeSet<(Vec<String>, String)>,
}

impl Parsed {
    fn defines(&self, scope: &[String], name: &str) -> bool {
        self.items.contains(&(scope.to_vec(), name.to_owned()))
            || self.inline.contains(&cat(scope, &[name.to_owned()]))
            || self.mods.iter().any(|m| m.scope == scope && m.name == name)
    }
}

struct ModDecl {
    /// The inline module it sits in (empty: the file's own).
    scope: Vec<String>,
    name: String,
    /// `#[path = "…"]`.
    path: Option<String>,
}

struct Use {
    scope: Vec<String>,
    /// At module level (not inside a function body or a block).
    top: bool,
    /// `pub use` (any `pub`): what a glob import of the module brings.
    public: bool,
    path: Vec<String>,
    bind: Bind,
    line: usize,
}

enum Bind {
    /// The name the leaf brings into scope (its last segment or its `as`).
    Name(String),
    /// `*`
    Glob,
}

struct Ref {
    scope: Vec<String>,
    path: Vec<String>,
    line: usize,
}

/// Keywords whose next identifier is the name of an item.
const ITEM_KEYWORDS: &[&str] = &[
    "struct", "enum", "union", "trait", "type", "fn", "const", "static",
];

fn parse(toks: &[Token]) -> Parsed {
    let tok = |i: usize| toks.get(i).map(|t| &t.tok);
    let mut p = Parsed::default();
    let mut scope: Vec<String> = Vec::new();
    // The brace depth of the file's body and of each open inline module's.
    let mut mod_depth = vec![0usize];
    let mut depth = 0usize;
    let mut cfg_test = false;
    let mut path_attr: Option<String> = None;
    // A `pub` at module level since the last item ended.
    let mut public = false;
    let mut i = 0;
    while i < toks.len() {
        let line = toks[i].line;
        let top = Some(&depth) == mod_depth.last();
        match &toks[i].tok {
            Tok::Punct(b'#') => {
                let inner = tok(i + 1) == Some(&Tok::Punct(b'!'));
                let open = if inner { i + 2 } else { i + 1 };
                if tok(open) != Some(&Tok::Punct(b'[')) {
                    i += 1;
                    continue;
                }
                let close = matching(toks, open);
                let body = &toks[open + 1..close.min(toks.len())];
                if !inner {
                    cfg_test |= is_cfg_test(body);
                    if let [
                        Token {
                            tok: Tok::Ident(k), ..
                        },
                        Token {
                            tok: Tok::Punct(b'='),
                            ..
                        },
                        Token {
                            tok: Tok::Str(s), ..
                        },
                    ] = body
                        && k == "path"
                    {
                        path_attr = Some(s.clone());
                    }
                }
                // Paths inside an attribute are uses too:
                // `#[arg(default_value_t = crate::x::Y)]` ties its module to `x`.
                let body_end = close.min(toks.len());
                let mut k = open + 1;
                while k < body_end {
                    let starts = matches!(tok(k), Some(Tok::Ident(_)))
                        && tok(k.wrapping_sub(1)) != Some(&Tok::Sep)
                        && tok(k + 1) == Some(&Tok::Sep)
                        && matches!(tok(k + 2), Some(Tok::Ident(_)));
                    if !starts {
                        k += 1;
                        continue;
                    }
                    let mut path = Vec::new();
                    if let Some(Tok::Ident(w)) = tok(k) {
                        path.push(w.clone());
                    }
                    let mut j = k + 1;
                    while j < body_end
                        && let (Some(Tok::Sep), Some(Tok::Ident(s))) = (tok(j), tok(j + 1))
                    {
                        path.push(s.clone());
                        j += 2;
                    }
                    p.refs.push(Ref {
                        scope: scope.clone(),
                        path,
                        line: toks[k].line,
                    });
                    k = j;
                }
                i = close + 1;
            }
            _ if cfg_test => {
                let end = skip_item(toks, i);
                // `#[cfg(test)] mod name;`: a file of tests, under any name.
                if let [.., Tok::Ident(m), Tok::Ident(name), Tok::Punct(b';')] = toks[i..end]
                    .iter()
                    .map(|t| t.tok.clone())
                    .collect::<Vec<_>>()
                    .as_slice()
                    && m == "mod"
                {
                    p.test_mods.push(ModDecl {
                        scope: scope.clone(),
                        name: name.clone(),
                        path: path_attr.take(),
                    });
                }
                i = end;
                cfg_test = false;
                path_attr = None;
                public = false;
            }
            Tok::Ident(w) if w == "mod" => {
                match (tok(i + 1), tok(i + 2)) {
                    (Some(Tok::Ident(name)), Some(Tok::Punct(b';'))) => {
                        p.mods.push(ModDecl {
                            scope: scope.clone(),
                            name: name.clone(),
                            path: path_attr.take(),
                        });
                        i += 3;
                    }
                    (Some(Tok::Ident(name)), Some(Tok::Punct(b'{'))) => {
                        scope.push(name.clone());
                        p.inline.push(scope.clone());
                        depth += 1;
                        mod_depth.push(depth);
                        i += 3;
                    }
                    _ => i += 1,
                }
                path_attr = None;
                public = false;
            }
            // `use<'a>` in `impl Trait + use<'a>` is no import.
            Tok::Ident(w) if w == "use" && tok(i + 1) != Some(&Tok::Punct(b'<')) => {
                let mut j = i + 1;
                let mut leaves = Vec::new();
                use_tree(toks, &mut j, Vec::new(), &mut leaves);
                for (path, bind) in leaves {
                    p.uses.push(Use {
                        scope: scope.clone(),
                        top,
                        public,
                        path,
                        bind,
                        line,
                    });
                }
                while j < toks.len() && toks[j].tok != Tok::Punct(b';') {
                    j += 1;
                }
                i = j + 1;
                path_attr = None;
                public = false;
            }
            Tok::Ident(w) => {
                public |= top && w == "pub";
                if top && (ITEM_KEYWORDS.contains(&w.as_str()) || w == "macro_rules") {
                    let at = if w == "macro_rules" { i + 2 } else { i + 1 };
                    if let Some(Tok::Ident(name)) = tok(at) {
                        p.items.insert((scope.clone(), name.clone()));
                        if public {
                            p.pub_items.insert((scope.clone(), name.clone()));
                        }
                    }
                }
                let starts_path = tok(i.wrapping_sub(1)) != Some(&Tok::Sep)
                    && tok(i + 1) == Some(&Tok::Sep)
                    && matches!(tok(i + 2), Some(Tok::Ident(_)));
                if !starts_path {
                    i += 1;
                    continue;
                }
                let mut path = vec![w.clone()];
                let mut j = i + 1;
                while let (Some(Tok::Sep), Some(Tok::Ident(s))) = (tok(j), tok(j + 1)) {
                    path.push(s.clone());
                    j += 2;
                }
                p.refs.push(Ref {
                    scope: scope.clone(),
                    path,
                    line,
                });
                i = j;
            }
            Tok::Punct(b'{') => {
                depth += 1;
                path_attr = None;
                public = false;
                i += 1;
            }
            Tok::Punct(b'}') => {
                if mod_depth.len() > 1 && Some(&depth) == mod_depth.last() {
                    mod_depth.pop();
                    scope.pop();
                }
                depth = depth.saturating_sub(1);
                path_attr = None;
                public = false;
                i += 1;
            }
            Tok::Punct(b';') => {
                path_attr = None;
                public = false;
                i += 1;
            }
            _ => i += 1,
        }
    }
    p
}

/// `#[cfg(test)]`, `#[cfg(all(test, …))]`: code that only tests build.
fn is_cfg_test(attr: &[Token]) -> bool {
    let ident = |t: &Token, s: &str| matches!(&t.tok, Tok::Ident(w) if w == s);
    attr.first().is_some_and(|t| ident(t, "cfg"))
        && attr.iter().any(|t| ident(t, "test"))
        && !attr.iter().any(|t| ident(t, "not") || ident(t, "any"))
}

/// The index of the bracket closing the one at `open`.
fn matching(toks: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, t) in toks.iter().enumerate().skip(open) {
        match t.tok {
            Tok::Punct(b'(' | b'[' | b'{') => depth += 1,
            Tok::Punct(b')' | b']' | b'}') => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

/// The index after the item (or statement) starting at `i`: its `;` or its
/// closing `}`; a bracket closing an enclosing one ends it too, unconsumed.
fn skip_item(toks: &[Token], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < toks.len() {
        match toks[i].tok {
            Tok::Punct(b'(' | b'[' | b'{') => depth += 1,
            Tok::Punct(b')' | b']') => {
                if depth == 0 {
                    return i;
                }
                depth -= 1;
            }
            Tok::Punct(b'}') => {
                if depth == 0 {
                    return i;
                }
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            Tok::Punct(b';') if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// Collects the leaves of the use tree starting at `i` under `prefix`.
fn use_tree(
    toks: &[Token],
    i: &mut usize,
    mut path: Vec<String>,
    out: &mut Vec<(Vec<String>, Bind)>,
) {
    loop {
        match toks.get(*i).map(|t| &t.tok) {
            Some(Tok::Sep) => {
                if path.is_empty() {
                    path.push("::".to_owned());
                }
                *i += 1;
            }
            Some(Tok::Punct(b'$')) => *i += 1,
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                *i += 1;
                if toks.get(*i).map(|t| &t.tok) == Some(&Tok::Sep) {
                    *i += 1;
                    continue;
                }
                let mut name = s.clone();
                if let (Some(Tok::Ident(a)), Some(Tok::Ident(n))) = (
                    toks.get(*i).map(|t| &t.tok),
                    toks.get(*i + 1).map(|t| &t.tok),
                ) && a == "as"
                {
                    name = n.clone();
                    *i += 2;
                }
                if path.last().is_some_and(|s| s == "self") {
                    path.pop();
                    if name == "self" {
                        name = path.last().cloned().unwrap_or_default();
                    }
                }
                out.push((path, Bind::Name(name)));
                return;
            }
            Some(Tok::Punct(b'{')) => {
                *i += 1;
                loop {
                    match toks.get(*i).map(|t| &t.tok) {
                        Some(Tok::Punct(b'}')) => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Punct(b',')) => *i += 1,
                        None | Some(Tok::Punct(b';')) => return,
                        _ => {
                            let before = *i;
                            use_tree(toks, i, path.clone(), out);
                            if *i == before {
                                *i += 1;
                            }
                        }
                    }
                }
            }
            Some(Tok::Punct(b'*')) => {
                *i += 1;
                out.push((path, Bind::Glob));
                return;
            }
            _ => return,
        }
    }
}

// ---- the checker checked ----

fn parsed(src: &str) -> Parsed {
    parse(&lex(src))
}

fn paths(p: &Parsed) -> Vec<String> {
    p.uses
        .iter()
        .map(|u| &u.path)
        .chain(p.refs.iter().map(|r| &r.path))
        .map(|p| p.join("::"))
        .collect()
}

#[test]
fn lexer_skips_comments_strings_and_chars() {
    let p = parsed(
        r####"
        // crate::a::b
        /* crate::c::d /* nested */ crate::e::f */
        const S: &str = "http://x // crate::g::h";
        const R: &str = r#"crate::i::j " "#;
        const B: &[u8] = b"crate::k::l";
        const C: char = '"';
        fn f<'a>(x: &'a str) -> char { let _ = crate::m::n(x); '\'' }
        const D: char = '{'; fn g() { super::super::o::p(); }
        "####,
    );
    assert_eq!(paths(&p), ["crate::m::n", "super::super::o::p"]);
}

#[test]
fn paths_in_attributes_are_references() {
    let p = parsed(
        "#[derive(Debug)]\n#[arg(long, default_value_t = crate::outcome::DEFAULT_WAIT)]\nstruct A;\n\
         #[cfg(test)]\nmod tests;\n",
    );
    assert_eq!(paths(&p), ["crate::outcome::DEFAULT_WAIT"]);
}

#[test]
fn use_groups_are_flattened() {
    let p = parsed("use crate::{a::{b, c as d, self}, e::*}; use self::f::g; pub use h::i;");
    let leaves: Vec<String> = p
        .uses
        .iter()
        .map(|u| match &u.bind {
            Bind::Name(n) => format!("{} as {n}", u.path.join("::")),
            Bind::Glob => format!("{}::*", u.path.join("::")),
        })
        .collect();
    assert_eq!(
        leaves,
        [
            "crate::a::b as b",
            "crate::a::c as d",
            "crate::a as a",
            "crate::e::*",
            "self::f::g as g",
            "h::i as i",
        ]
    );
}

#[test]
fn visibility_is_kept_for_globs() {
    let p = parsed(
        "pub use a::*;\nuse b::C;\npub(crate) struct D;\nstruct E;\n\
         pub mod m { fn f() {} }\npub const fn g() {}\n",
    );
    let public: Vec<bool> = p.uses.iter().map(|u| u.public).collect();
    assert_eq!(public, [true, false]);
    let names = |set: &BTreeSet<(Vec<String>, String)>| -> Vec<String> {
        set.iter().map(|(_, n)| n.clone()).collect()
    };
    assert_eq!(names(&p.pub_items), ["D", "fn", "g"]);
    assert_eq!(names(&p.items), ["D", "E", "fn", "g", "f"]);
}

#[test]
fn cfg_test_items_are_left_out() {
    let p = parsed(
        "#[cfg(test)]\nmod tests { use crate::a::b; }\n\
         #[cfg(test)]\nuse crate::c::d;\n\
         #[cfg(test)]\nfn helper() { crate::e::f(); }\n\
         #[cfg(not(test))]\nuse crate::g::h;\n\
         #[path = \"x_impl.rs\"]\nmod x;\n\
         mod inline { pub fn f() { super::y::z(); } }\n\
         #[cfg(test)]\npub(crate) mod mock;\n",
    );
    assert_eq!(paths(&p), ["crate::g::h", "super::y::z"]);
    assert_eq!(p.mods.len(), 1);
    assert_eq!(p.test_mods.len(), 1);
    assert_eq!(p.test_mods[0].name, "mock");
    assert_eq!(p.mods[0].path.as_deref(), Some("x_impl.rs"));
    assert_eq!(p.refs[0].scope, ["inline"]);
}
