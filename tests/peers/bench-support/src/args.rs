//! Command-line arguments: `--name value` pairs, and the peers to run.

/// The value after `name`, if `name` is given.
pub fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The value after `name` parsed, `default` when `name` is not given.
///
/// # Panics
///
/// When the value does not parse (a driver stops at a bad argument).
pub fn parsed<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    match arg(args, name) {
        None => default,
        Some(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("{name}: `{s}` is not a valid value")),
    }
}

/// A peer program a driver runs: `--peer 'LABEL=PATH [ARGS]'`.
#[derive(Debug, Clone)]
pub struct Peer {
    /// The name its rows have.
    pub label: String,
    /// The program.
    pub path: String,
    /// Arguments given after the path.
    pub args: Vec<String>,
}

/// Every `--peer 'LABEL=PATH [ARGS]'`, in order.
///
/// # Panics
///
/// When a `--peer` has no `=` or no path, or none is given.
pub fn peers(args: &[String]) -> Vec<Peer> {
    let peers: Vec<Peer> = args
        .iter()
        .enumerate()
        .filter(|(_, a)| *a == "--peer")
        .filter_map(|(i, _)| args.get(i + 1))
        .map(|p| {
            let (label, command) = p.split_once('=').expect("--peer 'LABEL=PATH [ARGS]'");
            let mut words = command.split_whitespace().map(str::to_owned);
            Peer {
                label: label.to_owned(),
                path: words.next().expect("--peer LABEL=PATH: no path"),
                args: words.collect(),
            }
        })
        .collect();
    assert!(
        !peers.is_empty(),
        "give at least one --peer 'LABEL=PATH [ARGS]'"
    );
    peers
}
