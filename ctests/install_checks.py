"""Checks of scripts/install.sh (issue 32), run by ctests/run.py among its
extra checks, once per MPI: pcoll installed for that MPI into a
temporary prefix; ctests/x_header.c built with the MPI's compiler and
nothing but the flags of the installed pkg-config file (pcoll-<mpi>.pc)
asks for libpcoll-<mpi>.so.0 ahead of the MPI's library, runs at 2 ranks
without LD_PRELOAD, and pcoll's summary shows its Allreduces run by a
pcoll algorithm; then --uninstall leaves the prefix empty.

The helpers (launching, compiling, reporting) are run.py's, passed in as
the module `r`.  Python standard library only.
"""

import os
import shutil
import subprocess
import tempfile


def run(r, mpi, lib, res):
    """The checks for one MPI (`lib`, the library built for it, is what
    install.sh builds again)."""
    del lib
    prefix = tempfile.mkdtemp(prefix="pcoll-install-")
    try:
        check(r, mpi, prefix, res)
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


def sh(cmd, env=None):
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    return p.returncode == 0, " ".join(cmd) + "\n" + p.stdout.decode("utf-8", "replace")


def check(r, mpi, prefix, res):
    install = os.path.join(os.path.dirname(r.HERE), "scripts", "install.sh")
    ok, text = sh(["bash", install, "--prefix", prefix, mpi])
    if not ok:
        res.add(False, "%s scripts/install.sh --prefix DIR %s" % (mpi, mpi), text, mpi)
        return
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    p = subprocess.run(["pkg-config", "--cflags", "--libs", "pcoll-" + mpi], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    flags = p.stdout.decode("utf-8", "replace").split()
    exe = os.path.join(r.HERE, "build", mpi, "x_header_installed")
    ok, text = sh([r.MPIS[mpi]["cc"], "-O2", "-o", exe, os.path.join(r.HERE, "x_header.c")] + flags)
    problems = [] if p.returncode == 0 else ["pkg-config --cflags --libs pcoll-%s failed" % mpi]
    if not ok:
        res.add(False, "%s compile x_header with pkg-config's flags of the installed pcoll-%s" % (mpi, mpi), text, mpi)
        return
    needed = r.needed_libs(exe) or []
    mine = "libpcoll-%s.so.0" % mpi
    mpi_libs = [i for i, n in enumerate(needed) if n.startswith("libmpi")]
    if mine not in needed or (mpi_libs and needed.index(mine) > mpi_libs[0]):
        problems.append("the program should ask for %s ahead of the MPI's library; it asks for %s" % (mine, needed))
    rc, out, err, secs = r.run_mpi(mpi, 2, exe, {"PCOLL_STATS": "1"}, 120)
    if rc != 0 or "x_header: OK pcoll " not in out:
        problems.append("expected exit 0 and 'x_header: OK pcoll <version>'")
    ran = [alg for coll, alg, calls in r.SUMMARY_LINE.findall(err) if coll == "allreduce" and alg != "mpi"]
    if not ran:
        problems.append("pcoll's summary shows no Allreduce run by a pcoll algorithm")
    ok, text = sh(["bash", install, "--prefix", prefix, "--uninstall", mpi])
    left = sorted(os.listdir(prefix))
    if not ok or left:
        problems.append("install.sh --uninstall %s should leave the prefix empty; left: %s\n%s" % (mpi, left, text))
    details = "" if not problems else "\n".join(problems) + "\n" + r.failure_details(rc, out, err, 30, 30)
    res.add(not problems, "%s ranks=2 installed with scripts/install.sh, built with pkg-config's flags, "
            "uninstalled: pcoll ran, the prefix is empty (%.1fs)" % (mpi, secs), details, mpi, secs)
