//! Reading one plain value out of a `Cargo.toml` without a TOML parser:
//! the scaffolder writes these files itself, so `key = value` lines under
//! a `[table]` header are all it needs to find (a package's version, the
//! release profile's `lto`).

/// The value of `key` in `[table]` of `text` (quotes removed), or `None`
/// when the table or the key is absent. Only a plain `key = value` line
/// counts: no dotted keys, no inline tables.
pub(crate) fn table_value(text: &str, table: &str, key: &str) -> Option<String> {
    let header = format!("[{table}]");
    text.lines()
        .map(str::trim)
        .skip_while(|line| *line != header)
        .skip(1)
        .take_while(|line| !line.starts_with('['))
        .find_map(|line| {
            let (name, value) = line.split_once('=')?;
            (name.trim() == key).then(|| {
                let value = value.split(" #").next().unwrap_or(value);
                value.trim().trim_matches('"').to_owned()
            })
        })
}

#[cfg(test)]
mod tests {
    use super::table_value;

    const CARGO: &str = "[package]\nname = \"demo\"\nversion = \"0.2.0\" # ours\n\n\
                         [profile.release]\nlto = \"thin\"\ncodegen-units = 1\n\n[dependencies]\nlto = 3\n";

    #[test]
    fn a_key_is_read_only_from_its_own_table() {
        assert_eq!(
            table_value(CARGO, "package", "version").as_deref(),
            Some("0.2.0")
        );
        assert_eq!(
            table_value(CARGO, "profile.release", "lto").as_deref(),
            Some("thin")
        );
        assert_eq!(
            table_value(CARGO, "profile.release", "codegen-units").as_deref(),
            Some("1")
        );
        assert_eq!(table_value(CARGO, "package", "lto"), None);
        assert_eq!(table_value(CARGO, "profile.dev", "lto"), None);
    }
}
