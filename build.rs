//! With the `mpi` feature: compiles the C shim (src/abi/shim.c) with the
//! host MPI's compiler wrapper ($MPICC, default `mpicc`) and generates its
//! Rust declarations with bindgen. Without it there is nothing to build.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/abi/shim.c");
    println!("cargo:rerun-if-changed=src/abi/shim.h");
    println!("cargo:rerun-if-env-changed=MPICC");
    if env::var_os("CARGO_FEATURE_MPI").is_none() {
        return;
    }
    let mpicc = env::var("MPICC").unwrap_or_else(|_| "mpicc".into());
    let include_dirs = mpi_include_dirs(&mpicc);

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
