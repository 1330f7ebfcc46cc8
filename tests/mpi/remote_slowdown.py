"""A test proxy in front of an S3 server that answers like an overloaded S3:
requests 1, 3, 5, ... get 503 SlowDown or 500 InternalError (alternately),
the others are passed through unchanged (same path, query and headers, so the
signature still matches). Used by tests/mpi/remote_faults.sh.

    python3 remote_slowdown.py LISTEN_PORT SERVER_PORT
"""
import http.client
import http.server
import sys
import threading

listen, server = int(sys.argv[1]), int(sys.argv[2])
lock = threading.Lock()
count = [0]

ERR = ('<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
       '<Message>{msg}</Message></Error>')


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        with lock:
            count[0] += 1
            k = count[0]
        if k % 2 == 1:
            status, code = (503, "SlowDown") if k % 4 == 1 else (500, "InternalError")
            text = ERR.format(code=code, msg="test proxy").encode()
            print(f"{self.command} {self.path} {status} {code}", flush=True)
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
            return
        conn = http.client.HTTPConnection("127.0.0.1", server, timeout=60)
        headers = {h: v for h, v in self.headers.items() if h.lower() != "connection"}
        conn.request(self.command, self.path, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        print(f"{self.command} {self.path} {r.status} passed", flush=True)
        self.send_response(r.status)
        for h, v in r.getheaders():
            if h.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(h, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", listen), Proxy).serve_forever()
