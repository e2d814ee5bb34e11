//! The book (`book/`): its generated pages agree with their sources, every
//! internal link and anchor resolves, every page is in SUMMARY.md, every
//! page with Rust code is compiled as doc tests (opkit-tests'
//! `book` module), and mdBook builds it.
//!
//! `OPKIT_BLESS=1 cargo test -p cargo-opkit --test it -- book` rewrites the
//! generated pages instead of failing on a difference.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{text, workspace};

fn book_src() -> PathBuf {
    workspace().join("book/src")
}

/// Compares `page` (under book/src) with `expected`, or rewrites it with
/// OPKIT_BLESS=1.
fn generated_page(page: &str, expected: &str) {
    let path = book_src().join(page);
    if std::env::var_os("OPKIT_BLESS").is_some() {
        std::fs::write(&path, expected).expect("write the generated page");
        return;
    }
    let found = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        found == expected,
        "book/src/{page} is out of date with its source; regenerate it with\n  \
         OPKIT_BLESS=1 cargo test -p cargo-opkit --test it -- book\n--- expected\n{expected}"
    );
}

/// `cargo opkit ARGS --help`, as the user sees it.
fn help(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_cargo-opkit"))
        .arg("opkit")
        .args(args)
        .arg("--help")
        .env_remove("COLUMNS")
        .output()
        .expect("run cargo-opkit --help");
    assert!(output.status.success(), "--help failed:\n{}", text(&output));
    String::from_utf8(output.stdout).expect("help is UTF-8")
}

/// The subcommands a help text lists under `Commands:` (not `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| line.trim() != "Commands:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

fn cli_page(path: &mut Vec<String>, page: &mut String) {
    let args: Vec<&str> = path.iter().map(String::as_str).collect();
    let help = help(&args);
    let title = std::iter::once("cargo opkit")
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    page.push_str(&format!("\n## `{title}`\n\n```text\n{}```\n", help));
    for sub in subcommands(&help) {
        path.push(sub);
        cli_page(path, page);
        path.pop();
    }
}

#[test]
fn book_cli_reference_is_the_clis_own_help() {
    let mut page = String::from(
        "# `cargo opkit` commands\n\n\
         <!-- Generated from `cargo opkit ... --help` by templates/tests/it/book.rs; \
         do not edit: OPKIT_BLESS=1 cargo test -p cargo-opkit --test it -- book -->\n\n\
         Every command and flag, exactly as `cargo opkit <command> --help` prints it.\n",
    );
    cli_page(&mut Vec::new(), &mut page);
    generated_page("reference/cli.md", &page);
}

/// The `#[controller(...)]` reference: opkit::derive's module docs, with
/// rustdoc's intra-doc links made plain text.
#[test]
fn book_controller_reference_is_the_derive_docs() {
    let source = std::fs::read_to_string(workspace().join("sdk/src/derive.rs"))
        .expect("read sdk/src/derive.rs");
    let mut page = String::from(
        "# `#[controller(...)]` options\n\n\
         <!-- Generated from the module docs of sdk/src/derive.rs by templates/tests/it/book.rs; \
         do not edit: OPKIT_BLESS=1 cargo test -p cargo-opkit --test it -- book -->\n\n",
    );
    let docs = source
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(doc_line);
    page.push_str(&docs_markdown(docs));
    generated_page("reference/controller.md", &page);
}

/// One `//!` line's text.
fn doc_line(line: &str) -> &str {
    let line = line.strip_prefix("//!").unwrap_or(line);
    line.strip_prefix(' ').unwrap_or(line)
}

/// Module docs as book Markdown: code blocks marked Rust, headings one
/// level down, rustdoc's intra-doc links plain text.
fn docs_markdown<'a>(lines: impl Iterator<Item = &'a str>) -> String {
    let mut page = String::new();
    let mut in_code = false;
    for line in lines {
        if let Some(info) = line.strip_prefix("```") {
            if in_code {
                page.push_str("```\n");
            } else {
                let info = if info.is_empty() {
                    "rust".to_owned()
                } else {
                    format!("rust,{info}")
                };
                page.push_str(&format!("```{info}\n"));
            }
            in_code = !in_code;
            continue;
        }
        if in_code {
            page.push_str(line);
        } else if let Some(heading) = line.strip_prefix("# ") {
            page.push_str(&format!("## {heading}"));
        } else {
            page.push_str(&plain_intra_doc_links(line));
        }
        page.push('\n');
    }
    page
}

/// The cargo features reference: the "Cargo features" section of opkit's
/// crate docs (sdk/src/lib.rs), which docs.rs shows on the crate's page.
#[test]
fn book_features_reference_is_the_crate_docs() {
    let source =
        std::fs::read_to_string(workspace().join("sdk/src/lib.rs")).expect("read sdk/src/lib.rs");
    let mut page = String::from(
        "# Cargo features\n\n\
         <!-- Generated from the crate docs of sdk/src/lib.rs (# Cargo features) by \
         templates/tests/it/book.rs; do not edit: OPKIT_BLESS=1 cargo test -p cargo-opkit \
         --test it -- book -->\n",
    );
    let docs = source
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(doc_line)
        .skip_while(|l| *l != "# Cargo features")
        .skip(1);
    page.push_str(&docs_markdown(docs));
    generated_page("reference/features.md", &page);
}

/// `[text](Path::to)` → `text`, `[`Item`]` → `` `Item` `` (rustdoc's links
/// mean nothing to mdBook).
fn plain_intra_doc_links(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let label = &after[..close];
        let tail = &after[close + 1..];
        if let Some(target) = tail.strip_prefix('(')
            && let Some(end) = target.find(')')
        {
            out.push_str(label);
            rest = &target[end + 1..];
        } else if label.starts_with('`') {
            out.push_str(label);
            rest = tail;
        } else {
            out.push('[');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Every page under book/src (relative paths, `/`-separated).
pub(crate) fn pages() -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("read book/src") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                let rel = path.strip_prefix(root).expect("under book/src");
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut out = Vec::new();
    walk(&book_src(), &book_src(), &mut out);
    out.sort();
    out
}

/// Markdown link targets `](target)` outside code.
fn links(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        // Drop inline code spans so `a[b](c)` in code is not a link.
        let mut plain = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let target = &rest[at + 2..];
            let end = target.find(')').unwrap_or(target.len());
            out.push(target[..end].trim().to_owned());
            rest = &target[end..];
        }
    }
    out
}

/// The anchors mdBook gives a page's headings (lower case, alphanumerics,
/// `-` and `_` kept, spaces to `-`, the rest dropped; repeats get `-1`, ..).
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let mut in_code = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#').trim();
        let mut id = String::new();
        for c in heading.chars() {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                id.extend(c.to_lowercase());
            } else if c.is_whitespace() {
                id.push('-');
            }
        }
        let n = seen.entry(id.clone()).or_insert(0);
        out.insert(if *n == 0 {
            id.clone()
        } else {
            format!("{id}-{n}")
        });
        *n += 1;
    }
    out
}

/// `{{#include path:anchor}}` (and `#rustdoc_include`) directives.
fn includes(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = markdown;
    while let Some(at) = rest.find("{{#") {
        let body = &rest[at + 3..];
        let end = body.find("}}").unwrap_or(body.len());
        let directive = &body[..end];
        // `\{{#include ..}}` is mdBook's escape: shown, not included.
        if rest[..at].ends_with('\\') {
            rest = &body[end..];
            continue;
        }
        if let Some(arg) = directive
            .strip_prefix("include ")
            .or_else(|| directive.strip_prefix("rustdoc_include "))
        {
            out.push(arg.trim().to_owned());
        }
        rest = &body[end..];
    }
    out
}

#[test]
fn book_links_anchors_summary_and_includes_resolve() {
    let src = book_src();
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).expect("read SUMMARY.md");
    let listed: BTreeSet<String> = links(&summary)
        .into_iter()
        .filter(|l| !l.is_empty())
        .map(|l| l.trim_start_matches("./").to_owned())
        .collect();
    let mut problems = Vec::new();
    let mut external = BTreeSet::new();
    for page in pages() {
        if page != "SUMMARY.md" && !listed.contains(&page) {
            problems.push(format!("{page}: not in SUMMARY.md"));
        }
    }
    for page in &listed {
        if !src.join(page).is_file() {
            problems.push(format!("SUMMARY.md: {page} does not exist"));
        }
    }
    let doctested = std::fs::read_to_string(workspace().join("tests/src/book.rs"))
        .expect("read tests/src/book.rs");
    for page in pages() {
        let markdown = std::fs::read_to_string(src.join(&page)).expect("read page");
        let dir = Path::new(&page).parent().unwrap_or(Path::new(""));
        for link in links(&markdown) {
            if link.contains("://") || link.starts_with("mailto:") {
                external.insert(link);
                continue;
            }
            let (file, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                normalize(&dir.join(file))
            };
            let Ok(body) = std::fs::read_to_string(src.join(&target)) else {
                problems.push(format!(
                    "{page}: link {link}: {target} does not exist in book/src"
                ));
                continue;
            };
            if !anchor.is_empty() && !anchors(&body).contains(anchor) {
                problems.push(format!(
                    "{page}: link {link}: no heading #{anchor} in {target}"
                ));
            }
        }
        for include in includes(&markdown) {
            let mut parts = include.splitn(2, ':');
            let file = parts.next().unwrap_or_default();
            let anchor = parts.next().unwrap_or_default();
            let Ok(body) = std::fs::read_to_string(src.join(dir).join(file)) else {
                problems.push(format!("{page}: include {include}: no such file"));
                continue;
            };
            let is_name =
                !anchor.is_empty() && !anchor.chars().next().is_some_and(|c| c.is_ascii_digit());
            if is_name
                && !(body.contains(&format!("ANCHOR: {anchor}"))
                    && body.contains(&format!("ANCHOR_END: {anchor}")))
            {
                problems.push(format!("{page}: include {include}: no ANCHOR {anchor}"));
            }
        }
        let mut in_code = false;
        for (number, line) in markdown.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                if !in_code && line.trim() == "```" {
                    problems.push(format!(
                        "{page}:{}: a code block without a language (rustdoc would compile it as Rust): \
                         write ```text, ```sh, ```rust, ...",
                        number + 1
                    ));
                }
                in_code = !in_code;
            }
        }
        let compiles = markdown
            .lines()
            .any(|l| l.starts_with("```rust") && !l.contains("ignore"));
        if compiles && !doctested.contains(&format!("book/src/{page}\"")) {
            problems.push(format!(
                "{page}: has Rust code but is not doc-tested: add it to tests/src/book.rs"
            ));
        }
    }
    println!("external links (listed, not fetched):");
    for link in &external {
        println!("  {link}");
    }
    assert!(
        problems.is_empty(),
        "the book has problems:\n{}",
        problems.join("\n")
    );
}

/// `a/../b/./c.md` → `b/c.md`.
fn normalize(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    parts.join("/")
}

/// mdBook builds the book without a warning, and headless Chromium shows
/// it: the landing page, a tutorial page and a search, each with its heading,
/// no console error, and a screenshot in target/book-screens/
/// (book/check-browser.sh, which installs Debian's chromium if missing).
#[test]
fn book_builds_and_renders_in_chromium() {
    let output = Command::new(workspace().join("book/check-browser.sh"))
        .output()
        .expect("run book/check-browser.sh");
    assert!(
        output.status.success(),
        "book/check-browser.sh failed:\n{}",
        text(&output)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("WARN") && !stderr.contains("ERROR"),
        "mdbook warned:\n{stderr}"
    );
    let html = workspace().join("book/book/index.html");
    assert!(html.is_file(), "no {}", html.display());
}

/// Every metric opkit exports: the `pub const NAME: &str = "metric"` items
/// of its metric name modules, with their doc comments.
#[test]
fn book_metrics_reference_is_the_metric_names() {
    let mut page = String::from(
        "# Metrics\n\n\
         <!-- Generated from sdk/src/metrics/names.rs and sdk/src/workqueue/metrics.rs by \
         templates/tests/it/book.rs; do not edit: OPKIT_BLESS=1 cargo test -p cargo-opkit --test it -- book -->\n\n\
         The manager serves these on `/metrics` (Prometheus text format). The names and labels \
         are controller-runtime's, so its dashboards and alerts work unchanged; \
         `opkit_*` metrics are opkit's own.\n\n\
         | metric | what it measures |\n|---|---|\n",
    );
    for file in ["sdk/src/metrics/names.rs", "sdk/src/workqueue/metrics.rs"] {
        let source = std::fs::read_to_string(workspace().join(file)).expect("read metric names");
        let mut doc = Vec::new();
        let mut lines = source.lines().map(str::trim);
        while let Some(line) = lines.next() {
            if let Some(text) = line.strip_prefix("///") {
                doc.push(text.trim().to_owned());
                continue;
            }
            let mut item = line.to_owned();
            if item.starts_with("pub const ") && item.ends_with(": &str =") {
                item.push_str(lines.next().unwrap_or_default());
            }
            if item.starts_with("pub const ")
                && item.contains(": &str =")
                && let Some(name) = item.split('"').nth(1)
            {
                let what = plain_intra_doc_links(&doc.join(" "));
                // "`name{labels}`: what" → ("name{labels}", "what")
                let (metric, what) = match what.strip_prefix('`').and_then(|w| w.split_once("`:")) {
                    Some((metric, rest)) if metric.starts_with(name) => {
                        (metric.to_owned(), rest.trim().to_owned())
                    }
                    _ => (name.to_owned(), what.clone()),
                };
                page.push_str(&format!("| `{metric}` | {} |\n", what.replace('|', "\\|")));
            }
            doc.clear();
        }
    }
    generated_page("reference/metrics.md", &page);
}

/// Where the docs.rs-like build keeps its artifacts: a directory of its own
/// under the target directory. `RUSTC_BOOTSTRAP` is part of what some build
/// scripts (proc-macro2's, anyhow's, thiserror's) read and rerun on; built in
/// the shared target directory, it would rerun them there and make the next
/// `cargo test` recompile every crate above them (about 65, serde and tokio
/// among them) on every `make test`.
fn docs_target_dir() -> std::path::PathBuf {
    crate::support::target_dir().join("docsrs")
}

/// The API docs as docs.rs builds them: `cargo doc --no-deps --workspace
/// --all-features` with `--cfg docsrs` on a nightly-enabled compiler (docs.rs
/// runs nightly; `RUSTC_BOOTSTRAP=1` lets the stable one accept
/// `feature(doc_cfg)`), warnings denied (broken or private intra-doc links,
/// bad code blocks); a feature-gated item's page names its feature; and
/// every published crate denies missing docs and carries docs.rs metadata.
#[test]
fn api_docs_build_without_warnings() {
    for krate in ["sdk", "macros", "envtest", "templates"] {
        let lib = std::fs::read_to_string(workspace().join(krate).join("src/lib.rs"))
            .expect("read lib.rs");
        assert!(
            lib.contains("#![deny(missing_docs)]"),
            "{krate}/src/lib.rs lacks #![deny(missing_docs)]"
        );
        let manifest = std::fs::read_to_string(workspace().join(krate).join("Cargo.toml"))
            .expect("read Cargo.toml");
        assert!(
            manifest.contains("[package.metadata.docs.rs]\nall-features = true\nrustdoc-args = [\"--cfg\", \"docsrs\"]"),
            "{krate}/Cargo.toml lacks the docs.rs metadata"
        );
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "doc",
            "--no-deps",
            "--workspace",
            "--all-features",
            "--keep-going",
        ])
        .current_dir(workspace())
        .env("RUSTDOCFLAGS", "-D warnings --cfg docsrs")
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_TARGET_DIR", docs_target_dir())
        .output()
        .expect("run cargo doc");
    assert!(
        output.status.success(),
        "cargo doc found problems:\n{}",
        text(&output)
    );
    let page = docs_target_dir().join("doc/opkit/webhook/struct.ManagedCertificate.html");
    let html = std::fs::read_to_string(&page).expect("read a feature-gated item's page");
    // "crate feature `dev-cert`", or "crate features `webhook` and
    // `dev-cert`" (the feature its module needs too).
    let note = html
        .split("Available on <strong>crate feature")
        .nth(1)
        .and_then(|rest| rest.split("</strong>").next())
        .unwrap_or_default();
    assert!(
        note.contains("<code>dev-cert</code>"),
        "{} does not name its feature (doc_cfg under --cfg docsrs)",
        page.display()
    );
}
