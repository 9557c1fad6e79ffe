//! With the `mpi` feature: compiles the C shim (src/abi/shim.c) with the
//! host MPI's compiler wrapper ($MPICC, default `mpicc`), generates its
//! Rust declarations with bindgen, and sets `cfg(pcoll_large_count)` when
//! the host MPI declares the MPI-4 large-count functions (MPI_Bcast_c, ...),
//! and `cfg(pcoll_mpi = "mpich" | "openmpi")` from mpi.h's MPICH_VERSION /
//! OPEN_MPI macros (the Fortran entry points differ per implementation),
//! which also names the library: SONAME `libpcoll-<mpich|openmpi>.so.0`,
//! so that a program linked against one family's build asks for that
//! family's file (scripts/build.sh places the file under that name).
//! Without the feature there is nothing to build.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/abi/shim.c");
    println!("cargo:rerun-if-changed=src/abi/shim.h");
    println!("cargo:rerun-if-env-changed=MPICC");
    println!("cargo::rustc-check-cfg=cfg(pcoll_large_count)");
    println!("cargo::rustc-check-cfg=cfg(pcoll_mpi, values(\"mpich\", \"openmpi\"))");
    if env::var_os("CARGO_FEATURE_MPI").is_none() {
        return;
    }
    let mpicc = env::var("MPICC").unwrap_or_else(|_| "mpicc".into());
    let include_dirs = mpi_include_dirs(&mpicc);
    let macros = mpi_h_macros(&mpicc);
    if mpi_version(&macros) >= 4 {
        println!("cargo:rustc-cfg=pcoll_large_count");
    }
    if let Some(name) = mpi_implementation(&macros) {
        println!("cargo:rustc-cfg=pcoll_mpi=\"{name}\"");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libpcoll-{name}.so.0");
    }

    cc::Build::new().compiler(&mpicc).file("src/abi/shim.c").warnings(true).compile("pcoll_shim");

    let bindings = include_dirs
        .iter()
        .fold(bindgen::builder(), |b, dir| b.clang_arg(format!("-I{dir}")))
        .header("src/abi/shim.h")
        .allowlist_function("pcoll_.*")
        .allowlist_type("pcoll_.*")
        // The MPI types come from mpi-sys, so that handles are one Rust type.
        .blocklist_type("MPI_.*|ompi_.*|MPIR_.*")
        .raw_line("#[allow(unused_imports)] use mpi_sys::*;")
        .constified_enum_module("pcoll_.*")
        .generate()
        .expect("bindgen could not read src/abi/shim.h");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("shim.rs");
    bindings.write_to_file(out).expect("writing the shim bindings");
}

/// The `-I` directories of the MPI compiler wrapper (`mpicc -show`, which
/// both MPICH and Open MPI understand).
fn mpi_include_dirs(mpicc: &str) -> Vec<String> {
    let output = Command::new(mpicc).arg("-show").output().unwrap_or_else(|e| {
        panic!(
            "pcoll: cannot run the MPI compiler wrapper {mpicc:?} ({e}). Install an MPI: \
             `apt-get install mpich libmpich-dev` or `apt-get install openmpi-bin libopenmpi-dev`, \
             then build with scripts/build.sh mpich|openmpi (or set MPICC)."
        )
    });
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .filter_map(|arg| arg.strip_prefix("-I").map(str::to_string))
        .collect()
}

/// The macros the host's mpi.h defines (`#define NAME VALUE` lines).
fn mpi_h_macros(mpicc: &str) -> String {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(mpicc)
        .args(["-dM", "-E", "-x", "c", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("running the MPI compiler wrapper");
    child.stdin.take().unwrap().write_all(b"#include <mpi.h>\n").unwrap();
    let output = child.wait_with_output().expect("preprocessing mpi.h");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// MPI_VERSION of the host's mpi.h (the large-count functions are MPI-4).
fn mpi_version(macros: &str) -> u32 {
    macros
        .lines()
        .find_map(|line| line.strip_prefix("#define MPI_VERSION ").and_then(|v| v.trim().parse().ok()))
        .expect("mpi.h defines MPI_VERSION")
}

/// Which MPI the header belongs to, from the macro each one defines.
fn mpi_implementation(macros: &str) -> Option<&'static str> {
    let defines = |name: &str| macros.lines().any(|line| line.split_whitespace().nth(1) == Some(name));
    if defines("OPEN_MPI") {
        Some("openmpi")
    } else if defines("MPICH_VERSION") {
        Some("mpich")
    } else {
        None
    }
}
