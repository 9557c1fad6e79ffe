//! The MPI family a process runs under, against the one the library was
//! built for. MPICH's handles are integers and Open MPI's are pointers, so
//! a library built for one family passes the other nonsense in every
//! handle, and the first such call fails with a cryptic error from the
//! host. The family is told from the host's MPI_Get_library_version
//! string alone, which takes no handle, so this check can come first and
//! name the library to use instead.

use crate::select::rules::HostMpi;

/// A family of MPI libraries that share one ABI (one build of pcoll).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Mpich,
    OpenMpi,
}

/// How each maker's MPI_Get_library_version string begins, and its
/// family. MVAPICH and Intel MPI share MPICH's ABI (the MPICH ABI
/// compatibility initiative). A string that matches none (another
/// derivative) is no reason to stop.
const SIGNATURES: [(&str, Family, HostMpi); 4] = [
    ("MPICH", Family::Mpich, HostMpi::Mpich),
    ("MVAPICH", Family::Mpich, HostMpi::Mvapich),
    ("Intel(R) MPI", Family::Mpich, HostMpi::Intel),
    ("Open MPI", Family::OpenMpi, HostMpi::OpenMpi),
];

/// The signature `version` (MPI_Get_library_version) begins with.
fn signature(version: &str) -> Option<&'static (&'static str, Family, HostMpi)> {
    let version = version.trim_start();
    SIGNATURES.iter().find(|(start, _, _)| version.starts_with(start))
}

/// Who made the library that says `version`, if pcoll recognises it.
pub fn host_mpi(version: &str) -> Option<HostMpi> {
    signature(version).map(|&(_, _, maker)| maker)
}

impl Family {
    /// The family whose library says `version` (MPI_Get_library_version),
    /// if pcoll recognises it.
    fn of_version(version: &str) -> Option<Family> {
        signature(version).map(|&(_, family, _)| family)
    }

    fn name(self) -> &'static str {
        match self {
            Family::Mpich => "MPICH",
            Family::OpenMpi => "Open MPI",
        }
    }

    /// The file scripts/build.sh makes for this family (build.rs names its
    /// SONAME after the same word).
    fn library(self) -> String {
        let word = match self {
            Family::Mpich => "mpich",
            Family::OpenMpi => "openmpi",
        };
        format!("libpcoll-{word}.so")
    }
}

/// The message that stops a process whose MPI (`version`, the first line
/// of its MPI_Get_library_version) is of another family than `built_for`;
/// `None` if it is the same family or one pcoll does not recognise.
pub fn wrong_library(built_for: Family, version: &str) -> Option<String> {
    let runs = Family::of_version(version).filter(|&runs| runs != built_for)?;
    Some(format!(
        "pcoll: this library was built for {} ({}) but the program runs under {} ({version}): preload or link {} \
         instead\n",
        built_for.name(),
        built_for.library(),
        runs.name(),
        runs.library()
    ))
}

/// The major version of an Open MPI whose MPI_Get_library_version
/// begins with `version` ("Open MPI v4.1.4, package: ..." gives 4);
/// `None` for another MPI or a string pcoll cannot read.
pub fn open_mpi_major(version: &str) -> Option<u32> {
    let number = version.trim_start().strip_prefix("Open MPI v")?;
    number.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MPICH: &str = "MPICH Version: 4.0.2";
    const OPEN_MPI: &str = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022";

    #[test]
    fn the_same_family_passes() {
        assert_eq!(wrong_library(Family::Mpich, MPICH), None);
        assert_eq!(wrong_library(Family::OpenMpi, OPEN_MPI), None);
        assert_eq!(wrong_library(Family::Mpich, "MVAPICH2 Version      :\t2.3.7"), None);
        assert_eq!(wrong_library(Family::Mpich, "Intel(R) MPI Library 2021.5 for Linux* OS"), None);
    }

    #[test]
    fn the_other_family_names_the_library_to_use() {
        assert_eq!(
            wrong_library(Family::Mpich, OPEN_MPI).unwrap(),
            format!(
                "pcoll: this library was built for MPICH (libpcoll-mpich.so) but the program runs under Open MPI \
                 ({OPEN_MPI}): preload or link libpcoll-openmpi.so instead\n"
            )
        );
        let text = wrong_library(Family::OpenMpi, MPICH).unwrap();
        assert!(text.contains("built for Open MPI (libpcoll-openmpi.so)"), "{text}");
        assert!(text.contains("runs under MPICH (MPICH Version: 4.0.2): preload or link libpcoll-mpich.so"), "{text}");
    }

    #[test]
    fn an_unrecognised_mpi_is_no_reason_to_stop() {
        for family in [Family::Mpich, Family::OpenMpi] {
            assert_eq!(wrong_library(family, "Some MPI 1.0"), None);
            assert_eq!(wrong_library(family, ""), None);
        }
    }

    #[test]
    fn the_maker_is_read_from_the_version_string() {
        assert_eq!(host_mpi(MPICH), Some(HostMpi::Mpich));
        assert_eq!(host_mpi(OPEN_MPI), Some(HostMpi::OpenMpi));
        assert_eq!(host_mpi("MVAPICH2 Version      :\t2.3.7"), Some(HostMpi::Mvapich));
        assert_eq!(host_mpi(" Intel(R) MPI Library 2021.19.0 for Linux* OS"), Some(HostMpi::Intel));
        assert_eq!(host_mpi("Some MPI 1.0"), None);
    }

    #[test]
    fn the_open_mpi_major_version_is_read_from_the_version_string() {
        assert_eq!(open_mpi_major(OPEN_MPI), Some(4));
        assert_eq!(open_mpi_major("Open MPI v5.0.11, package: Open MPI pypi"), Some(5));
        assert_eq!(open_mpi_major("MPICH Version: 4.0.2"), None);
        assert_eq!(open_mpi_major("Open MPI vx"), None);
    }
}
