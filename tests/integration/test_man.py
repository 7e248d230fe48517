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


def rendered(t, page):
    """the page as man shows it (groff, plain text)"""
    groff = shutil.which("groff")
    if groff is None:
        raise harness.Skip("groff not installed (scripts/deps.sh installs groff-base)")
    p = subprocess.run([groff, "-man", "-Tutf8", "-P-cbou"], input=page.encode(),
                       stdout=subprocess.PIPE, timeout=30)
    return p.stdout.decode()


def test_man_pages_say_what_help_does(t):
    """--help's entry in --help is "this text"; on a man page that would
    point at nothing, so the pages say what it does"""
    for name, argv in (("tokentap", ["--man"]), ("tokentap-sim", ["--man"])):
        page = run([binary(t, name), *argv])
        text = rendered(t, page)
        t.check("this text" not in text, f"{name}(1) says 'this text'")
        m = re.search(r"^\s+--help(?:, -h)?\s+(\S.*)", text, re.M)
        t.check(m and "option summary" in m.group(1), f"{name}(1) --help entry: {m and m.group(1)!r}")
    tt = binary(t, "tokentap")
    t.check(re.search(r"--help, -h\s+this text", run([tt, "--help"])),
            "--help itself keeps its short entry")


def example_commands(page):
    """the command lines of the EXAMPLES section (.nf blocks), unescaped,
    continuation lines joined"""
    sec = page.split("\n.SH EXAMPLES\n", 1)[1].split("\n.SH ", 1)[0]
    out = []
    for block in re.findall(r"\n\.nf\n(.*?)\n\.fi", sec, re.S):
        text = block.replace("\\e\n", " ").replace("\\-", "-").replace("\\e", "\\")
        out += [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    return out


@harness.timeout(90)
def test_tokentap_man_examples_work(t):
    """tokentap(1) has EXAMPLES, and each of its command lines works as
    written, with only the addresses, ports and file paths of this test
    put in: the proxies start, take traffic and drain, curl gets the
    admin pages through them, the reports and check-config exit 0"""
    import shlex
    tt = binary(t, "tokentap")
    page = run([tt, "--man"])
    t.check("\n.SH EXAMPLES\n" in page, "tokentap(1) has an EXAMPLES section")
    cmds = example_commands(page)
    t.check(sum(c.startswith("tokentap ") for c in cmds) >= 6, f"examples: {cmds}")
    for flag in FLAG.findall(" ".join(c for c in cmds if c.startswith("tokentap"))):
        t.check(flag in run([tt, "--help"]) + run([tt, "report", "--help"]),
                f"{flag} of the examples is an option")

    primary, cand = t.sim(), t.sim(extra=["--latency-scale", "2"])
    records = os.path.join(t.tmp, "records.jsonl")
    # /etc/tokentap/tokentap.conf as the package installs it (debian/rules):
    # the reference config with upstream set
    conf = os.path.join(t.tmp, "tokentap.conf")
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "conf", "tokentap.conf")) as f:
        ref = f.read()
    ref = ref.replace("\nupstream =\n", "\nupstream = http://127.0.0.1:8000\n")
    t.check("\nupstream = http://127.0.0.1:8000\n" in ref, "the reference config's upstream")
    with open(conf, "w") as f:
        f.write(ref)
    state = {"proxy": None, "n": 0}

    def local(c):
        return (c.replace("127.0.0.1:8000", f"127.0.0.1:{primary.port}")
                 .replace("127.0.0.1:8001", f"127.0.0.1:{cand.port}")
                 .replace("records.jsonl", records)
                 .replace("/etc/tokentap/tokentap.conf", conf))

    def stop_proxy():
        p = state["proxy"]
        if p is not None:
            t.eq(p.stop(), 0, f"{p.name} drained and exited 0")
            state["proxy"] = None

    ran = []
    for c in cmds:
        c = local(c).rstrip("&").strip()
        argv = shlex.split(c)
        if argv[0] == "tokentap" and argv[1] not in ("report", "check-config"):
            stop_proxy()
            state["n"] += 1
            name = f"example{state['n']}"
            ready = os.path.join(t.tmp, name + ".ready.json")
            argv = [tt] + ["127.0.0.1:0" if a == "0.0.0.0:8080" else a for a in argv[1:]]
            p = harness.Proc(t, name, argv + ["--admin", "127.0.0.1:0", "--ready-file", ready],
                             notify=harness.Notify(t, name))
            info = p.wait_ready(ready, 10 * t.slow)
            p.port, p.admin = harness.port_of(info["listen"]), harness.port_of(info["admin"])
            state["proxy"] = p
            for i in range(3):
                r = harness.http(p.port, "POST", "/v1/chat/completions",
                                 harness.chat_body({"ttft_ms": 5, "tokens": 3 + i, "gap_ms": 1}))
                t.eq(r.status, 200, f"a request through {c!r}")
        elif argv[0] == "tokentap-sim":
            name = "example-sim"
            ready = os.path.join(t.tmp, name + ".ready.json")
            argv = [binary(t, "tokentap-sim")] + ["127.0.0.1:0" if a.startswith("127.0.0.1:") else a
                                                  for a in argv[1:]]
            s = harness.Proc(t, name, argv + ["--ready-file", ready], notify=harness.Notify(t, name))
            s.wait_ready(ready, 10 * t.slow)
            t.eq(s.stop(), 0, "the example's simulator exits 0")
        elif argv[0] == "curl":
            p = state["proxy"]
            t.check(p is not None, f"{c!r} follows a tokentap example")
            sh = c.replace("127.0.0.1:9464", f"127.0.0.1:{p.admin}").replace("127.0.0.1:8080",
                                                                              f"127.0.0.1:{p.port}")
            out = subprocess.run(["sh", "-c", sh], stdout=subprocess.PIPE, timeout=30 * t.slow)
            t.eq(out.returncode, 0, f"{c!r} exit status")
            t.check(out.stdout.strip(), f"{c!r} printed something")
        else:
            stop_proxy()       # the reports read what the proxies wrote and flushed
            first = c.split(" && ")[0]    # check-config ... && systemctl reload: not here
            argv = [tt] + shlex.split(first)[1:]
            out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 timeout=60 * t.slow)
            t.eq(out.returncode, 0, f"{c!r} exit status: {out.stderr[-300:]!r}")
            if "--compare-upstreams" in argv:
                t.check(b"candidate" in out.stdout, "the compare example pairs the shadow's legs")
        ran.append(c)
    stop_proxy()
    t.eq(len(ran), len(cmds), "every example ran")


def test_sim_doc_lists_every_option(t):
    """docs/simulator.md's flag table has every option of tokentap-sim --help"""
    sim = binary(t, "tokentap-sim")
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "simulator.md")).read()
    table = " ".join(line.split("|")[1] for line in doc.splitlines() if line.startswith("| `--"))
    flags = [f for f in option_flags(run([sim, "--help"])) if f != "--help"]
    t.check("--latency-scale" in flags, "--latency-scale in --help")
    t.eq([f for f in flags if f not in FLAG.findall(table)], [],
         "tokentap-sim options missing from docs/simulator.md's table")
