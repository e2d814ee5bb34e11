//! Writing what the installer and the chart render: one file, or a whole
//! directory replaced at once (never half-written).

use std::path::{Path, PathBuf};

use super::error::InstallerError;
use super::manifests::GENERATED;

/// Whether `out` may be replaced whole: absent, empty, or a chart this
/// command rendered.
pub(super) fn check_replaceable(out: &Path) -> Result<(), InstallerError> {
    if !out.exists() {
        return Ok(());
    }
    let empty = out.is_dir()
        && std::fs::read_dir(out)
            .map_err(|source| InstallerError::Io {
                path: out.to_owned(),
                source,
            })?
            .next()
            .is_none();
    let rendered = std::fs::read_to_string(out.join("Chart.yaml"))
        .is_ok_and(|text| text.starts_with(&format!("{GENERATED} chart`")));
    if empty || rendered {
        Ok(())
    } else {
        Err(InstallerError::NotAChart {
            path: out.to_owned(),
        })
    }
}

pub(super) fn write_file(path: &Path, text: &str) -> Result<(), InstallerError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| InstallerError::Io { path, source }
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(io(&parent))?;
    let tmp = tempfile::NamedTempFile::new_in(&parent).map_err(io(&parent))?;
    std::fs::write(tmp.path(), text).map_err(io(tmp.path()))?;
    tmp.persist(path).map_err(|e| InstallerError::Io {
        path: path.to_owned(),
        source: e.error,
    })?;
    Ok(())
}

/// Writes `files` (relative path, text) as the directory `out`, replacing
/// it whole: a manifest removed from `deploy/` leaves the chart too.
pub(super) fn write_tree(out: &Path, files: &[(String, String)]) -> Result<(), InstallerError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| InstallerError::Io { path, source }
    };
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(io(&parent))?;
    let tmp = tempfile::Builder::new()
        .prefix(".chart.")
        .tempdir_in(&parent)
        .map_err(io(&parent))?;
    for (relative, text) in files {
        let path = tmp.path().join(relative);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        std::fs::write(&path, text).map_err(io(&path))?;
    }
    if out.exists() {
        std::fs::remove_dir_all(out).map_err(io(out))?;
    }
    let kept = tmp.keep();
    {
        use std::os::unix::fs::PermissionsExt;
        // tempdir made it 0700; a chart is as readable as its sources.
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o755))
            .map_err(io(&kept))?;
    }
    std::fs::rename(&kept, out).map_err(io(out))?;
    Ok(())
}
