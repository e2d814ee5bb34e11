//! Filling `{{key}}` placeholders in template text and file names.

use std::collections::BTreeMap;

use crate::error::ScaffoldError;

/// The values placeholders are replaced with.
#[derive(Debug, Clone, Default)]
pub struct Values(BTreeMap<&'static str, String>);

impl Values {
    /// Sets `key`.
    pub fn set(&mut self, key: &'static str, value: impl Into<String>) -> &mut Self {
        self.0.insert(key, value.into());
        self
    }

    /// Replaces every `{{key}}` in `text`. A `{` right before `{{key}}` is
    /// kept as text (`{{{kind}}, ..}` renders `{Memcached, ..}`). An
    /// unknown key is an error naming the template, so a template typo
    /// never reaches a user's project.
    pub fn render(&self, template: &str, text: &str) -> Result<String, ScaffoldError> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            let mut start = start;
            // `{{{x}}`: the first brace is text.
            while rest[start + 2..].starts_with('{') {
                start += 1;
            }
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find("}}") else {
                return Err(ScaffoldError::Template {
                    template: template.to_owned(),
                    detail: "an unclosed `{{`".to_owned(),
                });
            };
            let key = &after[..end];
            let value = self.0.get(key).ok_or_else(|| ScaffoldError::Template {
                template: template.to_owned(),
                detail: format!("unknown placeholder {{{{{key}}}}}"),
            })?;
            out.push_str(value);
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// The output path of template file `path`: placeholders filled, the
    /// `.tmpl` suffix dropped, a leading `dot-` of any component turned
    /// into `.` (`dot-github/workflows/test.yml.tmpl` → `.github/workflows/test.yml`).
    pub fn output_path(&self, path: &str) -> Result<String, ScaffoldError> {
        let rendered = self.render(path, path)?;
        let rendered = rendered.strip_suffix(".tmpl").unwrap_or(&rendered);
        Ok(rendered.split('/').map(undot).collect::<Vec<_>>().join("/"))
    }
}

fn undot(file: &str) -> String {
    match file.strip_prefix("dot-") {
        Some(rest) => format!(".{rest}"),
        None => file.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_placeholders_and_keeps_literal_braces() {
        let mut v = Values::default();
        v.set("kind", "Memcached").set("kind_snake", "memcached");
        assert_eq!(
            v.render("t", "use a::{{kind_snake}}::{{{kind}}, {{kind}}Spec};")
                .unwrap(),
            "use a::memcached::{Memcached, MemcachedSpec};"
        );
        assert_eq!(v.render("t", "fn f() {}").unwrap(), "fn f() {}");
        let err = v.render("x.tmpl", "{{nope}}").unwrap_err().to_string();
        assert!(err.contains("x.tmpl") && err.contains("{{nope}}"), "{err}");
        assert!(v.render("t", "{{kind").is_err());
    }

    #[test]
    fn output_paths() {
        let mut v = Values::default();
        v.set("kind_snake", "guest_book");
        assert_eq!(
            v.output_path("src/api/{{kind_snake}}.rs.tmpl").unwrap(),
            "src/api/guest_book.rs"
        );
        assert_eq!(v.output_path("dot-gitignore.tmpl").unwrap(), ".gitignore");
        assert_eq!(
            v.output_path("dot-github/workflows/test.yml.tmpl").unwrap(),
            ".github/workflows/test.yml"
        );
    }
}
