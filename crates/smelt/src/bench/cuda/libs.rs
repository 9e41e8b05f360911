//! Where the CUDA backend looks for cuBLAS (and NVRTC, [`NVRTC`]) before the system's
//! loader does.
//!
//! The loader alone finds a library only on `LD_LIBRARY_PATH` and in its cache; PyTorch's
//! CUDA 13 wheels keep `libcublas.so.13` under `site-packages/nvidia/cu13/lib/` (older
//! ones under `nvidia/cublas/lib/`), and a toolkit lives under `CUDA_HOME`, `CUDA_PATH` or
//! `/usr/local/cuda*/lib64`. The folders below are searched in order ([`search_dirs`]);
//! the first holding `libcublas.so.13` ([`CUBLAS`]) is loaded by path (with its
//! `libcublasLt`), so that cudarc's load by name finds that library already loaded. None
//! found: the loader's own search. `SMELT_CUDA_LIB_DIR` (folders separated by `:`) comes
//! first, to point smelt at a library.
//!
//! 1. `$SMELT_CUDA_LIB_DIR`;
//! 2. `$CUDA_HOME/lib64`, `$CUDA_HOME/lib`, `$CUDA_PATH/lib64`, `$CUDA_PATH/lib`;
//! 3. `$CONDA_PREFIX/lib`;
//! 4. in each Python `site-packages` or `dist-packages` folder (of `$VIRTUAL_ENV`, of each
//!    `$PYTHONPATH` entry, of `$HOME/.local/lib/python3*`, `/usr/local/lib/python3*`,
//!    `/usr/lib/python3*`): `nvidia/cu13/lib`, `nvidia/cublas/lib`, `nvidia/cuda_nvrtc/lib`;
//! 5. `/usr/local/cuda/lib64`, then `/usr/local/cuda-*/lib64`, newest version first.

use std::path::{Path, PathBuf};

/// The cuBLAS library the backend is built for (cudarc's `cuda-13000`).
pub const CUBLAS: &str = "libcublas.so.13";
/// Its companion, loaded first.
pub const CUBLAS_LT: &str = "libcublasLt.so.13";
/// NVRTC, which compiles the attention tiles' softmax kernel at run time (PyTorch's CUDA 13
/// wheels carry it beside cuBLAS).
pub const NVRTC: &str = "libnvrtc.so.13";
/// The variable that names folders to search first.
pub const DIR_VAR: &str = "SMELT_CUDA_LIB_DIR";

/// The folders searched for [`CUBLAS`], in order, under `root` (`/` on a machine; a fake
/// layout in tests), reading variables through `var`. Only folders that exist are listed.
pub fn search_dirs(root: &Path, var: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let at = |p: &str| root.join(p.trim_start_matches('/'));
    let mut dirs: Vec<PathBuf> = Vec::new();
    let split = |v: Option<String>| -> Vec<String> {
        v.map(|s| {
            s.split(':')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
    };
    dirs.extend(split(var(DIR_VAR)).iter().map(|d| at(d)));
    for v in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = var(v) {
            dirs.extend(["lib64", "lib"].map(|l| at(&home).join(l)));
        }
    }
    if let Some(conda) = var("CONDA_PREFIX") {
        dirs.push(at(&conda).join("lib"));
    }
    for site in site_packages(root, var) {
        dirs.extend(
            [
                "nvidia/cu13/lib",
                "nvidia/cublas/lib",
                "nvidia/cuda_nvrtc/lib",
            ]
            .map(|l| site.join(l)),
        );
    }
    dirs.push(at("/usr/local/cuda/lib64"));
    let mut versions = children(&at("/usr/local"), "cuda-");
    versions.sort_by_key(|d| std::cmp::Reverse(version_key(d)));
    dirs.extend(versions.into_iter().map(|d| d.join("lib64")));
    let mut seen = std::collections::BTreeSet::new();
    dirs.retain(|d| d.is_dir() && seen.insert(d.clone()));
    dirs
}

/// The first of `dirs` holding the library `name`.
pub fn find(dirs: &[PathBuf], name: &str) -> Option<PathBuf> {
    dirs.iter().map(|d| d.join(name)).find(|p| p.is_file())
}

/// The first of `dirs` holding [`CUBLAS`]: `(libcublas, libcublasLt if beside it)`.
pub fn find_cublas(dirs: &[PathBuf]) -> Option<(PathBuf, Option<PathBuf>)> {
    dirs.iter().find_map(|d| {
        let cublas = d.join(CUBLAS);
        let lt = d.join(CUBLAS_LT);
        cublas
            .is_file()
            .then(|| (cublas, lt.is_file().then_some(lt)))
    })
}

/// Python's package folders under `root`: `lib/python3*/{site,dist}-packages` of each
/// prefix, and each `$PYTHONPATH` entry.
fn site_packages(root: &Path, var: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let at = |p: &str| root.join(p.trim_start_matches('/'));
    let mut prefixes: Vec<PathBuf> = Vec::new();
    if let Some(venv) = var("VIRTUAL_ENV") {
        prefixes.push(at(&venv).join("lib"));
    }
    if let Some(home) = var("HOME") {
        prefixes.push(at(&home).join(".local/lib"));
    }
    prefixes.extend(["/usr/local/lib", "/usr/lib"].map(at));
    let mut out: Vec<PathBuf> = var("PYTHONPATH")
        .map(|p| p.split(':').filter(|s| !s.is_empty()).map(at).collect())
        .unwrap_or_default();
    for prefix in prefixes {
        let mut pythons = children(&prefix, "python3");
        pythons.sort();
        for py in pythons {
            out.extend(["site-packages", "dist-packages"].map(|s| py.join(s)));
        }
    }
    out
}

/// The folders in `dir` whose name starts with `prefix`.
fn children(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(prefix))
        })
        .collect()
}

/// `cuda-12.4` → `[12, 4]`, for newest-first order.
fn version_key(dir: &Path) -> Vec<u64> {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.trim_start_matches("cuda-")
        .split('.')
        .map(|p| p.parse().unwrap_or(0))
        .collect()
}

/// What the error says when no cuBLAS loads: the folders tried and how to name one.
pub fn not_found(dirs: &[PathBuf]) -> String {
    let tried: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    format!(
        "{CUBLAS} was not found in {} nor by the system's loader (LD_LIBRARY_PATH, ld.so.cache); \
         set {DIR_VAR} to the folder that holds it (e.g. a PyTorch install's \
         site-packages/nvidia/cu13/lib)",
        match tried.is_empty() {
            true => "any of the usual folders".to_owned(),
            false => tried.join(", "),
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_list_follows_a_fake_layout() {
        let root = std::env::temp_dir().join(format!("smelt-libs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let mk = |p: &str| {
            let d = root.join(p);
            std::fs::create_dir_all(&d).unwrap();
            d
        };
        let torch = mk("venv/lib/python3.12/site-packages/nvidia/cu13/lib");
        let toolkit = mk("opt/cuda/lib64");
        let new = mk("usr/local/cuda-13.0/lib64");
        let old = mk("usr/local/cuda-12.4/lib64");
        let mine = mk("mine");
        mk("usr/local/cuda-13.0/lib"); // not a lib64: not searched
        let var = |name: &str| match name {
            "VIRTUAL_ENV" => Some("/venv".to_owned()),
            "CUDA_HOME" => Some("/opt/cuda".to_owned()),
            DIR_VAR => Some("/mine:/missing".to_owned()),
            _ => None,
        };
        let dirs = search_dirs(&root, &var);
        assert_eq!(
            dirs,
            vec![
                mine.clone(),
                toolkit.clone(),
                torch.clone(),
                new.clone(),
                old
            ]
        );
        // Nothing holds the library yet; then the wheel's copy is the first found.
        assert_eq!(find_cublas(&dirs), None);
        std::fs::write(torch.join(CUBLAS), b"").unwrap();
        std::fs::write(torch.join(CUBLAS_LT), b"").unwrap();
        std::fs::write(new.join(CUBLAS), b"").unwrap();
        let (cublas, lt) = find_cublas(&dirs).unwrap();
        assert_eq!(
            (cublas, lt),
            (torch.join(CUBLAS), Some(torch.join(CUBLAS_LT)))
        );
        let e = not_found(&dirs);
        assert!(
            e.contains(DIR_VAR) && e.contains(&mine.display().to_string()),
            "{e}"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
