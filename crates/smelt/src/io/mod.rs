//! Files: read one or say which, and write one without ever destroying what it lands on.
//!
//! A result written to a path lands as the shell's `>` would put it, but never half-written
//! and never over the run's own inputs:
//!
//! - a symbolic link is followed (to the end of a chain): its target is written, the link
//!   kept;
//! - a regular file (or a path that does not exist yet) is replaced atomically: a temporary
//!   file in the same folder, synced, then renamed over it, with the old file's permissions;
//! - a character device, FIFO or socket is written in place (a rename would replace the
//!   node itself with a regular file); a device that is full is an error saying so;
//! - a directory or block device is refused;
//! - a path that is the same file as one of the run's inputs, compared by identity (device
//!   and inode, after following links), is refused, however it is spelled.
//!
//! A folder of files (an export) is written by [`write_tree`]: all or nothing, never over an
//! input, and never over a file smelt did not write unless told to ([`tree`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

pub mod tree;

pub use tree::{MANIFEST, Overwrite, write_tree};

/// The most symbolic links followed from an output path (Linux's own limit, `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// The text of `path`, or [`Error::Io`] naming it.
pub fn read_to_string(path: impl AsRef<Path>) -> Result<String> {
    let path = path.as_ref();
    std::fs::read_to_string(path).map_err(|error| Error::Io {
        path: path.display().to_string(),
        error,
    })
}

/// What kind of node an output path names (after following links), which decides how it
/// is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    /// Nothing there yet, or a regular file: replaced atomically.
    Regular,
    /// A character device, FIFO or socket: written in place.
    Stream,
    /// A socket: connected to and written (it cannot be opened as a file).
    Socket,
    /// A directory or a block device: refused.
    Refused(&'static str),
}

impl Node {
    fn of(meta: Option<&std::fs::Metadata>) -> Node {
        let Some(meta) = meta else {
            return Node::Regular;
        };
        let t = meta.file_type();
        if t.is_file() {
            return Node::Regular;
        }
        if t.is_dir() {
            return Node::Refused("is a directory");
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if t.is_char_device() || t.is_fifo() {
                return Node::Stream;
            }
            if t.is_socket() {
                return Node::Socket;
            }
            if t.is_block_device() {
                return Node::Refused("is a block device: smelt never writes one");
            }
        }
        Node::Refused("is not a regular file, a character device, a FIFO or a socket")
    }
}

/// The error of a failed write to `path`, a full device said in words.
fn write_error(path: &Path, error: std::io::Error) -> Error {
    let error = match error.kind() {
        std::io::ErrorKind::StorageFull => std::io::Error::new(
            error.kind(),
            format!("no space left on the device: the output is incomplete ({error})"),
        ),
        _ => error,
    };
    Error::Io {
        path: path.display().to_string(),
        error,
    }
}

/// `path` with its symbolic links followed to the end of the chain: the file a write to
/// `path` lands on (which need not exist yet; a relative link is taken from its folder).
fn resolve_links(path: &Path) -> Result<PathBuf> {
    let mut at = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&at).map_err(|e| write_error(path, e))?;
                at = match at.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(at),
        }
    }
    Err(write_error(
        path,
        std::io::Error::other(format!("more than {MAX_LINKS} symbolic links to follow")),
    ))
}

/// Whether `a` and `b` are the same file: same device and inode (links followed), or, off
/// Unix, the same canonical path.
fn same_file(a: &std::fs::Metadata, a_path: &Path, b_path: &Path) -> bool {
    let Ok(b) = std::fs::metadata(b_path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let _ = a_path;
        a.dev() == b.dev() && a.ino() == b.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        std::fs::canonicalize(a_path).ok() == std::fs::canonicalize(b_path).ok()
    }
}

/// Writes `contents` to `path` atomically: into a temporary file in the same folder, synced,
/// then renamed over `path` (keeping an existing file's permissions). On any failure (a
/// full disk, say) the old file is untouched and the temporary file is removed. `path`
/// itself is replaced: callers that may be given a link or a device use [`write_output`].
pub fn write_atomic(path: impl AsRef<Path>, contents: &[u8]) -> Result<()> {
    let path = path.as_ref();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| write_error(path, std::io::Error::other("not a file name")))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".smelt-{}.tmp", std::process::id()));
    let tmp = dir.join(tmp_name);
    let permissions = std::fs::metadata(path).ok().map(|m| m.permissions());
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
        if let Some(p) = permissions {
            f.set_permissions(p)?;
        }
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(write_error(path, e));
    }
    Ok(())
}

/// Writes `contents` into the existing node at `path` (a device or FIFO) in place.
fn write_in_place(path: &Path, contents: &[u8]) -> Result<()> {
    let written = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
        f.write_all(contents)?;
        f.flush()
    })();
    written.map_err(|e| write_error(path, e))
}

/// Writes `contents` to the socket at `path`.
#[cfg(unix)]
fn write_socket(path: &Path, contents: &[u8]) -> Result<()> {
    let written = (|| {
        let mut s = std::os::unix::net::UnixStream::connect(path)?;
        s.write_all(contents)?;
        s.flush()
    })();
    written.map_err(|e| write_error(path, e))
}

#[cfg(not(unix))]
fn write_socket(path: &Path, _: &[u8]) -> Result<()> {
    Err(write_error(path, std::io::Error::other("is a socket")))
}

/// Refuses, before any work is done, an output that would replace one of `inputs`: a file
/// `path` that is the same file as an input (links followed), or, with `folder` (an export
/// folder, whose files go into it and into its subfolders, and which files' names it may
/// write: [`crate::export::may_write`]), an input of such a name directly in the folder or
/// in one of its subfolders. The writes check again ([`write_output`], [`write_tree`]);
/// this check lets a run that would be refused at its end be refused at its start.
pub fn refuse_inputs(
    path: &Path,
    inputs: &[PathBuf],
    folder: Option<&dyn Fn(&Path) -> bool>,
) -> Result<()> {
    let refuse = |why: String| Err(write_error(path, std::io::Error::other(why)));
    if let Ok(meta) = std::fs::metadata(path)
        && inputs.iter().any(|input| same_file(&meta, path, input))
    {
        return refuse("refusing to write: it is an input of this run".to_owned());
    }
    let Some(writes) = folder else {
        return Ok(());
    };
    let Ok(dir) = std::fs::canonicalize(path) else {
        return Ok(());
    };
    for input in inputs {
        let Ok(file) = std::fs::canonicalize(input) else {
            continue;
        };
        let parent = file.parent();
        if !writes(&file) {
            continue;
        }
        if parent == Some(dir.as_path()) || parent.and_then(Path::parent) == Some(dir.as_path()) {
            return Err(write_error(
                input,
                std::io::Error::other(format!(
                    "refusing to write: it is an input of this run, in the folder the export \
                     writes into ('{}'); export into another folder",
                    path.display()
                )),
            ));
        }
    }
    Ok(())
}

/// Writes a result to `path` as the module says: links followed, a regular file replaced
/// atomically, a device, FIFO or socket written in place; refused when `path` is the same
/// file as one of `inputs`, the files the result was computed from (a match written over
/// its own budget file would lose the budget).
pub fn write_output(path: impl AsRef<Path>, contents: &[u8], inputs: &[PathBuf]) -> Result<()> {
    let path = path.as_ref();
    // The kernel follows the links (including /proc's, such as /dev/stdout's, which name
    // no path), so the node is looked at, and a stream opened, through `path` itself.
    let meta = std::fs::metadata(path).ok();
    if let Some(meta) = &meta
        && inputs.iter().any(|input| same_file(meta, path, input))
    {
        return Err(write_error(
            path,
            std::io::Error::other("refusing to write: it is an input of this run"),
        ));
    }
    match Node::of(meta.as_ref()) {
        Node::Regular if meta.is_some() => {
            let target = std::fs::canonicalize(path).map_err(|e| write_error(path, e))?;
            write_atomic(&target, contents)
        }
        Node::Regular => write_atomic(resolve_links(path)?, contents),
        Node::Stream => write_in_place(path, contents),
        Node::Socket => write_socket(path, contents),
        Node::Refused(why) => Err(write_error(
            path,
            std::io::Error::other(format!("refusing to write: {why}")),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("smelt-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn atomic_write_replaces_and_reads_back() {
        let dir = temp_dir("io");
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
        let dir = temp_dir("out");
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

    /// A link is followed: its target is replaced and the link kept; a link (or a hard
    /// link, or a link to a link) to an input, or an input given through a link, is refused.
    #[cfg(unix)]
    #[test]
    fn links_are_followed_and_inputs_found_by_identity() {
        use std::os::unix::fs::symlink;
        let dir = temp_dir("links");
        let target = dir.join("target.toml");
        std::fs::write(&target, "old").unwrap();
        let link = dir.join("link.toml");
        symlink("target.toml", &link).unwrap();
        write_output(&link, b"new", &[]).unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(read_to_string(&target).unwrap(), "new");
        let dangling = dir.join("dangling.toml");
        symlink(dir.join("made.toml"), &dangling).unwrap();
        write_output(&dangling, b"made", &[]).unwrap();
        assert_eq!(read_to_string(dir.join("made.toml")).unwrap(), "made");
        assert!(
            std::fs::symlink_metadata(&dangling)
                .unwrap()
                .file_type()
                .is_symlink()
        );

        let input = dir.join("budget.toml");
        std::fs::write(&input, "kept").unwrap();
        let to_input = dir.join("to-input.toml");
        symlink(&input, &to_input).unwrap();
        let chain = dir.join("chain.toml");
        symlink(&to_input, &chain).unwrap();
        let hard = dir.join("hard.toml");
        std::fs::hard_link(&input, &hard).unwrap();
        for out in [&to_input, &chain, &hard] {
            let e = write_output(out, b"x", std::slice::from_ref(&input)).unwrap_err();
            assert!(e.to_string().contains("an input of this run"), "{e}");
        }
        let e = write_output(&input, b"x", std::slice::from_ref(&chain)).unwrap_err();
        assert!(e.to_string().contains("an input of this run"), "{e}");
        assert_eq!(read_to_string(&input).unwrap(), "kept");

        let looped = dir.join("loop.toml");
        symlink(&looped, &looped).unwrap();
        let e = write_output(&looped, b"x", &[]).unwrap_err();
        assert!(e.to_string().contains("symbolic links"), "{e}");
        let e = write_output(&dir, b"x", &[]).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A FIFO is written in place (a reader gets the bytes) and stays a FIFO.
    #[cfg(unix)]
    #[test]
    fn a_fifo_is_written_in_place() {
        use std::os::unix::fs::FileTypeExt;
        let dir = temp_dir("fifo");
        let fifo = dir.join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success(), "mkfifo");
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_output(&fifo, b"through the pipe", &[]).unwrap();
        assert_eq!(reader.join().unwrap(), b"through the pipe");
        let link = dir.join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_output(&link, b"through the link", &[]).unwrap();
        assert_eq!(reader.join().unwrap(), b"through the link");
        let t = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert!(t.is_fifo(), "the FIFO is still a FIFO");
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A full device is an error that says so.
    #[test]
    fn a_full_device_says_no_space() {
        let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
        let e = write_error(Path::new("out.toml"), full).to_string();
        assert!(
            e.starts_with("out.toml: no space left on the device"),
            "{e}"
        );
    }
}
