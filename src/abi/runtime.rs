//! Process-wide state on the MPI side: the check that the process runs
//! under the MPI family the library was built for, the runtime
//! (configuration read once, at MPI_Init or the first collective),
//! logging, and the MPI_Finalize hook (an attribute on MPI_COMM_SELF,
//! whose delete callback MPI runs first thing in MPI_Finalize): the
//! statistics summary and PCOLL_VERIFY's totals, combined over the job,
//! and the release of everything pcoll holds.

use super::comm;
use super::handles;
use super::host::Mpi;
use super::shim::*;
use crate::driver::family::{host_mpi, wrong_library, Family};
use crate::driver::host::check;
use crate::driver::runtime::{agree_on_settings, report_at_finalize, say, Runtime};
use crate::driver::Host;
use crate::select::config::{Config, ConfigError};
use once_cell::sync::OnceCell;
use std::ffi::CStr;
use std::io::Write;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

static RUNTIME: OnceCell<Result<Runtime, ConfigError>> = OnceCell::new();

/// Set when the finalize hook was installed in MPI_Init(_thread): then every
/// rank has it and the summary can be combined across the job.
static HOOKED_AT_INIT: AtomicBool = AtomicBool::new(false);
static HOOK: OnceCell<()> = OnceCell::new();

pub(super) fn world_rank() -> c_int {
    let mut rank = 0;
    // SAFETY: MPI is initialised whenever pcoll runs; `rank` is a valid local.
    unsafe { pmpi!(PMPI_Comm_rank)(handles().comm_world, &mut rank) };
    rank
}

/// The MPI family of the headers the library was built with (build.rs).
#[cfg(pcoll_mpi = "mpich")]
const BUILT_FOR: Option<Family> = Some(Family::Mpich);
#[cfg(pcoll_mpi = "openmpi")]
const BUILT_FOR: Option<Family> = Some(Family::OpenMpi);
#[cfg(not(any(pcoll_mpi = "mpich", pcoll_mpi = "openmpi")))]
const BUILT_FOR: Option<Family> = None;

/// Stops the process, naming the library to use, if its MPI (`version`,
/// from [`host_version`]) is of the other family than the library's. It
/// runs before any call that takes a handle: pcoll's own handles would be
/// the other family's, and so are the types it passes the program's
/// through, which is why PCOLL_ENABLE=0 does not help either. It exits
/// (status 1, which makes the launcher end the job) rather than call
/// MPI_Abort, which takes a communicator.
fn stop_if_wrong_family(version: &str) {
    if let Some(text) = BUILT_FOR.and_then(|built_for| wrong_library(built_for, version)) {
        say(&text);
        std::process::exit(1);
    }
}

/// Binds the host MPI, the library the process loaded (src/abi/shim.h),
/// once, and returns that library's path; every entry point runs it before
/// its first call to the host. A process without MPI, or whose MPI lacks a
/// function pcoll calls, stops here saying so; under the other MPI family,
/// with the message that names the library to use.
pub(super) fn bind() -> &'static CStr {
    let mut library = std::ptr::null();
    // SAFETY: pcoll_bind is thread-safe and returns static strings.
    let error = unsafe { super::shim::pcoll_bind(&mut library) };
    if !error.is_null() {
        // SAFETY: read after pcoll_bind wrote it.
        if unsafe { PMPI_Get_library_version }.is_some() {
            stop_if_wrong_family(&host_version());
        }
        // SAFETY: a NUL-terminated static message.
        let error = unsafe { CStr::from_ptr(error) }.to_string_lossy();
        say(&format!("pcoll: {error}; pcoll cannot run under this MPI\n"));
        std::process::exit(1);
    }
    // SAFETY: a static NUL-terminated path.
    unsafe { CStr::from_ptr(library) }
}

/// A host function called before [`bind`]: a defect in pcoll.
#[cold]
pub(super) fn unbound(name: &str) -> ! {
    say(&format!("pcoll: internal error: {name} was called before the host MPI was bound\n"));
    std::process::abort()
}

/// The runtime, initialised at MPI_Init (or at the first collective of a
/// program whose MPI_Init pcoll did not see). Under the wrong MPI family,
/// or with an invalid configuration, the job stops here, naming the
/// library to use, or the variable and the value.
pub(super) fn get() -> &'static Runtime {
    let runtime = RUNTIME.get_or_init(|| {
        let library = bind();
        let version = host_version();
        stop_if_wrong_family(&version);
        Config::from_env().map(|mut cfg| {
            cfg.host_mpi = host_mpi(&version);
            init_logging(&cfg);
            for warning in &cfg.warnings {
                log::warn!("{warning}");
            }
            install_finalize_hook(false);
            log::info!(
                "pcoll {} active, host MPI: {version} ({}); reduction kernels for {:?}; configuration {:?}",
                env!("CARGO_PKG_VERSION"),
                library.to_string_lossy(),
                crate::exec::kernels::Isa::best(),
                cfg
            );
            Runtime::new(cfg)
        })
    });
    match runtime {
        Ok(runtime) => runtime,
        Err(err) => {
            // the documented response to a bad configuration
            abort_job(&format!("pcoll: {err}\n"))
        }
    }
}

/// Says `text` and aborts the job. The pause lets the launcher forward the
/// message first: Hydra tears the job down on the first MPI_Abort and drops
/// what is still in the other ranks' (or this rank's) output pipes.
pub(super) fn abort_job(text: &str) -> ! {
    say(text);
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: PMPI_Abort may be called at any time after MPI_Init; it does not return.
    unsafe { pmpi!(PMPI_Abort)(handles().comm_world, 1) };
    unreachable!("MPI_Abort returned")
}

fn init_logging(cfg: &Config) {
    let rank = world_rank();
    let _ = env_logger::Builder::new()
        .filter_level(cfg.log.to_filter())
        .format(move |out, record| writeln!(out, "[pcoll {} rank {rank}] {}", record.level(), record.args()))
        .target(env_logger::Target::Stderr)
        .try_init();
}

/// What pcoll does once MPI_Init or MPI_Init_thread succeeded: stop if the
/// program runs under the other MPI family, install the finalize hook on
/// every rank, read the configuration (so that an invalid one stops the
/// job here, before the program's first collective), check that every
/// rank holds the same (or stop the job naming what differs), size the
/// node layer's memory (or stop the job naming the settings /dev/shm
/// cannot hold) and, with PCOLL_CALIBRATE=1, calibrate.
pub(super) fn after_init() {
    stop_if_wrong_family(&host_version());
    install_finalize_hook(true);
    let rt = get();
    if let Err(text) = agree_on_settings(&Mpi, &rt.cfg.fingerprint) {
        abort_job(&text);
    }
    if let Err(text) = comm::size_node_memory(&rt.cfg) {
        abort_job(&text);
    }
    if rt.cfg.calibrate && rt.cfg.enable {
        Mpi::with_thread(|t| crate::driver::calibrate::calibrate(&Mpi, t));
    }
}

/// Installs the finalize hook once. `at_init`: called from MPI_Init(_thread).
pub(super) fn install_finalize_hook(at_init: bool) {
    HOOK.get_or_init(|| {
        let mut keyval = 0;
        // SAFETY: `on_finalize` has the signature MPI expects; the attribute value is unused.
        let rc = unsafe {
            check(super::shim::pcoll_create_keyval(Some(on_finalize), &mut keyval))
                .and_then(|()| check(pmpi!(PMPI_Comm_set_attr)(handles().comm_self, keyval, std::ptr::null_mut())))
        };
        if rc.is_ok() {
            HOOKED_AT_INIT.store(at_init, Ordering::Relaxed);
        }
    });
}

/// MPI_Finalize has begun: print the summary, free what pcoll holds.
unsafe extern "C" fn on_finalize(
    _comm: MPI_Comm,
    mut keyval: c_int,
    _value: *mut c_void,
    _extra: *mut c_void,
) -> c_int {
    let outcome = std::panic::catch_unwind(|| {
        // Read at MPI_Init on every rank that installed the hook there.
        if let Some(Ok(runtime)) = RUNTIME.get() {
            report_at_finalize(&Mpi, runtime, HOOKED_AT_INIT.load(Ordering::Relaxed));
        }
        comm::release_all();
    });
    if outcome.is_err() {
        say("pcoll: internal error at MPI_Finalize\n");
    }
    // SAFETY: frees the hook's own keyval, no longer needed.
    unsafe { pmpi!(PMPI_Comm_free_keyval)(&mut keyval) };
    MPI_SUCCESS as c_int
}

/// The room MPI_Get_library_version gets, whichever family the library
/// was built for: MPICH's MPI_MAX_LIBRARY_VERSION_STRING (8192), the
/// larger of the two (Open MPI's is 256). Under the wrong family the host
/// writes up to its own limit, and MPICH 4.0's string, with its configure
/// line, is 2019 bytes long.
const VERSION_ROOM: usize = 8192;
const _: () = assert!(MPI_MAX_LIBRARY_VERSION_STRING as usize <= VERSION_ROOM);

/// First line of the host MPI's version string (no handle involved).
pub(super) fn host_version() -> String {
    let mut buf = vec![0 as c_char; VERSION_ROOM + 1];
    let mut len = 0;
    // SAFETY: `buf` holds the longest version string of either family plus a terminator.
    unsafe { pmpi!(PMPI_Get_library_version)(buf.as_mut_ptr(), &mut len) };
    let bytes: Vec<u8> = buf[..len.max(0) as usize].iter().map(|&c| c as u8).collect();
    // Open MPI counts the terminating NUL in `len`.
    String::from_utf8_lossy(&bytes)
        .lines()
        .next()
        .unwrap_or("")
        .trim_matches(|c: char| c.is_whitespace() || c == '\0')
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
