"""Request-smuggling corpus replayed through the proxy (SPEC 9).

Every line of ../shared/fixtures/smuggling/corpus.jsonl (see its SOURCES.md)
goes through one proxy in front of a recording upstream that keeps the raw
bytes of every connection it accepts.  A whole request ("http-garden") is
sent as it is; a Transfer-Encoding header line ("smuggler-exhaustive") is
put into the three request templates of SOURCES.md (CL.TE, TE.CL and a
smuggled GET in the body).

Each payload is sent three ways: in one write, split at every line
boundary, and split at two random points (seeded).  For each, one of:

  refused    an error status (4xx/5xx), nothing reached the upstream;
  one        the upstream received requests that a strict and a lenient
             HTTP/1.1 reader (below) both read as exactly one complete
             request per connection with no byte left over, and the client
             got one upstream response per forwarded request;
  cut        an error status after part of a request was forwarded (the
             defect came after the head); both readers see at most that one
             incomplete request.

Anything else (a reader seeing a second request, leftover bytes, bytes
forwarded with no answer to account for them) fails the test, listing the
payloads.  The proxy runs without an upstream pool (one upstream connection
per request) and with short client timeouts, so a payload ends with the
proxy closing the client connection; a barrier connection to the recorder
after each payload makes the attribution of upstream connections exact.

The response side replays the Transfer-Encoding gadgets as upstream
responses (CL.TE, TE.CL, and a second response smuggled in the body): the
client must get a 502, or exactly the one response both readers agree on,
and never a second response.
"""
import base64
import json
import os
import random
import re
import socket
import threading
import time

import harness

CORPUS = os.path.normpath(os.path.join(harness.REPO, "..", "shared", "fixtures",
                                       "smuggling", "corpus.jsonl"))

TEMPLATES = (
    ("cl.te", b"POST /x HTTP/1.1\r\n%s\r\nHost: x\r\nContent-Length: 4\r\n\r\n1\r\nZ\r\nQ\r\n\r\n"),
    ("te.cl", b"POST /x HTTP/1.1\r\n%s\r\nHost: x\r\nContent-Length: 6\r\n\r\n0\r\n\r\nX"),
    ("smuggle", b"POST /x HTTP/1.1\r\n%s\r\nHost: x\r\nContent-Length: 40\r\n\r\n0\r\n\r\n"
                b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"),
)


def corpus():
    """[(corpus line name, [(payload name, bytes)])]; Skip without it"""
    if not os.path.exists(CORPUS):
        raise harness.Skip(f"smuggling corpus not found at {CORPUS}")
    out = []
    with open(CORPUS) as f:
        for ln in f:
            if not ln.strip():
                continue
            d = json.loads(ln)
            raw = base64.b64decode(d["payload_b64"])
            if d["kind"] == "request":
                out.append((d["name"], [(d["name"], raw)]))
            else:
                out.append((d["name"], [(f"{d['name']}/{t}", tpl % raw) for t, tpl in TEMPLATES]))
    return out


# --------------------------------------------------------------------------
# two readers of HTTP/1.1 request framing, as backends behind the proxy
# would read the forwarded bytes.  Each returns ("complete", end),
# ("incomplete", None) or ("error", reason) for the message at <pos>.

TOKEN = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
REQ_LINE = re.compile(rb"(" + TOKEN + rb") (\S+) HTTP/1\.[01]")
STATUS_LINE = re.compile(rb"HTTP/1\.[01] \d{3}(?: [^\r\n]*)?")
FIELD = re.compile(rb"(" + TOKEN + rb"):[ \t]*(.*?)[ \t]*")
CHUNK_LINE = re.compile(rb"([0-9A-Fa-f]+)((?:[ \t]*;[ \t]*" + TOKEN + rb"(?:[ \t]*=[ \t]*(?:"
                        + TOKEN + rb"|\"(?:[^\"\\\x00-\x08\x0a-\x1f\x7f]|\\.)*\"))?)*)[ \t]*")


def strict_read(buf, pos=0, response=False):
    """RFC 9112 taken literally: CRLF only, token names, one valid
    Content-Length or exactly "chunked", never both, strict chunk lines"""
    end = buf.find(b"\r\n\r\n", pos)
    if end < 0:
        return ("incomplete", None)
    lines = buf[pos:end].split(b"\r\n")
    if any(b"\r" in ln or b"\n" in ln for ln in lines):
        return ("error", "bare CR or LF in head")
    if not (STATUS_LINE if response else REQ_LINE).fullmatch(lines[0]):
        return ("error", "start line")
    cl, te = [], []
    for ln in lines[1:]:
        m = FIELD.fullmatch(ln)
        if not m or re.search(rb"[\x00-\x08\x0a-\x1f\x7f]", m.group(2)):
            return ("error", f"field line {ln[:40]!r}")
        name = m.group(1).lower()
        if name == b"content-length":
            cl.append(m.group(2))
        elif name == b"transfer-encoding":
            te.append(m.group(2))
    body = end + 4
    if te:
        if cl or te != [b"chunked"]:
            return ("error", "transfer-encoding")
        i = body
        while True:
            j = buf.find(b"\r\n", i)
            if j < 0:
                return ("incomplete", None)
            m = CHUNK_LINE.fullmatch(buf[i:j])
            if not m:
                return ("error", "chunk line")
            size = int(m.group(1), 16)
            i = j + 2
            if size == 0:
                while True:         # trailer fields up to the empty line
                    j = buf.find(b"\r\n", i)
                    if j < 0:
                        return ("incomplete", None)
                    if j == i:
                        return ("complete", j + 2)
                    if not FIELD.fullmatch(buf[i:j]):
                        return ("error", "trailer")
                    i = j + 2
            if len(buf) < i + size + 2:
                return ("incomplete", None)
            if buf[i + size:i + size + 2] != b"\r\n":
                return ("error", "chunk data without CRLF")
            i += size + 2
    if len(cl) > 1 or (cl and not re.fullmatch(rb"\d+", cl[0])):
        return ("error", "content-length")
    if response and not cl:
        return ("complete", len(buf))      # delimited by the close
    n = int(cl[0]) if cl else 0
    if len(buf) < body + n:
        return ("incomplete", None)
    return ("complete", body + n)


def lenient_read(buf, pos=0, response=False):
    """what a forgiving peer does: LF line ends, names trimmed, folded
    lines joined, "chunked" anywhere in Transfer-Encoding wins over the
    first Content-Length, chunk sizes read from their leading hex digits"""
    m = re.compile(rb"\r?\n\r?\n").search(buf, pos)
    if not m:
        return ("incomplete", None)
    lines = [ln.rstrip(b"\r") for ln in buf[pos:m.start()].split(b"\n")]
    fields = []
    for ln in lines[1:]:
        if ln[:1] in (b" ", b"\t") and fields:
            fields[-1][1] += b" " + ln.strip()
            continue
        k, sep, v = ln.partition(b":")
        if sep:
            fields.append([k.strip().lower(), v.strip()])
    chunked = any(k == b"transfer-encoding" and b"chunked" in v.lower() for k, v in fields)
    cl = [v for k, v in fields if k == b"content-length"]
    i = m.end()
    if chunked:
        while True:
            j = buf.find(b"\n", i)
            if j < 0:
                return ("incomplete", None)
            hx = re.match(rb"\s*([0-9A-Fa-f]+)", buf[i:j])
            if not hx:
                return ("error", "chunk size")
            size = int(hx.group(1), 16)
            i = j + 1
            if size == 0:
                while True:
                    j = buf.find(b"\n", i)
                    if j < 0:
                        return ("incomplete", None)
                    if buf[i:j].strip(b"\r") == b"":
                        return ("complete", j + 1)
                    i = j + 1
            if len(buf) < i + size:
                return ("incomplete", None)
            i += size
            j = buf.find(b"\n", i)
            if j < 0:
                return ("incomplete", None)
            i = j + 1
    if response and not cl:
        return ("complete", len(buf))
    d = re.match(rb"\s*(\d+)", cl[0]) if cl else None
    n = int(d.group(1)) if d else 0
    if len(buf) < i + n:
        return ("incomplete", None)
    return ("complete", i + n)


def readings(buf, response=False):
    """for each reader: (complete messages, what follows the last one)
    where what follows is "" (nothing), "incomplete" or "error: ..." """
    out = {}
    for name, rd in (("strict", strict_read), ("lenient", lenient_read)):
        pos, n, tail = 0, 0, ""
        while pos < len(buf):
            st, v = rd(buf, pos, response)
            if st == "complete":
                n, pos = n + 1, v
                continue
            tail = st if st == "incomplete" else "error: " + v
            break
        out[name] = (n, tail)
    return out


def client_statuses(data):
    """status codes of the responses a client received, read in sequence
    by their Content-Length (tokentap's own errors and the recorder's
    answers always carry one); a response without one ends the list"""
    out, pos = [], 0
    while pos < len(data):
        m = re.compile(rb"HTTP/1\.[01] (\d{3})[^\r\n]*\r\n").match(data, pos)
        end = data.find(b"\r\n\r\n", pos)
        if not m or end < 0:
            break
        out.append(int(m.group(1)))
        cl = re.search(rb"(?im)^content-length:[ \t]*(\d+)", data[pos:end + 2])
        if not cl:
            break
        pos = end + 4 + int(cl.group(1))
    return out


# --------------------------------------------------------------------------
# the recording upstream


class Recorder(harness.Listener):
    """Accepts connections and keeps every byte each one sends.  Answers
    once a reader sees a complete request (or the head has been quiet for
    a moment), with Connection: close, then reads on to EOF."""

    ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"

    def __init__(self, t):
        self.conns = []             # [{"data", "done", "barrier"}] in accept order
        self.lock = threading.Lock()
        self.errors = []
        super().__init__(t)

    def accepted(self, s):
        rec = {"data": bytearray(), "done": threading.Event(), "barrier": False}
        with self.lock:
            self.conns.append(rec)
        threading.Thread(target=self._serve, args=(s, rec), daemon=True).start()

    def _serve(self, s, rec):
        answered = False
        try:
            s.settimeout(0.2)
            while True:
                try:
                    b = s.recv(65536)
                except socket.timeout:
                    if rec["barrier"]:
                        break
                    if not answered and b"\r\n\r\n" in rec["data"]:
                        s.sendall(self.ANSWER)
                        answered = True
                    s.settimeout(10)
                    continue
                except ConnectionResetError:
                    break
                if not b:
                    break
                rec["data"] += b
                if rec["data"].startswith(b"BARRIER"):
                    rec["barrier"] = True
                    s.sendall(b"!")
                    continue
                if not answered:
                    r = readings(bytes(rec["data"]))
                    if r["strict"][0] or r["lenient"][0]:
                        s.sendall(self.ANSWER)
                        answered = True
        except OSError as e:
            self.errors.append(repr(e))
        finally:
            s.close()
            rec["done"].set()

    def barrier(self):
        """every connection the proxy opened so far is accepted (accept
        order is connection order) and finished; returns their records"""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        s.sendall(b"BARRIER")
        s.recv(1)
        s.close()
        with self.lock:
            conns = list(self.conns)
            self.conns = []
        for rec in conns:
            if not rec["barrier"] and not rec["done"].wait(10):
                raise harness.Failure("an upstream connection stayed open after its client "
                                      f"was done: {bytes(rec['data'][:200])!r}")
        return [bytes(r["data"]) for r in conns if not r["barrier"] and r["data"]]


# --------------------------------------------------------------------------
# replay


def splits(raw, mode, rng):
    if mode == "one write":
        return [raw]
    if mode == "lines":
        parts, i = [], 0
        while True:
            j = raw.find(b"\n", i)
            if j < 0 or j + 1 >= len(raw):
                break
            parts.append(raw[i:j + 1])
            i = j + 1
        return parts + [raw[i:]] if raw[i:] else parts
    cuts = sorted(rng.sample(range(1, len(raw)), min(2, len(raw) - 1))) if len(raw) > 1 else []
    bounds = [0] + cuts + [len(raw)]
    return [raw[a:b] for a, b in zip(bounds, bounds[1:])]


def exchange(port, parts):
    """send <parts> as separate writes, read until the proxy closes; a
    write the proxy no longer takes (it answered and closed) ends sending"""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    data = bytearray()
    try:
        for k, p in enumerate(parts):
            if k:
                time.sleep(0.001)   # separate reads, as far as the kernel allows
            try:
                s.sendall(p)
            except (ConnectionResetError, BrokenPipeError):
                break
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except ConnectionResetError:
        data += b"<reset>"
    finally:
        s.close()
    return bytes(data)


def classify(client, forwarded):
    """("refused" | "one" | "cut", None) or (None, what is wrong)"""
    sts = client_statuses(client)
    if not sts:
        return None, f"no response (client got {client[:80]!r})"
    errors = [s for s in sts if s >= 400]
    for fw in forwarded:
        r = readings(fw)
        for name, (n, tail) in r.items():
            if n > 1 or (n == 1 and tail):
                return None, f"{name} reader: {n} request(s) then {tail or 'nothing'} in {fw[:300]!r}"
            if n == 0 and tail.startswith("error"):
                return None, f"{name} reader: {tail} in forwarded {fw[:300]!r}"
    complete = [fw for fw in forwarded
                if readings(fw)["strict"][0] == 1 and readings(fw)["lenient"][0] == 1]
    if not forwarded:
        if errors and errors == sts:
            return "refused", None
        return None, f"statuses {sts} with nothing forwarded"
    if len(complete) == len(forwarded) and sts.count(200) == len(forwarded):
        return "one", None
    if errors and len(complete) < len(forwarded) and sts.count(200) <= len(complete):
        return "cut", None
    if not errors and len(forwarded) == 1 and not complete and sts == [200]:
        # the client never finished its body; the upstream answered early
        return "one", None
    return None, f"statuses {sts} for {len(forwarded)} forwarded ({len(complete)} complete)"


MODES = ("one write", "lines", "random split")


def replay(t, modes):
    lines = corpus()
    rec = Recorder(t)
    px = t.proxy(rec.url, record=False,
                 extra=["--upstream-pool", "0", "--client-idle-timeout", "300ms",
                        "--head-timeout", "1s", "--response-timeout", "2s",
                        "--max-body-bytes", "1m", "--log-level", "error"])
    rng = random.Random(20261201)
    counts = {m: {"refused": 0, "one": 0, "cut": 0} for m in modes}
    bad = []
    npay = 0
    for _name, payloads in lines:
        for pname, raw in payloads:
            npay += 1
            for mode in modes:
                client = exchange(px.port, splits(raw, mode, rng))
                forwarded = rec.barrier()
                kind, why = classify(client, forwarded)
                if kind is None:
                    bad.append(f"{pname} [{mode}]: {why}")
                else:
                    counts[mode][kind] += 1
    for mode in modes:
        c = counts[mode]
        t.note(f"{mode}: {len(lines)} lines, {npay} payloads: {c['refused']} refused, "
               f"{c['one']} forwarded as one, {c['cut']} cut after the head")
    if bad:
        raise harness.Failure(f"{len(bad)} payload(s) not refused nor forwarded as one:\n  "
                              + "\n  ".join(bad[:25]))
    t.check(px.alive(), "proxy died")


@harness.timeout(120)
def test_corpus_one_write_refused_or_forwarded_as_one(t):
    """every corpus payload in one write: refused, or one request upstream"""
    replay(t, ("one write",))


@harness.timeout(150)
def test_corpus_split_writes_refused_or_forwarded_as_one(t):
    """every corpus payload split at line boundaries and at random points"""
    replay(t, ("lines", "random split"))


# --------------------------------------------------------------------------
# the upstream side: Transfer-Encoding gadgets in responses

SECOND = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nsmuggled!"
RESPONSE_TEMPLATES = (
    # a Content-Length reader sees one response; a chunked reader sees it end
    # at the last-chunk and the smuggled response after it
    ("cl.te", lambda g: b"HTTP/1.1 200 OK\r\n" + g + b"\r\nContent-Length: %d\r\n\r\n"
     % (5 + len(SECOND)) + b"0\r\n\r\n" + SECOND),
    # a chunked reader sees one response carrying the smuggled bytes as data;
    # a Content-Length reader sees an empty body, then garbage
    ("te.cl", lambda g: b"HTTP/1.1 200 OK\r\n" + g + b"\r\nContent-Length: 0\r\n\r\n"
     + b"%x\r\n" % len(SECOND) + SECOND + b"\r\n0\r\n\r\n"),
)


class ScriptedUpstream(harness.Listener):
    """Answers every connection with self.reply, then closes at once."""

    def __init__(self, t):
        self.reply = b""
        self.split = False          # send the reply line by line
        super().__init__(t)

    def accepted(self, s):
        threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s):
        try:
            s.settimeout(10)
            if harness.read_head(s) is None:
                return
            parts = splits(self.reply, "lines", None) if self.split else [self.reply]
            for k, p in enumerate(parts):
                if k:
                    time.sleep(0.001)
                s.sendall(p)
            s.shutdown(socket.SHUT_WR)
            while s.recv(65536):
                pass
        except OSError:
            pass
        finally:
            s.close()


def response_replay(t, split):
    corpus()                # Skip without it
    gadgets = []
    with open(CORPUS) as f:
        for ln in f:
            d = json.loads(ln)
            if d["kind"] != "request":
                gadgets.append((d["name"], base64.b64decode(d["payload_b64"])))
    up = ScriptedUpstream(t)
    up.split = split
    px = t.proxy(up.url, record=False,
                 extra=["--upstream-pool", "0", "--response-timeout", "2s",
                        "--log-level", "error"])
    req = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    counts = {"502": 0, "one": 0, "cut": 0}
    bad = []
    for name, g in gadgets:
        for tname, tpl in RESPONSE_TEMPLATES:
            up.reply = tpl(g)
            got = exchange(px.port, [req])
            sts = client_statuses(got)
            r = readings(got, response=True)
            if sts == [502]:
                counts["502"] += 1
                if r["strict"] != (1, "") or b"smuggled!" in got:
                    bad.append(f"{name}/{tname}: 502 plus more: {got[:300]!r}")
            elif sts[:1] == [200] and all(v == (1, "") for v in r.values()):
                counts["one"] += 1
            elif sts[:1] == [200] and all(v[0] == 0 and v[1] == "incomplete" for v in r.values()):
                counts["cut"] += 1
            else:
                bad.append(f"{name}/{tname}: statuses {sts}, readings {r}: {got[:300]!r}")
    t.note(f"responses ({'lines' if split else 'one write'}): {len(gadgets)} gadgets x {len(RESPONSE_TEMPLATES)}: {counts['502']} "
           f"became 502, {counts['one']} forwarded as one, {counts['cut']} cut")
    if bad:
        raise harness.Failure(f"{len(bad)} response(s) not 502 nor one:\n  " + "\n  ".join(bad[:25]))


@harness.timeout(120)
def test_corpus_response_gadgets_502_or_one_response(t):
    """every Transfer-Encoding gadget in an upstream response (CL.TE and
    TE.CL with a second response in the body), in one write: the client
    gets a 502 or the one response both readers agree on, never the
    smuggled one"""
    response_replay(t, False)


@harness.timeout(120)
def test_corpus_response_gadgets_split_502_or_one_response(t):
    """the same with the upstream writing its response line by line"""
    response_replay(t, True)
