//! Repository hygiene checks that keep the documentation and the code honest.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn read(p: impl AsRef<Path>) -> String {
    let p = root().join(p);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

/// The `members = [...]` list of the root manifest.
fn workspace_members() -> Vec<String> {
    let manifest = read("Cargo.toml");
    let start = manifest
        .find("members = [")
        .expect("workspace members list");
    let list = &manifest[start..];
    let end = list.find(']').expect("end of members list");
    list[..end]
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_workspace_crate_is_in_the_architecture_code_map() {
    let arch = read("docs/ARCHITECTURE.md");
    let members = workspace_members();
    assert!(
        members.len() >= 8,
        "workspace members not found: {members:?}"
    );
    let missing: Vec<_> = members
        .iter()
        .filter(|m| !arch.contains(&format!("### `{m}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md has no code-map section for {missing:?}"
    );
}

#[test]
fn every_crate_opens_with_a_crate_doc() {
    for m in workspace_members() {
        let lib = root().join(&m).join("src/lib.rs");
        let main = root().join(&m).join("src/main.rs");
        let src = if lib.exists() { lib } else { main };
        let text = std::fs::read_to_string(&src).expect("crate root");
        assert!(
            text.trim_start().starts_with("//!"),
            "{} does not open with a crate doc",
            src.display()
        );
    }
}

/// Files under `dir` (recursively) with extension `.rs`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = entry.expect("dir entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn sans_io_cores_do_no_io() {
    // Sockets, threads, event loops and clock reads belong to the I/O shells only.
    let forbidden = [
        "mio::",
        "std::net",
        "os::unix::net",
        "std::thread",
        "Instant::now",
        "SystemTime::now",
        "std::fs",
        "crossbeam_channel",
        "libc::",
        "nix::",
    ];
    let cores = [
        root().join("pmix-server/src/engine"),
        root().join("pmix-server/src/frontend"),
        root().join("pmix-wire/src"),
        // The tree's state machine, its shape and its messages; its I/O shell is net.rs (and
        // auth.rs reads the nonces' randomness; sim.rs reads the clock once, to seed virtual
        // time).
        root().join("pmix-tree/src/core.rs"),
        root().join("pmix-tree/src/topology.rs"),
        root().join("pmix-tree/src/msg.rs"),
        // The client's core: pending requests, wire personalities, dispatch; and the store it
        // owns (with its fence index). Its driver is pmix-client/src/conn/.
        root().join("pmix-client/src/core"),
        root().join("pmix-client/src/store.rs"),
        root().join("pmix-client/src/fence_data.rs"),
    ];
    // The client's core is also free of locks: its driver holds it under one.
    let lock_free = root().join("pmix-client/src/core");
    let locks = [
        "parking_lot",
        "Mutex",
        "RwLock",
        "Condvar",
        "std::sync::atomic",
    ];
    // The one front-end part that is I/O by design: it writes the shared-memory segments
    // libpmix clients read (the ds21 store).
    let exempt = root().join("pmix-server/src/frontend/openpmix/ds21");
    let mut checked = 0;
    let mut exempted = 0;
    let mut client_core = 0;
    for dir in cores {
        let files = if dir.is_file() {
            vec![dir]
        } else {
            rust_files(&dir)
        };
        for file in files {
            if file.starts_with(&exempt) {
                exempted += 1;
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("source file");
            // Tests may use a clock to seed virtual time.
            let code = text.split("#[cfg(test)]").next().unwrap_or(&text);
            // A test harness: a sibling `tests.rs`, or the `mod.rs` of a `tests/` folder (its
            // concern files are checked like any other).
            let is_test_file = file.file_name().is_some_and(|n| n == "tests.rs")
                || (file.file_name().is_some_and(|n| n == "mod.rs")
                    && file
                        .parent()
                        .and_then(|d| d.file_name())
                        .is_some_and(|d| d == "tests"));
            if is_test_file {
                continue;
            }
            checked += 1;
            for f in forbidden {
                assert!(
                    !code.contains(f),
                    "{} uses `{f}`, but it must stay sans-IO",
                    file.display()
                );
            }
            if file.starts_with(&lock_free) {
                client_core += 1;
                for f in locks {
                    assert!(
                        !code.contains(f),
                        "{} uses `{f}`, but the client's core takes no lock",
                        file.display()
                    );
                }
            }
        }
    }
    assert!(
        checked >= 5,
        "found only {checked} core files: did the layout change?"
    );
    assert!(
        client_core >= 3,
        "found only {client_core} files of the client's core: did it move?"
    );
    assert!(
        exempted > 0,
        "no file under {}: the exemption names a folder that moved",
        exempt.display()
    );
}

#[test]
fn unsafe_code_lives_only_where_the_architecture_says() {
    // `docs/ARCHITECTURE.md` ("Invariants") names these places and argues each; any other
    // `unsafe` must be argued there first. pmix-capi's C boundary is its conversion module
    // (and its tests) and the exported functions' folder.
    let allowed = [
        root().join("pmix-server/src/frontend/openpmix/ds21/shm.rs"),
        root().join("pmix-server/src/shell.rs"),
        root().join("pmix-client/src/job_file.rs"),
        root().join("pmix-capi/src/convert.rs"),
        root().join("pmix-capi/src/convert/structured.rs"),
        root().join("pmix-capi/src/convert_tests.rs"),
    ];
    let capi_exports = root().join("pmix-capi/src/exports");
    let mut seen = Vec::new();
    for krate in workspace_members() {
        let src = root().join(&krate).join("src");
        if !src.is_dir() {
            continue;
        }
        for file in rust_files(&src) {
            let text = std::fs::read_to_string(&file).expect("source file");
            let uses = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .any(|l| {
                    l.contains("unsafe {") || l.contains("unsafe impl") || l.contains("unsafe fn")
                });
            if uses {
                assert!(
                    allowed.contains(&file) || file.starts_with(&capi_exports),
                    "{} has unsafe code; only {:?} may",
                    file.display(),
                    allowed
                );
                seen.push(file);
            }
        }
    }
    for a in &allowed {
        assert!(
            seen.contains(a),
            "{} no longer has unsafe code: take it off the list and out of ARCHITECTURE.md",
            a.display()
        );
    }
}
// ---------------------------------------------------------------------------------------------
// Import circles.
//
// Each crate's module graph: one node per module file (inline modules count as part of their
// file), one arrow per reference from a file to another module of the same crate, through
// `use crate::…`, `crate::…` paths in code, `super::…`, `self::…` and bare paths into a declared
// child module (`cli::parse()` in main.rs). A reference to an item a module re-exports
// (`pub use x::Item`) points at the module that defines it, as a reader would follow it.
// Comments and string literals are not read. `src/bin/` holds separate crates and is left out.

/// A module path inside one crate: `[]` is the crate root.
type ModPath = Vec<String>;

/// Removes comments and the contents of string and char literals, keeping the line structure.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
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
                    if b[i] == b'\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if c == b'r'
            && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
            && (i == 0 || !is_ident(b[i - 1]))
        {
            // Raw string: r"…", r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == b'"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&b'#')) {
                    j += 1 + hashes;
                    break;
                }
                if b[j] == b'\n' {
                    out.push('\n');
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                } else if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if b.get(i + 2) == Some(&b'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                let ch = text[i + 1..].chars().next();
                match ch {
                    Some(ch)
                        if !ch.is_ascii() && text[i + 1 + ch.len_utf8()..].starts_with('\'') =>
                    {
                        i += 2 + ch.len_utf8();
                        out.push_str("' '");
                    }
                    _ => {
                        out.push('\'');
                        i += 1;
                    }
                }
            }
        } else {
            let ch = text[i..].chars().next().expect("char");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Splits `mod name { … }` blocks out of `code`: returns the code without them and the blocks
/// (name, body), recursively flattened with their module path relative to this one.
fn split_inline_modules(code: &str) -> (String, Vec<(Vec<String>, String)>) {
    let b = code.as_bytes();
    let mut rest = String::new();
    let mut blocks = Vec::new();
    let mut i = 0;
    let mut copied = 0;
    while let Some(off) = code[i..].find("mod ") {
        let at = i + off;
        i = at + 4;
        if at > 0 && is_ident(b[at - 1]) {
            continue;
        }
        let after = &code[i..];
        let name: String = after
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        let name_end = i + (after.len() - after.trim_start().len()) + name.len();
        let tail = &code[name_end..];
        if !tail.trim_start().starts_with('{') {
            continue;
        }
        let open = name_end + (tail.len() - tail.trim_start().len());
        let mut depth = 0;
        let mut close = open;
        for (k, &c) in b.iter().enumerate().skip(open) {
            if c == b'{' {
                depth += 1;
            } else if c == b'}' {
                depth -= 1;
                if depth == 0 {
                    close = k;
                    break;
                }
            }
        }
        rest.push_str(&code[copied..at]);
        let (inner, nested) = split_inline_modules(&code[open + 1..close]);
        blocks.push((vec![name.clone()], inner));
        for (mut p, body) in nested {
            p.insert(0, name.clone());
            blocks.push((p, body));
        }
        copied = close + 1;
        i = close + 1;
    }
    rest.push_str(&code[copied..]);
    (rest, blocks)
}

/// Expands a use tree (`crate::a::{b, c::{D, E}}`) into its paths.
fn expand_use(tree: &str) -> Vec<String> {
    // `X as Y` keeps its alias behind an `@`, so that white space can go.
    let tree: String = tree
        .split_whitespace()
        .map(|t| if t == "as" { "@" } else { t })
        .collect();
    let Some(open) = tree.find('{') else {
        return vec![tree];
    };
    let prefix = &tree[..open];
    let close = tree.rfind('}').unwrap_or(tree.len());
    let inner = &tree[open + 1..close];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (k, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(|p| expand_use(&format!("{prefix}{p}")))
        .collect()
}

/// The paths one module's code names, as written: each `use` tree expanded, and every
/// `crate::`, `super::`, `self::` or `<child>::` path in the code.
fn paths_in(code: &str, children: &[String]) -> (Vec<String>, Vec<(String, String)>) {
    let mut paths = Vec::new();
    // (name, path) of `pub use`/`pub(crate) use` re-exports, for resolving through them.
    let mut reexports = Vec::new();
    let mut text = String::new();
    let mut rest = code;
    // `use` statements first (their trees have braces), the rest as code.
    while let Some(at) = find_word(rest, "use") {
        text.push_str(&rest[..at]);
        let Some(end) = rest[at..].find(';') else {
            rest = &rest[at + 3..];
            continue;
        };
        let stmt = &rest[at + 3..at + end];
        let before = rest[..at].trim_end();
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        for p in expand_use(stmt) {
            let p = p.trim_start_matches("::").to_string();
            let (p, alias) = match p.split_once('@') {
                Some((p, a)) => (p.to_string(), Some(a.to_string())),
                None => (p, None),
            };
            if public {
                let name = alias.unwrap_or_else(|| p.rsplit("::").next().unwrap_or("").to_string());
                reexports.push((name, p.clone()));
            }
            paths.push(p);
        }
        rest = &rest[at + end + 1..];
    }
    text.push_str(rest);
    let b = text.as_bytes();
    let mut heads: Vec<&str> = vec!["crate", "super", "self"];
    heads.extend(children.iter().map(String::as_str));
    for head in heads {
        let pat = format!("{head}::");
        let mut from = 0;
        while let Some(off) = text[from..].find(&pat) {
            let at = from + off;
            from = at + pat.len();
            if at > 0 && (is_ident(b[at - 1]) || b[at - 1] == b':' || b[at - 1] == b'$') {
                continue;
            }
            let end = text[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(text.len(), |e| at + e);
            paths.push(text[at..end].trim_end_matches(':').to_string());
        }
    }
    (paths, reexports)
}

/// Where `word` next stands as a whole word.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut from = 0;
    while let Some(off) = text[from..].find(word) {
        let at = from + off;
        let end = at + word.len();
        if (at == 0 || !is_ident(b[at - 1])) && end < b.len() && !is_ident(b[end]) {
            return Some(at);
        }
        from = end;
    }
    None
}

/// One crate's modules: module path → (the file it lives in, its code outside inline modules).
struct Crate {
    /// Every module (files and inline ones) and the file whose node it belongs to.
    modules: std::collections::BTreeMap<ModPath, ModPath>,
    /// Per module: its code (inline modules split out).
    code: Vec<(ModPath, String)>,
}

fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).expect("file under src");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("file name");
    let stem = last.trim_end_matches(".rs");
    if !(stem == "mod" || (parts.is_empty() && (stem == "lib" || stem == "main"))) {
        parts.push(stem.to_string());
    }
    parts
}

fn load_crate(src: &Path) -> Crate {
    let files: Vec<PathBuf> = rust_files(src)
        .into_iter()
        .filter(|f| !f.starts_with(src.join("bin")))
        .collect();
    let mut file_module: std::collections::BTreeMap<PathBuf, ModPath> = files
        .iter()
        .map(|f| (f.clone(), module_of(src, f)))
        .collect();
    // `#[path = "x.rs"] mod name;` puts a file where its name does not say.
    for f in &files {
        let text = std::fs::read_to_string(f).expect("source file");
        for (k, _) in text.match_indices("#[path = \"") {
            let target = text[k + 10..].split('"').next().unwrap_or("");
            let decl = text[k..].lines().find(|l| l.contains("mod ")).unwrap_or("");
            let name = decl
                .split("mod ")
                .nth(1)
                .unwrap_or("")
                .trim_end_matches(';')
                .trim()
                .to_string();
            let dir = f.parent().expect("dir");
            let mut m = file_module[f].clone();
            m.push(name);
            file_module.insert(dir.join(target), m);
        }
    }
    let mut modules = std::collections::BTreeMap::new();
    let mut code = Vec::new();
    for (f, m) in &file_module {
        let text = std::fs::read_to_string(f).expect("source file");
        let (outer, inline) = split_inline_modules(&code_only(&text));
        modules.insert(m.clone(), m.clone());
        code.push((m.clone(), outer));
        for (rel, body) in inline {
            let mut p = m.clone();
            p.extend(rel);
            modules.insert(p.clone(), m.clone());
            code.push((p, body));
        }
    }
    Crate { modules, code }
}

/// The import graph of the crate under `src`: file module → the file modules it refers to.
fn import_graph(
    src: &Path,
) -> std::collections::BTreeMap<ModPath, std::collections::BTreeSet<ModPath>> {
    use std::collections::{BTreeMap, BTreeSet};
    let krate = load_crate(src);
    let children = |m: &ModPath| -> Vec<String> {
        krate
            .modules
            .keys()
            .filter(|c| c.len() == m.len() + 1 && c.starts_with(m))
            .map(|c| c[m.len()].clone())
            .collect()
    };
    // Absolute form of a path written in module `m`: its segments from the crate root.
    let absolute = |m: &ModPath, path: &str| -> Option<Vec<String>> {
        let mut segs = path.split("::").filter(|s| !s.is_empty()).peekable();
        let mut base = match *segs.peek()? {
            "crate" => {
                segs.next();
                Vec::new()
            }
            "super" | "self" => {
                let mut base = m.clone();
                while let Some(&s) = segs.peek() {
                    match s {
                        "super" => {
                            base.pop()?;
                        }
                        "self" => {}
                        _ => break,
                    }
                    segs.next();
                }
                base
            }
            c if children(m).iter().any(|k| k == c) => m.clone(),
            _ => return None,
        };
        base.extend(
            segs.filter(|s| *s != "self" && *s != "*")
                .map(str::to_string),
        );
        Some(base)
    };
    // Re-exports per module: name → absolute path of what it names.
    let mut reexports: BTreeMap<ModPath, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut written: Vec<(ModPath, String)> = Vec::new();
    for (m, code) in &krate.code {
        let (paths, re) = paths_in(code, &children(m));
        for (name, p) in re {
            if let Some(abs) = absolute(m, &p) {
                reexports.entry(m.clone()).or_default().insert(name, abs);
            }
        }
        written.extend(paths.into_iter().map(|p| (m.clone(), p)));
    }
    // The module an absolute path lands in: its longest module prefix, followed through
    // re-exports of the item after it.
    let target = |abs: &[String]| -> ModPath {
        let mut abs = abs.to_vec();
        for _ in 0..8 {
            let n = (0..=abs.len())
                .rev()
                .find(|&n| krate.modules.contains_key(&abs[..n]))
                .unwrap_or(0);
            let m = abs[..n].to_vec();
            match abs.get(n).and_then(|item| reexports.get(&m)?.get(item)) {
                Some(via) if via.as_slice() != abs.as_slice() => {
                    let mut next = via.clone();
                    next.extend(abs[n + 1..].iter().cloned());
                    abs = next;
                }
                _ => return m,
            }
        }
        abs
    };
    let mut graph: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for file in krate.modules.values() {
        graph.entry(file.clone()).or_default();
    }
    for (m, p) in written {
        let Some(abs) = absolute(&m, &p) else {
            continue;
        };
        let from = krate.modules[&m].clone();
        let to = krate
            .modules
            .get(&target(&abs))
            .cloned()
            .unwrap_or_default();
        // A module reaching down into its own folder (declaring, dispatching to, re-exporting
        // its children) is the folder's wiring, not an import: only arrows up and sideways
        // count.
        if !to.starts_with(&from) {
            graph.entry(from).or_default().insert(to);
        }
    }
    graph
}

/// The strongly connected components of more than one module (Tarjan).
fn circles(
    graph: &std::collections::BTreeMap<ModPath, std::collections::BTreeSet<ModPath>>,
) -> Vec<Vec<ModPath>> {
    struct Walk<'g> {
        graph: &'g std::collections::BTreeMap<ModPath, std::collections::BTreeSet<ModPath>>,
        index: std::collections::BTreeMap<&'g ModPath, (usize, usize)>,
        stack: Vec<&'g ModPath>,
        next: usize,
        out: Vec<Vec<ModPath>>,
    }
    fn visit<'g>(w: &mut Walk<'g>, v: &'g ModPath) {
        w.index.insert(v, (w.next, w.next));
        w.next += 1;
        w.stack.push(v);
        for u in &w.graph[v] {
            if !w.index.contains_key(u) {
                visit(w, u);
                let low = w.index[u].1.min(w.index[v].1);
                w.index.get_mut(v).expect("visited").1 = low;
            } else if w.stack.contains(&u) {
                let low = w.index[u].0.min(w.index[v].1);
                w.index.get_mut(v).expect("visited").1 = low;
            }
        }
        if w.index[v].0 == w.index[v].1 {
            let mut scc = Vec::new();
            while let Some(u) = w.stack.pop() {
                scc.push(u.clone());
                if u == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                w.out.push(scc);
            }
        }
    }
    let mut w = Walk {
        graph,
        index: Default::default(),
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v) {
            visit(&mut w, v);
        }
    }
    w.out
}

fn show(m: &ModPath) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut found = Vec::new();
    let mut crates = 0;
    for krate in workspace_members() {
        let src = root().join(&krate).join("src");
        if !src.is_dir() {
            continue;
        }
        crates += 1;
        let graph = import_graph(&src);
        for scc in circles(&graph) {
            let names: Vec<String> = scc.iter().map(show).collect();
            let arrows: Vec<String> = scc
                .iter()
                .flat_map(|a| {
                    graph[a]
                        .iter()
                        .filter(|b| scc.contains(b))
                        .map(move |b| format!("{} -> {}", show(a), show(b)))
                })
                .collect();
            found.push(format!(
                "{krate}: {{{}}} via {}",
                names.join(", "),
                arrows.join("; ")
            ));
        }
    }
    assert!(crates >= 8, "found only {crates} crates");
    assert!(
        found.is_empty(),
        "import circles (cut each: move the shared item down into a module of its own):\n{}",
        found.join("\n")
    );
}

#[test]
fn no_module_of_pmixrun_imports_from_main_rs() {
    // main.rs picks the mode and nothing else: a helper it held belongs to the module that
    // owns its concern (`setup.rs`, `modes/`, `node/`, ...), which main.rs imports.
    for krate in ["pmixrun", "pmixps"] {
        let graph = import_graph(&root().join(krate).join("src"));
        assert!(graph.len() > 2, "{krate}: no modules found");
        let upward: Vec<String> = graph
            .iter()
            .filter(|(_, to)| to.contains(&Vec::new()))
            .map(|(from, _)| show(from))
            .collect();
        assert!(
            upward.is_empty(),
            "{krate}: {upward:?} import from main.rs; move what they use into a module"
        );
    }
}
