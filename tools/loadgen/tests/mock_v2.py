#!/usr/bin/env python3
"""A minimal KServe v2 server for testing kiln loadgen on its own (stdlib only).

    mock_v2.py PORT [--delay-ms D] [--fail-every N] [--corrupt-every N]

One model, "mock": input "x" FP32 [-1, 4], output "y" FP32 [-1, 4] = 2 * x.
Every request is checked against the protocol (the binary-data extension
included); a request that breaks it is answered 400 with the reason, and
the count of each kind is at GET /stats as JSON.  --fail-every N answers
every N-th infer with 503, --corrupt-every N every N-th with a 200 whose
binary output lacks its last element; --delay-ms sleeps before answering."""
import json, socket, struct, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port = int(sys.argv[1])
delay = float(sys.argv[sys.argv.index('--delay-ms') + 1]) / 1e3 if '--delay-ms' in sys.argv else 0
fail_every = int(sys.argv[sys.argv.index('--fail-every') + 1]) if '--fail-every' in sys.argv else 0
corrupt_every = int(sys.argv[sys.argv.index('--corrupt-every') + 1]) if '--corrupt-every' in sys.argv else 0
META = {"name": "mock", "versions": ["1"], "platform": "kiln",
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}]}
lock = threading.Lock()
stats = {"infer": 0, "binary": 0, "json": 0, "bad": 0, "ids": 0, "timeout": None,
         "priority": None, "connections": 0, "last_bad": ""}


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive

    def log_message(self, *a):
        pass

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with lock:
            stats["connections"] += 1

    def send(self, code, body, ctype="application/json", extra=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/v2/models/mock":
            return self.send(200, META)
        if self.path == "/stats":
            with lock:
                return self.send(200, stats)
        self.send(404, {"error": "no route " + self.path})

    def bad(self, why):
        with lock:
            stats["bad"] += 1
            stats["last_bad"] = why
        self.send(400, {"error": why})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        if self.path != "/v2/models/mock/infer":
            return self.send(404, {"error": "no route " + self.path})
        with lock:
            stats["infer"] += 1
            k = stats["infer"]
        hl = self.headers.get("Inference-Header-Content-Length")
        try:
            head = json.loads(body[:int(hl)] if hl is not None else body)
        except Exception as e:
            return self.bad("header is not JSON: %s" % e)
        binary = body[int(hl):] if hl is not None else b""
        inp = head.get("inputs")
        if not isinstance(inp, list) or len(inp) != 1 or inp[0].get("name") != "x":
            return self.bad("inputs must be [x]")
        x = inp[0]
        if x.get("datatype") != "FP32" or not isinstance(x.get("shape"), list) or \
                len(x["shape"]) != 2 or x["shape"][1] != 4:
            return self.bad("x must be FP32 [n, 4]")
        numel = x["shape"][0] * 4
        size = (x.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            if hl is None or size != numel * 4 or len(binary) != size:
                return self.bad("binary_data_size %r, body has %d bytes after a header of %r"
                                % (size, len(binary), hl))
            vals = list(struct.unpack("<%df" % numel, binary))
            kind = "binary"
        else:
            vals = x.get("data")
            if not isinstance(vals, list) or len(vals) != numel or binary:
                return self.bad("x's data must hold %d numbers" % numel)
            kind = "json"
        params = head.get("parameters") or {}
        outs = head.get("outputs") or [{"name": "y"}]
        want_bin = any((o.get("parameters") or {}).get("binary_data") for o in outs)
        with lock:
            stats[kind] += 1
            stats["ids"] += "id" in head
            stats["timeout"] = params.get("timeout", stats["timeout"])
            stats["priority"] = params.get("priority", stats["priority"])
        if delay:
            time.sleep(delay)
        if fail_every and k % fail_every == 0:
            return self.send(503, {"error": "mock: every %d-th request fails" % fail_every})
        y = [2 * v for v in vals]
        out = {"name": "y", "datatype": "FP32", "shape": x["shape"]}
        resp = {"model_name": "mock", "model_version": "1", "outputs": [out]}
        if "id" in head:
            resp["id"] = head["id"]
        if want_bin:
            data = struct.pack("<%df" % numel, *y)
            if corrupt_every and k % corrupt_every == 0:
                data = data[:-4]  # a 200 whose binary output is cut short
            out["parameters"] = {"binary_data_size": len(data)}
            j = json.dumps(resp).encode()
            return self.send(200, j + data, "application/octet-stream",
                             {"Inference-Header-Content-Length": str(len(j))})
        out["data"] = y
        self.send(200, resp)


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
