//! Counts written in DESIGN.md, README.md and the book are the output of
//! the command written beside them. A count is written as the command and
//! what it prints, in a fenced block:
//!
//! ````text
//! ```text
//! $ tests/api/count-public-api.sh
//! public functions and methods: 352
//! ...
//! ```
//! ````
//!
//! This test runs each such command (once per distinct command line) and
//! fails when a block's lines differ from its output. A count in prose
//! ("352 functions") must be dated with the commit it was counted at.
//!
//! `OPKIT_BLESS=1 cargo test -p cargo-opkit --test it -- written_counts`
//! rewrites the blocks with the commands' output instead of failing.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use crate::support::{target_dir, text, workspace};

/// The commands whose output a document may quote as counts.
const COUNTING_COMMANDS: [&str; 1] = ["tests/api/count-public-api.sh"];

/// A fenced block that quotes a counting command and its output.
#[derive(Debug)]
struct Quoted {
    /// The document, relative to the workspace.
    document: String,
    /// Line number (1-based) of the `$ command` line.
    line: usize,
    /// The command as written after `$ `.
    command: String,
    /// The output lines as written (trimmed).
    output: Vec<String>,
    /// Line indexes (0-based) of the output lines, and the block's indent.
    span: (usize, usize, String),
}

/// DESIGN.md, README.md and every page of the book (relative paths).
fn documents() -> Vec<String> {
    let mut out = vec!["DESIGN.md".to_owned(), "README.md".to_owned()];
    out.extend(
        crate::book::pages()
            .into_iter()
            .map(|p| format!("book/src/{p}")),
    );
    out
}

/// The program of a `$ ` line: its first word that is not `VAR=value`.
fn program(command: &str) -> Option<&str> {
    command
        .split_whitespace()
        .find(|word| !word.contains('=') || word.starts_with('-'))
}

/// The quoted counting commands of `markdown`, and the prose lines that
/// state a count without a command block or a commit.
fn scan(document: &str, markdown: &str) -> (Vec<Quoted>, Vec<String>) {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut quoted = Vec::new();
    let mut problems = Vec::new();
    let mut paragraph: Vec<(usize, &str)> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            check_prose(document, &paragraph, &mut problems);
            paragraph.clear();
            let indent = line[..line.len() - trimmed.len()].to_owned();
            let fence: String = trimmed.chars().take_while(|c| *c == '`').collect();
            let start = i + 1;
            let mut end = start;
            while end < lines.len() && !lines[end].trim_start().starts_with(fence.as_str()) {
                end += 1;
            }
            let body = &lines[start..end];
            if let Some(command) = body.first().and_then(|l| l.trim().strip_prefix("$ "))
                && program(command).is_some_and(|p| COUNTING_COMMANDS.contains(&p))
            {
                quoted.push(Quoted {
                    document: document.to_owned(),
                    line: start + 1,
                    command: command.trim().to_owned(),
                    output: body[1..]
                        .iter()
                        .map(|l| l.trim().to_owned())
                        .filter(|l| !l.is_empty())
                        .collect(),
                    span: (start + 1, end, indent),
                });
            }
            i = end + 1;
            continue;
        }
        if trimmed.is_empty() {
            check_prose(document, &paragraph, &mut problems);
            paragraph.clear();
        } else {
            paragraph.push((i + 1, line));
        }
        i += 1;
    }
    check_prose(document, &paragraph, &mut problems);
    (quoted, problems)
}

/// Whether `word` looks like a commit: 7 to 40 hex digits, with a digit
/// and a letter.
fn is_commit(word: &str) -> bool {
    let word = word.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    (7..=40).contains(&word.len())
        && word
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, 'a'..='f'))
        && word.chars().any(|c| c.is_ascii_digit())
        && word.chars().any(|c| c.is_ascii_alphabetic())
}

/// A paragraph that states an API count ("352 functions", "public traits:
/// 13") outside a command block must name the commit it was counted at.
fn check_prose(document: &str, paragraph: &[(usize, &str)], problems: &mut Vec<String>) {
    let Some(&(first, _)) = paragraph.first() else {
        return;
    };
    let text: String = paragraph
        .iter()
        .map(|(_, l)| *l)
        .collect::<Vec<_>>()
        .join(" ");
    // Two empty words at the end, so the last two words get a window too.
    let words: Vec<&str> = text.split_whitespace().chain(["", ""]).collect();
    let number = |w: &str| {
        let w = w.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        w.starts_with(|c: char| c.is_ascii_digit())
            && w.chars().all(|c| c.is_ascii_digit() || c == ',')
    };
    let counts = words.windows(3).any(|w| {
        let noun = |s: &str| {
            let s = s.trim_matches(|c: char| !c.is_ascii_alphabetic());
            matches!(s, "functions" | "methods" | "types" | "traits")
        };
        (number(w[0]) && (noun(w[1]) || (w[1] == "public" && noun(w[2]))))
            || (w[0].ends_with(':') && noun(w[0]) && number(w[1]))
    });
    if counts && !words.iter().any(|w| is_commit(w)) {
        problems.push(format!(
            "{document}:{first}: a public API count in prose names no commit; \
             quote the command and its output in a block, or date it (`at <commit>`)"
        ));
    }
}

/// Runs a counting command as written (`VAR=value` words become its
/// environment) in the workspace; its standard output's lines.
fn run(command: &str) -> Vec<String> {
    let mut words = command.split_whitespace();
    let mut env = Vec::new();
    let program = loop {
        let word = words.next().expect("a command has a program");
        match word.split_once('=') {
            Some((key, value)) if !word.starts_with('-') => env.push((key, value)),
            _ => break word,
        }
    };
    let output = Command::new("bash")
        .arg(program)
        .args(words)
        .envs(env)
        .env("CARGO_TARGET_DIR", target_dir())
        .current_dir(workspace())
        .output()
        .expect("run a counting command");
    assert!(
        output.status.success(),
        "`{command}` failed:\n{}",
        text(&output)
    );
    String::from_utf8(output.stdout)
        .expect("its output is UTF-8")
        .lines()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Rewrites the output lines of `quoted` in its document with `output`.
fn bless(quoted: &Quoted, output: &[String]) {
    let path: PathBuf = workspace().join(&quoted.document);
    let markdown = std::fs::read_to_string(&path).expect("read the document");
    let lines: Vec<&str> = markdown.lines().collect();
    let (start, end, indent) = &quoted.span;
    let mut out: Vec<String> = lines[..*start].iter().map(|l| (*l).to_owned()).collect();
    out.extend(output.iter().map(|l| format!("{indent}{l}")));
    out.extend(lines[*end..].iter().map(|l| (*l).to_owned()));
    let mut text = out.join("\n");
    text.push('\n');
    std::fs::write(&path, text).expect("write the document");
}

#[test]
fn written_counts_are_their_commands_output() {
    let mut quoted = Vec::new();
    let mut problems = Vec::new();
    for document in documents() {
        let markdown =
            std::fs::read_to_string(workspace().join(&document)).expect("read a document");
        let (found, prose) = scan(&document, &markdown);
        quoted.extend(found);
        problems.extend(prose);
    }
    for (place, prefix) in [("DESIGN.md", "DESIGN.md"), ("the book", "book/src/")] {
        assert!(
            quoted.iter().any(|q| q.document.starts_with(prefix)),
            "{place} quotes no counting command ({COUNTING_COMMANDS:?}) with its output"
        );
    }
    let mut outputs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let blessing = std::env::var_os("OPKIT_BLESS").is_some();
    // Bottom-up, so a blessed block does not move the ones above it.
    for q in quoted.iter().rev() {
        let output = outputs
            .entry(q.command.clone())
            .or_insert_with(|| run(&q.command));
        if q.output == *output {
            continue;
        }
        if blessing {
            bless(q, output);
        } else {
            problems.push(format!(
                "{}:{}: `{}` prints\n{}\nbut the document says\n{}\n\
                 (OPKIT_BLESS=1 cargo test -p cargo-opkit --test it -- written_counts rewrites it)",
                q.document,
                q.line,
                q.command,
                output.join("\n"),
                q.output.join("\n")
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn prose_counts_need_a_commit() {
    let (_, problems) = scan("x.md", "The API has 352 public functions.\n");
    assert_eq!(problems.len(), 1, "{problems:?}");
    let (_, problems) = scan("x.md", "k8s-openapi types, 1,024 bytes\n");
    assert!(problems.is_empty(), "{problems:?}");
    let (_, problems) = scan("x.md", "Its traits:\nnow 13 traits\n");
    assert_eq!(problems.len(), 1, "{problems:?}");
    let (_, problems) = scan("x.md", "It had 418 functions at b369706.\n");
    assert!(problems.is_empty(), "{problems:?}");
    let (quoted, problems) = scan(
        "x.md",
        "Counted:\n\n  ```text\n  $ tests/api/count-public-api.sh\n  public traits: 13\n  ```\n",
    );
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(quoted.len(), 1);
    assert_eq!(quoted[0].command, "tests/api/count-public-api.sh");
    assert_eq!(quoted[0].output, ["public traits: 13"]);
    assert_eq!(quoted[0].line, 4);
}
