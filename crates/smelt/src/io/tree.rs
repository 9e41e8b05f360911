//! Folders of files written all or nothing, never over an input, and never over a file
//! smelt did not write unless told to.
//!
//! An export is a folder of files with fixed names (`config.json` and the loop's code, a
//! `NAME/` per grid cell, a `NAME.toml` per model file), often into a folder that already
//! holds something: a model directory with the user's own `config.json` and weights, or an
//! earlier export. [`write_tree`] therefore:
//!
//! - refuses, before writing anything, a file that is one of the run's inputs (compared by
//!   identity, as [`super::write_output`] does: links followed, however the path is spelled),
//!   whatever [`Overwrite`] says;
//! - refuses, unless [`Overwrite::Any`] is given (`--overwrite`), an existing file smelt did
//!   not write: one that is not listed in its folder's [`MANIFEST`], or whose contents
//!   changed since smelt listed them (an edited `config.json` is the user's now);
//! - writes every file into a staging folder beside the target (`.NAME.smelt-stage-PID`,
//!   on the same file system), synced, and only then moves them into place: the whole
//!   folder by one rename when it is new, else file by file, each file it replaces moved
//!   aside first, so that a failure part way puts every replaced file back and removes the
//!   new ones. On success or failure the staging folder is removed. A later write that
//!   fails (a full disk, a read-only folder, a file where a folder must go) thus leaves the
//!   target as it was: never a `config.json` whose `auto_map` names code that is missing,
//!   never some cells of a grid without the others.
//!
//! Each folder written into gets a [`MANIFEST`] listing the files smelt wrote there, each
//! with an FNV-1a 64-bit digest of its contents, merged with the entries of files still
//! there from earlier exports.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use super::{same_file, write_error};
use crate::error::{Error, Result};

/// The file in each folder smelt exports into that lists the files it wrote there.
pub const MANIFEST: &str = ".smelt-export";

/// What an export may replace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overwrite {
    /// Only files smelt wrote and that are unchanged since (the default).
    #[default]
    Own,
    /// Any file but an input of the run (`--overwrite`).
    Any,
}

/// FNV-1a, 64 bits: a digest stable across releases and platforms (the manifest outlives
/// the binary that wrote it).
fn digest(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("fnv1a64:{h:016x}")
}

/// A folder's manifest: file name to digest.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Manifest {
    /// What the file is, for whoever opens it.
    about: String,
    files: BTreeMap<String, String>,
}

impl Manifest {
    const ABOUT: &str = "the files of this folder that smelt wrote, each with an FNV-1a 64 \
                         digest of its contents: smelt replaces only these, unchanged, unless \
                         told to overwrite";

    /// The manifest of `dir`, empty when it has none or it cannot be read.
    fn of(dir: &Path) -> Self {
        std::fs::read_to_string(dir.join(MANIFEST))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    fn text(&self) -> Result<Vec<u8>> {
        let json = serde_json::to_string_pretty(self).map_err(|e| Error::serialize(MANIFEST, e))?;
        Ok(format!("{json}\n").into_bytes())
    }
}

/// Whether `path` is a file smelt wrote and nobody changed since: listed in its folder's
/// manifest with the digest of what it holds now.
fn ours(path: &Path) -> bool {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return false;
    };
    let Some(listed) = Manifest::of(dir)
        .files
        .remove(&name.to_string_lossy().into_owned())
    else {
        return false;
    };
    std::fs::read(path).is_ok_and(|bytes| digest(&bytes) == listed)
}

fn io_error(path: &Path, why: impl Into<String>) -> Error {
    write_error(path, std::io::Error::other(why.into()))
}

/// Checks a target before anything is written: not a folder, not an input, and (for
/// [`Overwrite::Own`]) not a file smelt did not write.
fn check_target(path: &Path, inputs: &[PathBuf], overwrite: Overwrite) -> Result<()> {
    let Ok(link) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if let Ok(meta) = std::fs::metadata(path)
        && inputs.iter().any(|input| same_file(&meta, path, input))
    {
        return Err(io_error(
            path,
            "refusing to write: it is an input of this run",
        ));
    }
    if link.is_dir() {
        return Err(io_error(path, "refusing to write: is a directory"));
    }
    if overwrite == Overwrite::Own && !ours(path) {
        return Err(io_error(
            path,
            "refusing to replace a file smelt did not write (or one changed since it did): \
             move it away, write elsewhere, or give --overwrite (overwrite=True from Python)",
        ));
    }
    Ok(())
}

/// The staging folder beside `root`.
fn stage_of(root: &Path) -> PathBuf {
    let name = root
        .file_name()
        .map_or_else(|| "export".to_owned(), |n| n.to_string_lossy().into_owned());
    let parent = match root.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    parent.join(format!(".{name}.smelt-stage-{}", std::process::id()))
}

/// What the commit did, to undo on failure.
enum Done {
    /// A folder created.
    Made(PathBuf),
    /// A new file placed, where nothing was.
    Placed(PathBuf),
    /// A file replaced: the new one at `.0`, the old one moved to `.1`.
    Replaced(PathBuf, PathBuf),
}

/// Writes `files` (`(path relative to root, contents)`, no `..` in a path) under `root`,
/// all or nothing (module docs); returns the paths written, the manifests left out.
pub fn write_tree(
    root: &Path,
    files: &[(PathBuf, Vec<u8>)],
    inputs: &[PathBuf],
    overwrite: Overwrite,
) -> Result<Vec<PathBuf>> {
    for (rel, _) in files {
        let plain = rel.components().all(|c| matches!(c, Component::Normal(_)));
        if !plain || rel.file_name().is_some_and(|n| n == MANIFEST) {
            return Err(io_error(
                &root.join(rel),
                "not a plain file name under the folder",
            ));
        }
    }
    if root.exists() && !root.is_dir() {
        return Err(io_error(
            root,
            "is not a directory: an export of this kind is a folder",
        ));
    }
    let given = root;
    // Written through a link to a folder, the staging folder goes beside the folder itself
    // (on its file system, so that the files can be renamed into place).
    let root = match root.exists() {
        true => std::fs::canonicalize(root).map_err(|e| write_error(root, e))?,
        false => root.to_path_buf(),
    };
    for (rel, _) in files {
        let mut dir = root.clone();
        for part in rel.parent().into_iter().flat_map(Path::components) {
            dir.push(part);
            if dir.exists() && !dir.is_dir() {
                return Err(io_error(
                    &dir,
                    "is not a directory: the export puts a folder here",
                ));
            }
        }
        check_target(&root.join(rel), inputs, overwrite)?;
    }
    let mut all: Vec<(PathBuf, Vec<u8>)> = files.to_vec();
    all.extend(manifests(&root, files)?);
    if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| write_error(parent, e))?;
    }
    let stage = stage_of(&root);
    let _ = std::fs::remove_dir_all(&stage);
    let rename = &mut |from: &Path, to: &Path| std::fs::rename(from, to);
    let staged = write_stage(&stage, &all).and_then(|()| commit(&root, &stage, &all, rename));
    let _ = std::fs::remove_dir_all(&stage);
    staged?;
    Ok(files.iter().map(|(rel, _)| given.join(rel)).collect())
}

/// The manifest of each folder `files` go into: its earlier entries for files still there
/// (and not rewritten now), and the new files' digests.
fn manifests(root: &Path, files: &[(PathBuf, Vec<u8>)]) -> Result<Vec<(PathBuf, Vec<u8>)>> {
    let mut by_dir: BTreeMap<PathBuf, Vec<(String, &[u8])>> = BTreeMap::new();
    for (rel, bytes) in files {
        let dir = rel.parent().map(Path::to_path_buf).unwrap_or_default();
        let name = rel.file_name().map(|n| n.to_string_lossy().into_owned());
        by_dir
            .entry(dir)
            .or_default()
            .push((name.unwrap_or_default(), bytes));
    }
    by_dir
        .into_iter()
        .map(|(dir, new)| {
            let mut m = Manifest::of(&root.join(&dir));
            m.files
                .retain(|name, _| root.join(&dir).join(name).is_file());
            for (name, bytes) in new {
                m.files.insert(name, digest(bytes));
            }
            m.about = Manifest::ABOUT.to_owned();
            Ok((dir.join(MANIFEST), m.text()?))
        })
        .collect()
}

/// Writes every file into `stage` (made fresh), each synced.
fn write_stage(stage: &Path, files: &[(PathBuf, Vec<u8>)]) -> Result<()> {
    for (rel, bytes) in files {
        let path = stage.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| write_error(dir, e))?;
        }
        let written = (|| {
            use std::io::Write;
            let mut f = std::fs::File::create(&path)?;
            f.write_all(bytes)?;
            f.sync_all()
        })();
        written.map_err(|e| write_error(&path, e))?;
    }
    Ok(())
}

/// How a file is moved (`std::fs::rename`; a test's fails when it says).
type Rename<'a> = dyn FnMut(&Path, &Path) -> std::io::Result<()> + 'a;

/// Moves the staged files into `root` with `rename`: one rename when `root` is new, else
/// file by file, undoing every step on a failure.
fn commit(
    root: &Path,
    stage: &Path,
    files: &[(PathBuf, Vec<u8>)],
    rename: &mut Rename<'_>,
) -> Result<()> {
    if !root.exists() {
        return rename(stage, root).map_err(|e| write_error(root, e));
    }
    let old = stage.join(".replaced");
    let mut done: Vec<Done> = Vec::new();
    let result =
        (files.iter()).try_for_each(|(rel, _)| place(root, stage, &old, rel, &mut done, rename));
    if result.is_err() {
        for step in done.into_iter().rev() {
            let _ = match step {
                Done::Made(dir) => std::fs::remove_dir(dir),
                Done::Placed(path) => std::fs::remove_file(path),
                Done::Replaced(path, aside) => std::fs::rename(aside, path),
            };
        }
    }
    result
}

/// Moves one staged file into place (its folders made, the file it replaces moved aside
/// with its permissions kept), recording each step in `done`.
fn place(
    root: &Path,
    stage: &Path,
    old: &Path,
    rel: &Path,
    done: &mut Vec<Done>,
    rename: &mut Rename<'_>,
) -> Result<()> {
    let target = root.join(rel);
    let mut dir = root.to_path_buf();
    for part in rel.parent().into_iter().flat_map(Path::components) {
        dir.push(part);
        if !dir.exists() {
            std::fs::create_dir(&dir).map_err(|e| write_error(&dir, e))?;
            done.push(Done::Made(dir.clone()));
        }
    }
    let staged = stage.join(rel);
    match std::fs::symlink_metadata(&target) {
        Err(_) => {
            rename(&staged, &target).map_err(|e| write_error(&target, e))?;
            done.push(Done::Placed(target));
        }
        Ok(meta) => {
            let aside = old.join(rel);
            if let Some(d) = aside.parent() {
                std::fs::create_dir_all(d).map_err(|e| write_error(d, e))?;
            }
            if !meta.file_type().is_symlink() {
                let _ = std::fs::set_permissions(&staged, meta.permissions());
            }
            rename(&target, &aside).map_err(|e| write_error(&target, e))?;
            if let Err(e) = rename(&staged, &target) {
                let _ = std::fs::rename(&aside, &target);
                return Err(write_error(&target, e));
            }
            done.push(Done::Replaced(target, aside));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("smelt-tree-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn files(pairs: &[(&str, &str)]) -> Vec<(PathBuf, Vec<u8>)> {
        pairs
            .iter()
            .map(|(p, t)| (PathBuf::from(p), t.as_bytes().to_vec()))
            .collect()
    }

    fn read(p: &Path) -> String {
        std::fs::read_to_string(p).unwrap()
    }

    /// A new folder is made whole; writing it again replaces smelt's own files; a file the
    /// user put there, or edited, is refused without `Overwrite::Any`, named, and nothing is
    /// written; an input is refused even with it.
    #[test]
    fn own_files_are_replaced_and_others_refused() {
        let dir = temp_dir("own");
        let out = dir.join("model");
        let one = files(&[("config.json", "{1}"), ("code.py", "a")]);
        write_tree(&out, &one, &[], Overwrite::Own).unwrap();
        assert_eq!(read(&out.join("config.json")), "{1}");
        assert!(read(&out.join(MANIFEST)).contains("config.json"));
        let two = files(&[("config.json", "{2}"), ("code.py", "b")]);
        write_tree(&out, &two, &[], Overwrite::Own).unwrap();
        assert_eq!(read(&out.join("code.py")), "b");

        std::fs::write(out.join("config.json"), "{edited}").unwrap();
        let e = write_tree(&out, &one, &[], Overwrite::Own)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("config.json: refusing to replace a file smelt did not write"),
            "{e}"
        );
        assert_eq!(read(&out.join("code.py")), "b", "nothing written");
        write_tree(&out, &one, &[], Overwrite::Any).unwrap();
        assert_eq!(read(&out.join("config.json")), "{1}");

        let user = dir.join("user");
        std::fs::create_dir_all(&user).unwrap();
        std::fs::write(user.join("config.json"), "mine").unwrap();
        std::fs::write(user.join("model.safetensors"), "weights").unwrap();
        let e = write_tree(&user, &one, &[], Overwrite::Own)
            .unwrap_err()
            .to_string();
        assert!(e.contains("user/config.json: refusing to replace"), "{e}");
        assert_eq!(read(&user.join("config.json")), "mine");
        let input = user.join("config.json");
        for o in [Overwrite::Own, Overwrite::Any] {
            let e = write_tree(&user, &one, std::slice::from_ref(&input), o).unwrap_err();
            assert!(e.to_string().contains("it is an input of this run"), "{e}");
        }
        assert_eq!(read(&input), "mine");
        assert_eq!(read(&user.join("model.safetensors")), "weights");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A failure part way through the commit (here the fifth move fails: a full disk, a
    /// folder gone read-only) leaves the folder as it was: the files replaced before it are
    /// back, the new ones and the folders made for them gone.
    #[test]
    fn a_failure_part_way_leaves_the_folder_as_it_was() {
        let dir = temp_dir("undo");
        let out = dir.join("grid");
        let first = files(&[("a/config.json", "a1"), ("b/config.json", "b1")]);
        write_tree(&out, &first, &[], Overwrite::Own).unwrap();
        let second = files(&[
            ("a/config.json", "a2"),
            ("c/x", "c2"),
            ("b/config.json", "b2"),
        ]);
        let mut all = second.clone();
        all.extend(manifests(&out, &second).unwrap());
        let stage = stage_of(&out);
        write_stage(&stage, &all).unwrap();
        let mut moves = 0;
        let failing = &mut |from: &Path, to: &Path| {
            moves += 1;
            match moves {
                5 => Err(std::io::Error::other("the disk is full")),
                _ => std::fs::rename(from, to),
            }
        };
        let e = commit(&out, &stage, &all, failing).unwrap_err().to_string();
        assert!(e.contains("the disk is full"), "{e}");
        assert_eq!(read(&out.join("a/config.json")), "a1");
        assert_eq!(read(&out.join("b/config.json")), "b1");
        assert!(
            !out.join("c").exists(),
            "the folder made for the new file is gone"
        );
        assert!(read(&out.join("a").join(MANIFEST)).contains("config.json"));
        std::fs::remove_dir_all(&stage).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file where the export needs a folder, or a path leaving the folder, is refused
    /// before anything is written.
    #[test]
    fn impossible_targets_are_refused_up_front() {
        let dir = temp_dir("up-front");
        let out = dir.join("grid");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("b"), "a file").unwrap();
        let fs = files(&[("a/config.json", "a"), ("b/config.json", "b")]);
        let e = write_tree(&out, &fs, &[], Overwrite::Any)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a directory"), "{e}");
        assert!(!out.join("a").exists());
        let e = write_tree(&out, &files(&[("../x", "x")]), &[], Overwrite::Any).unwrap_err();
        assert!(e.to_string().contains("not a plain file name"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_digest_is_fnv1a_64() {
        assert_eq!(digest(b""), "fnv1a64:cbf29ce484222325");
        assert_eq!(digest(b"a"), "fnv1a64:af63dc4c8601ec8c");
    }
}
