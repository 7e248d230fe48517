"""What `make install` and the Debian package install: every file the
README and the docs point at, the Grafana dashboard included
(share/tokentap/grafana/tokentap.json).  Both run against the build under
test (nothing is rebuilt when it is current) into a temporary root."""
import filecmp
import os
import subprocess

import harness

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def make(t, argv):
    build = os.path.abspath(t.build)
    for b in ("tokentap", "tokentap-sim"):
        if not os.access(os.path.join(build, b), os.X_OK):
            raise harness.Skip(f"{b} not built")
    san = ["SAN=1"] if t.san else []
    p = subprocess.run(["make", "-s", "DEPS=0", *san, *argv], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=240 * t.slow)
    t.eq(p.returncode, 0, f"make {' '.join(argv)}: {p.stdout.decode()[-800:]}")


def files_under(root):
    out = set()
    for d, _, fs in os.walk(root):
        for f in fs:
            out.add(os.path.relpath(os.path.join(d, f), root))
    return out


def check_shared(t, files, root, prefix):
    for f in ("bin/tokentap", "bin/tokentap-sim", "share/man/man1/tokentap.1",
              "share/man/man1/tokentap-sim.1", "share/tokentap/tokentap.conf",
              "share/tokentap/prometheus/tokentap-rules.yml",
              "share/tokentap/postgres/tokentap.sql",
              "share/tokentap/grafana/tokentap.json", "share/doc/tokentap/README.md"):
        t.check(os.path.join(prefix, f) in files, f"{prefix}/{f} installed")
    t.check(filecmp.cmp(os.path.join(root, prefix, "share/tokentap/grafana/tokentap.json"),
                        os.path.join(ROOT, "conf/grafana/tokentap.json"), shallow=False),
            "the installed Grafana dashboard is conf/grafana/tokentap.json")


@harness.timeout(300)
def test_make_install_installs_the_grafana_dashboard(t):
    dest = os.path.join(t.tmp, "root")
    make(t, ["install", f"BUILD={os.path.abspath(t.build)}", f"DESTDIR={dest}", "PREFIX=/usr/local"])
    files = files_under(dest)
    check_shared(t, files, dest, "usr/local")
    # twice is fine (the README's `make install` again after an upgrade)
    make(t, ["install", f"BUILD={os.path.abspath(t.build)}", f"DESTDIR={dest}", "PREFIX=/usr/local"])
    t.eq(files_under(dest), files, "a second make install installs the same files")


@harness.timeout(300)
def test_debian_package_installs_the_grafana_dashboard(t):
    """debian/rules' install step as dpkg-buildpackage runs it (its
    override_dh_auto_install recipe, here on the build under test and into
    a temporary package root): the package has the dashboard too"""
    pkg = os.path.join(t.tmp, "pkg")
    make(t, ["-f", "debian/rules", "override_dh_auto_install",
             f"B={os.path.abspath(t.build)}", f"PKG={pkg}"])
    files = files_under(pkg)
    check_shared(t, files, pkg, "usr")
    t.check("etc/tokentap/tokentap.conf" in files, "the conffile")
    t.check(any(f.startswith("lib/systemd/system/") for f in files), "the systemd units")
