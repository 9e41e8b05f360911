//! Files: read one or say which, and write one without ever leaving it half-written.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The text of `path`, or [`Error::Io`] naming it.
pub fn read_to_string(path: impl AsRef<Path>) -> Result<String> {
    let path = path.as_ref();
    std::fs::read_to_string(path).map_err(|error| Error::Io {
        path: path.display().to_string(),
        error,
    })
}

/// Writes `contents` to `path` atomically: into a temporary file in the same folder, synced,
/// then renamed over `path`. On any failure (a full disk, say) the old file is untouched
/// and the temporary file is removed.
pub fn write_atomic(path: impl AsRef<Path>, contents: &[u8]) -> Result<()> {
    let path = path.as_ref();
    let io = |error| Error::Io {
        path: path.display().to_string(),
        error,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io(std::io::Error::other("not a file name")))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".smelt-{}.tmp", std::process::id()));
    let tmp = dir.join(tmp_name);
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    Ok(())
}

/// Writes a result to `path` as [`write_atomic`] does, refusing a `path` that is one of
/// `inputs`, the files the result was computed from (a match written over its own budget
/// file would lose the budget).
pub fn write_output(path: impl AsRef<Path>, contents: &[u8], inputs: &[PathBuf]) -> Result<()> {
    let path = path.as_ref();
    let canonical = |p: &Path| -> Option<PathBuf> {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        Some(std::fs::canonicalize(dir).ok()?.join(p.file_name()?))
    };
    let target = canonical(path);
    if target.is_some() && inputs.iter().any(|input| canonical(input) == target) {
        return Err(Error::Io {
            path: path.display().to_string(),
            error: std::io::Error::other("refusing to write: it is an input of this run"),
        });
    }
    write_atomic(path, contents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_reads_back() {
        let dir = std::env::temp_dir().join(format!("smelt-io-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("out.toml");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(read_to_string(&p).unwrap(), "two");
        let leftovers = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file left behind");
        let missing = dir.join("no/such/dir/out.toml");
        assert!(matches!(
            write_atomic(&missing, b"x"),
            Err(Error::Io { .. })
        ));
        assert!(matches!(read_to_string(&missing), Err(Error::Io { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A result is never written over one of its inputs, however the path is spelled.
    #[test]
    fn output_refuses_an_input() {
        let dir = std::env::temp_dir().join(format!("smelt-out-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let input = dir.join("budget.toml");
        std::fs::write(&input, "kept").unwrap();
        let spelled = dir.join("sub/../budget.toml");
        let e = write_output(&spelled, b"x", std::slice::from_ref(&input)).unwrap_err();
        assert!(e.to_string().contains("it is an input of this run"), "{e}");
        assert_eq!(read_to_string(&input).unwrap(), "kept");
        let out = dir.join("out.toml");
        write_output(&out, b"y", std::slice::from_ref(&input)).unwrap();
        assert_eq!(read_to_string(&out).unwrap(), "y");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
