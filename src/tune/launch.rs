//! Running things for `pcoll tune`: commands with a time limit (the whole
//! process group is killed when it expires, so a hung MPI job leaves
//! nothing behind) and the MPI launch line of each MPI.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The MPIs `pcoll tune` knows: compiler wrapper, launcher.
pub const MPIS: &[(&str, &str, &str)] =
    &[("mpich", "mpicc.mpich", "mpiexec.mpich"), ("openmpi", "mpicc.openmpi", "mpirun.openmpi")];

/// What a command printed, and how it ended.
pub struct Finished {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` with stdin from /dev/null in its own process group; after
/// `limit`, kills the group and says so.
pub fn run(mut cmd: Command, limit: Duration) -> Result<Finished, String> {
    let shown = format!("{cmd:?}");
    let dir = scratch_dir()?;
    let (out_path, err_path) = (dir.join(format!("out-{}", unique())), dir.join(format!("err-{}", unique())));
    let files = |p: &Path| std::fs::File::create(p).map_err(|e| format!("cannot create {}: {e}", p.display()));
    cmd.stdin(Stdio::null()).stdout(files(&out_path)?).stderr(files(&err_path)?).process_group(0);
    let mut child = cmd.spawn().map_err(|e| format!("cannot run {shown}: {e}"))?;
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(status);
        }
        if start.elapsed() > limit {
            // The whole group: mpiexec and every rank it started.
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let (stdout, mut stderr) = (read(&out_path), read(&err_path));
    let _ = (std::fs::remove_file(&out_path), std::fs::remove_file(&err_path));
    if status.is_none() {
        stderr += &format!("\npcoll tune: killed after {} s: {shown}\n", limit.as_secs());
    }
    Ok(Finished { ok: status.is_some_and(|s| s.success()), stdout, stderr })
}

/// A number no other call of this process returns.
fn unique() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// This process's scratch directory (created on first use).
pub fn scratch_dir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("pcoll-tune-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Whether this process runs as root (Open MPI then wants a flag).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Uid:").map(|u| u.split_whitespace().next() == Some("0"))))
        .unwrap_or(false)
}

/// The launch of `ranks` ranks of `exe args` under `mpi` with `env` set
/// in every rank (LD_PRELOAD among them).
pub fn mpi_command(mpi: &str, ranks: usize, env: &[(String, String)], exe: &Path, args: &[String]) -> Command {
    let launcher = MPIS.iter().find(|m| m.0 == mpi).map_or(mpi, |m| m.2);
    let mut cmd = Command::new(launcher);
    if mpi == "mpich" {
        cmd.args(["-n", &ranks.to_string()]);
        for (k, v) in env {
            cmd.args(["-genv", k, v]);
        }
    } else {
        if is_root() {
            cmd.arg("--allow-run-as-root");
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if ranks > cores {
            cmd.arg("--oversubscribe");
        }
        cmd.args(["-np", &ranks.to_string()]);
        for (k, v) in env {
            cmd.args(["-x", &format!("{k}={v}")]);
        }
    }
    // The launcher itself must not load pcoll.
    cmd.env_remove("LD_PRELOAD");
    cmd.arg(exe).args(args);
    cmd
}
