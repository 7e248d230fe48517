"""`tokentap check-config` and the config errors a new user meets: the
shipped reference config passes as shipped, every error of a file is
listed (FILE:LINE: key ...) and the exit status is 2, a missing upstream
names the file and the [upstream] key, goodput limits take duration
units."""
import os
import subprocess

import harness

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(t, *args):
    exe = os.path.join(t.build, "tokentap")
    p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=30 * t.slow)
    for mark in ("AddressSanitizer", "runtime error:", "LeakSanitizer"):
        if mark in p.stderr:
            raise harness.Failure(f"sanitizer report:\n{p.stderr[-3000:]}")
    return p


def conf(t, name, text):
    path = os.path.join(t.tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_shipped_reference_config_passes_check_config(t):
    """conf/tokentap.conf, the commented reference, is valid as shipped"""
    path = os.path.join(REPO, "conf", "tokentap.conf")
    p = run(t, "check-config", path)
    t.eq(p.returncode, 0, "exit status; stderr: " + p.stderr)
    t.check("configuration OK" in p.stderr, "OK line: " + p.stderr)
    t.check("\nupstream = http://" in p.stdout, "a working upstream URL")


def test_check_config_lists_every_error_with_file_and_line(t):
    """three errors in a file: three lines, each FILE:LINE: key 'K', exit 2"""
    path = conf(t, "bad.conf", "[proxy]\nworkers = 0\nbogus = 1\n"
                               "[upstream]\nupstream = http://127.0.0.1:8000\n"
                               "[limits]\nhead_timeout = 10\n")
    p = run(t, "check-config", path)
    t.eq(p.returncode, 2, "exit status")
    lines = p.stderr.strip().splitlines()
    t.eq(len(lines), 3, "one line per error: " + p.stderr)
    for want, line in zip((f"{path}:2: key 'workers'", f"{path}:3: key 'bogus'",
                           f"{path}:7: key 'head_timeout'"), lines):
        t.check(want in line, f"{want!r} in {line!r}")
    # the proxy itself refuses the same file with the same lines
    p = run(t, "--config", path)
    t.eq(p.returncode, 2, "proxy exit status")
    t.eq(len(p.stderr.strip().splitlines()), 3, "proxy lists them too: " + p.stderr)


def test_missing_upstream_names_the_config_key_and_file(t):
    """with a config file, 'required' names the file and the [upstream]
    key, not only the flag"""
    path = conf(t, "noup.conf", "[proxy]\nworkers = 2\n")
    p = run(t, "check-config", path)
    t.eq(p.returncode, 2, "exit status")
    t.check(path in p.stderr and "key 'upstream' in [upstream]" in p.stderr
            and "required" in p.stderr, "message: " + p.stderr)
    p = run(t, "--config", path)
    t.check(path in p.stderr and "key 'upstream' in [upstream]" in p.stderr,
            "proxy message: " + p.stderr)
    p = run(t, "--workers", "2")
    t.check("--upstream: required" in p.stderr, "without a file, the flag: " + p.stderr)


def test_goodput_limits_take_duration_units(t):
    """--goodput time_to_first_token:500ms is accepted as every other
    duration is; bare numbers stay ms; throughput tags stay plain"""
    path = conf(t, "slo.conf", "[upstream]\nupstream = http://127.0.0.1:8000\n"
                               "[slo]\ngoodput = \"time_to_first_token:500ms e2el:2.5s itl:40\"\n")
    p = run(t, "check-config", path)
    t.eq(p.returncode, 0, "units accepted: " + p.stderr)
    path = conf(t, "slo2.conf", "[upstream]\nupstream = http://127.0.0.1:8000\n"
                                "[slo]\ngoodput = output_token_throughput_per_user:5s\n")
    p = run(t, "check-config", path)
    t.eq(p.returncode, 2, "a unit on a throughput refused")
    t.check("plain number" in p.stderr, "says why: " + p.stderr)
