"""Man pages: tokentap(1) and tokentap-sim(1) are generated from the same
option tables and help texts as --help, list every option --help lists
(the proxy's, the report's and the simulator's), and render without groff
warnings."""
import os
import re
import shutil
import subprocess

import harness

FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def run(argv):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    if p.returncode != 0:
        raise harness.Failure(f"{argv} exited {p.returncode}: {p.stderr[-300:]!r}")
    return p.stdout.decode()


def binary(t, name):
    path = os.path.join(t.build, name)
    if not os.access(path, os.X_OK):
        raise harness.Skip(f"{path} not built")
    return path


def option_flags(help_text):
    """flags that start an option line of a --help text"""
    out = []
    for line in help_text.splitlines():
        m = re.match(r"\s{1,4}(-\S.*?)(?:\s{2,}|$)", line)
        if m:
            out += FLAG.findall(m.group(1))
    return out


def tagged_flags(roff):
    """flags that head a tagged paragraph (.TP then a bold flag) in <roff>"""
    out = []
    lines = roff.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line == ".TP":
            out += FLAG.findall(lines[i + 1].replace("\\-", "-").replace("\\fB", " ")
                                .replace("\\fR", " ").replace("\\fI", " "))
    return out


def check_page(t, page, flags, what):
    listed = set(tagged_flags(page))
    t.check(len(flags) > 3, f"{what}: --help lists options ({flags})")
    missing = [f for f in flags if f not in listed]
    t.eq(missing, [], f"{what}: options of --help missing from the man page")


def groff_clean(t, page, what):
    groff = shutil.which("groff")
    if groff is None:
        raise harness.Skip("groff not installed (scripts/deps.sh installs groff-base)")
    p = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z"], input=page.encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    t.eq((p.returncode, p.stderr.decode()), (0, ""), f"{what}: groff -ww warnings")


def test_tokentap_man_lists_every_option(t):
    """every option of tokentap --help and tokentap report --help heads an
    entry of tokentap(1), whose sections are the config file's"""
    tt = binary(t, "tokentap")
    page = run([tt, "--man"])
    t.check(page.startswith(".\\\" Generated") and "\n.TH TOKENTAP 1 " in page,
            "a roff page with its title")
    check_page(t, page.split(".SH COMMANDS")[0], option_flags(run([tt, "--help"])),
               "tokentap")
    check_page(t, page.split(".SS tokentap report")[1], option_flags(run([tt, "report", "--help"])),
               "tokentap report")
    for sect in re.findall(r"^\[(\w+)\]", run([tt, "--print-config-reference"]), re.M):
        t.check(f"\n.SS [{sect}]\n" in page, f"section [{sect}] in the man page")
    t.check("\n.SS tokentap check\\-config FILE\n" in page, "check-config documented")
    # the flag's key and default come from the same table entry
    t.check(re.search(r"\\fB\\-\\-access\\-log\\fR \\fIFILE\\fR\n.*\(key access_log\)", page),
            "--access-log with its key")
    t.check(re.search(r"\\-\\-head\\-timeout\\fR \\fIDURATION\\fR\n.*default 10s", page),
            "--head-timeout with its default")
    groff_clean(t, page, "tokentap(1)")


def test_sim_man_lists_every_option(t):
    """every option of tokentap-sim --help heads an entry of tokentap-sim(1)"""
    sim = binary(t, "tokentap-sim")
    page = run([sim, "--man"])
    t.check("\n.TH TOKENTAP\\-SIM 1 " in page or "\n.TH TOKENTAP-SIM 1 " in page,
            "a roff page with its title")
    check_page(t, page, option_flags(run([sim, "--help"])), "tokentap-sim")
    groff_clean(t, page, "tokentap-sim(1)")


def test_built_man_pages_are_the_generated_ones(t):
    """the pages make installs (build/man/*.1) are what the binaries print"""
    for name in ("tokentap", "tokentap-sim"):
        path = os.path.join(t.build, "man", f"{name}.1")
        if not os.path.exists(path):
            raise harness.Skip(f"{path} not built (make all writes it)")
        with open(path) as f:
            t.eq(f.read(), run([binary(t, name), "--man"]), f"{path} is current")
