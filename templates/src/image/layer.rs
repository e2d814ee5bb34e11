//! The image's one layer: a gzipped tar of the manager binary at `/manager`
//! and the few files a non-root process expects (`/etc/passwd`,
//! `/etc/group`, its home directory, a writable `/tmp`). Every entry has a
//! fixed mtime, owner and mode, entries are sorted, and gzip runs with a
//! fixed header, so the same binary always gives the same bytes.

use std::io::Write;

use flate2::{Compression, GzBuilder};

use super::digest::Sha256Digest;
use super::libraries::ImageFile;

/// The user and group the manager runs as (distroless's `nonroot`).
pub const NONROOT_UID: u64 = 65532;
/// Where the binary sits in the image, and the image's entrypoint.
pub const MANAGER_PATH: &str = "/manager";

/// `/etc/passwd`: root, nobody and nonroot (as distroless's static image).
const PASSWD: &str = "root:x:0:0:root:/root:/sbin/nologin\n\
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n\
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n";
/// `/etc/group`, matching [`PASSWD`].
const GROUP: &str = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n";

/// One entry of the layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Path relative to `/`, directories ending in `/`.
    pub path: String,
    /// Permission bits (with the sticky bit for `/tmp`).
    pub mode: u32,
    /// Owner and group id.
    pub owner: u64,
    /// File contents; `None` for a directory.
    pub contents: Option<Vec<u8>>,
}

/// The layer, uncompressed and gzipped, with the digests the config and the
/// manifest name it by.
#[derive(Debug, Clone)]
pub(crate) struct Layer {
    /// The gzipped tar (the blob).
    pub gzipped: Vec<u8>,
    /// sha256 of the gzipped tar (the manifest's layer digest).
    pub digest: Sha256Digest,
    /// sha256 of the uncompressed tar (the config's `diff_ids`).
    pub diff_id: Sha256Digest,
}

/// The entries of the layer for `binary`, in the order they are written
/// (sorted by path).
pub(crate) fn entries(binary: Vec<u8>) -> Vec<Entry> {
    entries_with(binary, Vec::new())
}

/// As [`entries`], with `files` (a dynamic manager's loader and libraries)
/// at their absolute paths, and the directories holding them.
pub(crate) fn entries_with(binary: Vec<u8>, files: Vec<ImageFile>) -> Vec<Entry> {
    let dir = |path: &str, mode: u32, owner: u64| Entry {
        path: path.to_owned(),
        mode,
        owner,
        contents: None,
    };
    let file = |path: &str, mode: u32, contents: Vec<u8>| Entry {
        path: path.to_owned(),
        mode,
        owner: 0,
        contents: Some(contents),
    };
    let mut entries = vec![
        dir("etc/", 0o755, 0),
        file("etc/group", 0o644, GROUP.as_bytes().to_vec()),
        file("etc/passwd", 0o644, PASSWD.as_bytes().to_vec()),
        dir("home/", 0o755, 0),
        dir("home/nonroot/", 0o700, NONROOT_UID),
        file(MANAGER_PATH.trim_start_matches('/'), 0o755, binary),
        dir("tmp/", 0o1777, 0),
    ];
    for extra in files {
        let path = extra.path.trim_start_matches('/').to_owned();
        let mut parent = path.as_str();
        while let Some((up, _)) = parent.rsplit_once('/') {
            let dir_path = format!("{up}/");
            if !entries.iter().any(|e| e.path == dir_path) {
                entries.push(dir(&dir_path, 0o755, 0));
            }
            parent = up;
        }
        if !entries.iter().any(|e| e.path == path) {
            entries.push(file(&path, 0o755, extra.contents));
        }
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    entries
}

/// Writes `entries` as a tar (every mtime `mtime`), gzips it at `level` and
/// hashes both.
pub(crate) fn pack(entries: &[Entry], mtime: u64, level: Compression) -> std::io::Result<Layer> {
    let mut tar = tar::Builder::new(Vec::new());
    tar.mode(tar::HeaderMode::Deterministic);
    for entry in entries {
        let mut header = tar::Header::new_ustar();
        header.set_mtime(mtime);
        header.set_uid(entry.owner);
        header.set_gid(entry.owner);
        header.set_mode(entry.mode);
        let owner_name = if entry.owner == 0 { "root" } else { "nonroot" };
        header.set_username(owner_name)?;
        header.set_groupname(owner_name)?;
        match &entry.contents {
            Some(contents) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_size(contents.len() as u64);
                header.set_cksum();
                tar.append_data(&mut header, &entry.path, contents.as_slice())?;
            }
            None => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_size(0);
                header.set_cksum();
                tar.append_data(&mut header, &entry.path, std::io::empty())?;
            }
        }
    }
    let uncompressed = tar.into_inner()?;
    let diff_id = Sha256Digest::of(&uncompressed);
    // A fixed gzip header: no file name, mtime 0, OS "unknown".
    let mut gz = GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(Vec::new(), level);
    gz.write_all(&uncompressed)?;
    let gzipped = gz.finish()?;
    let digest = Sha256Digest::of(&gzipped);
    Ok(Layer {
        gzipped,
        digest,
        diff_id,
    })
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn unpack(layer: &Layer) -> Vec<(String, tar::Header, Vec<u8>)> {
        let mut tar = Vec::new();
        flate2::read::GzDecoder::new(layer.gzipped.as_slice())
            .read_to_end(&mut tar)
            .unwrap();
        assert_eq!(Sha256Digest::of(&tar), layer.diff_id);
        let mut archive = tar::Archive::new(tar.as_slice());
        archive
            .entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let path = e.path().unwrap().to_string_lossy().into_owned();
                let header = e.header().clone();
                let mut data = Vec::new();
                e.read_to_end(&mut data).unwrap();
                (path, header, data)
            })
            .collect()
    }

    #[test]
    fn same_binary_same_bytes() {
        let a = pack(&entries(b"binary".to_vec()), 0, Compression::default()).unwrap();
        let b = pack(&entries(b"binary".to_vec()), 0, Compression::default()).unwrap();
        assert_eq!(a.gzipped, b.gzipped);
        assert_eq!(a.digest, b.digest);
        let c = pack(&entries(b"binary2".to_vec()), 0, Compression::default()).unwrap();
        assert_ne!(a.digest, c.digest);
        let later = pack(
            &entries(b"binary".to_vec()),
            1_700_000_000,
            Compression::default(),
        )
        .unwrap();
        assert_ne!(a.digest, later.digest, "the mtime is part of the layer");
    }

    #[test]
    fn entries_have_fixed_metadata_and_sorted_paths() {
        let layer = pack(&entries(b"\x7fELF...".to_vec()), 42, Compression::default()).unwrap();
        let unpacked = unpack(&layer);
        let paths: Vec<&str> = unpacked.iter().map(|(p, _, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "etc/",
                "etc/group",
                "etc/passwd",
                "home/",
                "home/nonroot/",
                "manager",
                "tmp/"
            ]
        );
        let mut sorted = paths.clone();
        sorted.sort_unstable();
        assert_eq!(paths, sorted);
        for (path, header, _) in &unpacked {
            assert_eq!(header.mtime().unwrap(), 42, "{path}");
            let owner = if path == "home/nonroot/" { 65532 } else { 0 };
            assert_eq!(header.uid().unwrap(), owner, "{path}");
            assert_eq!(header.gid().unwrap(), owner, "{path}");
        }
        let (_, manager, data) = unpacked.iter().find(|(p, _, _)| p == "manager").unwrap();
        assert_eq!(manager.mode().unwrap(), 0o755);
        assert_eq!(manager.entry_type(), tar::EntryType::Regular);
        assert_eq!(data, b"\x7fELF...");
        let (_, tmp, _) = unpacked.iter().find(|(p, _, _)| p == "tmp/").unwrap();
        assert_eq!(tmp.mode().unwrap(), 0o1777);
        let (_, _, passwd) = unpacked.iter().find(|(p, _, _)| p == "etc/passwd").unwrap();
        assert!(
            String::from_utf8_lossy(passwd).contains("nonroot:x:65532:65532:"),
            "the user the config names exists"
        );
    }

    #[test]
    fn gzip_header_is_fixed() {
        let layer = pack(&entries(Vec::new()), 0, Compression::default()).unwrap();
        // magic, method, flags (no name), mtime 0, xfl, OS 255.
        assert_eq!(&layer.gzipped[..4], &[0x1f, 0x8b, 8, 0]);
        assert_eq!(&layer.gzipped[4..8], &[0, 0, 0, 0]);
        assert_eq!(layer.gzipped[9], 255);
    }

    #[test]
    fn libraries_sit_at_their_paths_with_their_directories() {
        let libc = ImageFile {
            path: "/lib/x86_64-linux-gnu/libc.so.6".to_owned(),
            contents: b"libc".to_vec(),
        };
        let loader = ImageFile {
            path: "/lib64/ld-linux-x86-64.so.2".to_owned(),
            contents: b"ld".to_vec(),
        };
        let entries = entries_with(b"m".to_vec(), vec![libc, loader]);
        let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        for expected in [
            "lib/",
            "lib/x86_64-linux-gnu/",
            "lib/x86_64-linux-gnu/libc.so.6",
            "lib64/",
            "lib64/ld-linux-x86-64.so.2",
            "manager",
        ] {
            assert!(paths.contains(&expected), "{expected} in {paths:?}");
        }
        let mut sorted = paths.clone();
        sorted.sort_unstable();
        assert_eq!(paths, sorted);
    }
}
