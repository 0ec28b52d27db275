#!/usr/bin/env python3
"""A real test receiver for the server's outgoing webhooks and xAPI statements.

Swift tests start it as a separate process, and `make demo` runs it beside the server, so what
the server sends is checked by code that is not the server's own: HMAC signatures, idempotency
keys, durability across a restart, and xAPI statements validated with the PyPI `tincan` library
(python3 -m pip install tincan).

  POST /hooks              webhook batch {"sink": ..., "changes": [...]}, signed with
                           Outpost-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t "." body)>
                           and carrying an Idempotency-Key
  POST /xAPI/statements    one statement or an array of them (X-Experience-API-Version: 1.0.3, Basic auth)
  GET  /stats              counters of this process (since it started)
  GET  /changes            every recorded change, in order (from the store, so a restart keeps them)
  GET  /xAPI/statements    {"statements": [...]}, every recorded statement, in order

Store (--store DIR): changes.jsonl, keys.txt, statements.jsonl. Every write is fsync'ed before
the 2xx answer, and a restarted receiver reloads them, so it still deduplicates.

Example:
  scripts/sink-receiver.py --port 0 --port-file /tmp/sink.port --store /tmp/sink \\
      --secret-file /tmp/sink.secret --xapi-user lrs --xapi-password secret
"""
import argparse
import base64
import binascii
import datetime
import hashlib
import hmac
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    import tincan
except ImportError:
    sys.exit("sink-receiver needs the PyPI package tincan: python3 -m pip install tincan")

SIGNATURE_TOLERANCE = 300  # seconds between the signature's t and now, either way
MAX_BODY = 16 * 1024 * 1024
XAPI_VERSION = "1.0.3"
COUNTERS = ("batches", "changes", "duplicates", "bad_signatures", "rejected", "failed",
            "statements", "statement_duplicates", "invalid_statements")


class BadRequest(Exception):
    """A request the receiver answers with a 4xx and a JSON error body."""

    def __init__(self, status, message, **extra):
        super().__init__(message)
        self.status = status
        self.body = {"error": message, **extra}


def json_loads(data):
    # NaN and Infinity are not JSON; refusing them keeps what /changes serves readable by any client.
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(data, parse_constant=refuse)


def json_line(value):
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def read_jsonl(path):
    """The complete lines of a JSONL file. A crash mid-append can leave a partial last line: that
    write was never acknowledged, so it is cut off (else the next append would join onto it)."""
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        data = f.read()
    end = data.rfind(b"\n") + 1
    if end != len(data):
        truncate(path, end)
    return [json_loads(line) for line in data[:end].splitlines() if line.strip()]


def truncate(path, size):
    with open(path, "r+b") as f:
        f.truncate(size)
        f.flush()
        os.fsync(f.fileno())


class Store:
    """Durable state and counters, all behind one lock (the server runs a thread per connection)."""

    def __init__(self, directory):
        os.makedirs(directory, exist_ok=True)
        self.lock = threading.Lock()
        self.counts = dict.fromkeys(COUNTERS, 0)
        self.changes_path = os.path.join(directory, "changes.jsonl")
        self.keys_path = os.path.join(directory, "keys.txt")
        self.statements_path = os.path.join(directory, "statements.jsonl")

        # keys.txt is the commit record of a batch: its key is appended (and fsync'ed) only after
        # all its changes are. Changes at the end of changes.jsonl whose key never got there belong
        # to a batch that was never acknowledged; the sender retries it, so they are dropped.
        self.keys = set()
        if os.path.exists(self.keys_path):
            with open(self.keys_path, "rb") as f:
                data = f.read()
            end = data.rfind(b"\n") + 1
            if end != len(data):
                truncate(self.keys_path, end)
            self.keys = {line for line in data[:end].decode().splitlines() if line}
        records = read_jsonl(self.changes_path)
        committed = 0
        while committed < len(records) and records[committed]["key"] in self.keys:
            committed += 1
        if committed < len(records):
            with open(self.changes_path, "rb") as f:
                lines = f.read().splitlines(keepends=True)
            truncate(self.changes_path, sum(len(line) for line in lines[:committed]))
        self.recorded_changes = [record["change"] for record in records[:committed]]

        self.recorded_statements = read_jsonl(self.statements_path)
        self.statement_ids = {statement["id"] for statement in self.recorded_statements}

        self.changes_file = open(self.changes_path, "ab")
        self.keys_file = open(self.keys_path, "ab")
        self.statements_file = open(self.statements_path, "ab")
        # The files may be new: their directory entries must be durable too.
        directory_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)

    @staticmethod
    def append(file, data):
        file.write(data)
        file.flush()
        os.fsync(file.fileno())

    def count(self, name):
        with self.lock:
            self.counts[name] += 1


class Receiver(ThreadingHTTPServer):
    # A keep-alive connection's thread may wait for a next request for a long time; closing the
    # server must not wait for it (SIGTERM takes the store's lock instead, see main).
    block_on_close = False

    def __init__(self, port, handler, options, store):
        super().__init__(("127.0.0.1", port), handler)
        self.options = options
        self.store = store


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 keeps connections alive as the server's HTTP client expects; every answer carries a
    # Content-Length and every request body is read before answering, so the stream stays in step.
    protocol_version = "HTTP/1.1"
    server_version = "sink-receiver"
    sys_version = ""
    timeout = 60  # an idle keep-alive connection is closed after this

    # -- plumbing -----------------------------------------------------------------------------

    def log_request(self, code="-", size="-"):
        sys.stderr.write(f"{self.command} {self.path} {int(code)}\n")

    def log_message(self, format, *args):
        sys.stderr.write(f"sink-receiver: {format % args}\n")

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return bytes(body)
                body += self.rfile.read(size)
                self.rfile.readline()
                if len(body) > MAX_BODY:
                    raise BadRequest(413, "body too large")
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0 or length > MAX_BODY:
            raise BadRequest(413, "body too large")
        return self.rfile.read(length)

    def answer(self, status, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def dispatch(self, routes):
        path = urllib.parse.urlsplit(self.path).path
        try:
            body = self.read_body()
        except (ValueError, BadRequest) as error:
            # Where the body ends is unknown now: answer and drop the connection.
            self.close_connection = True
            status = error.status if isinstance(error, BadRequest) else 400
            self.answer(status, {"error": f"unreadable body: {error}"})
            return
        route = routes.get(path)
        if route is None:
            self.answer(404, {"error": "not found"})
            return
        try:
            route(body)
        except BadRequest as error:
            self.answer(error.status, error.body, self.xapi_headers(path))

    @staticmethod
    def xapi_headers(path):
        # An LRS names its xAPI version on every xAPI answer.
        return [("X-Experience-API-Version", XAPI_VERSION)] if path.startswith("/xAPI/") else []

    def do_GET(self):
        self.dispatch({"/stats": self.get_stats, "/changes": self.get_changes,
                       "/xAPI/statements": self.get_statements})

    def do_POST(self):
        self.dispatch({"/hooks": self.post_hooks, "/xAPI/statements": self.post_statements})

    def do_other(self):
        self.dispatch({})

    do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_other

    # -- inspection -----------------------------------------------------------------------------

    def get_stats(self, body):
        store = self.server.store
        with store.lock:
            counts = dict(store.counts)
        self.answer(200, counts)

    def get_changes(self, body):
        store = self.server.store
        with store.lock:
            changes = list(store.recorded_changes)
        self.answer(200, changes)

    def get_statements(self, body):
        store = self.server.store
        with store.lock:
            statements = list(store.recorded_statements)
        self.answer(200, {"statements": statements}, self.xapi_headers("/xAPI/"))

    # -- webhooks -------------------------------------------------------------------------------

    def post_hooks(self, body):
        store, options = self.server.store, self.server.options
        with store.lock:
            failing = store.counts["failed"] < options.fail_first
            if failing:
                store.counts["failed"] += 1
        if failing:
            self.answer(503, {"error": "failing on purpose (--fail-first)"}, [("Retry-After", "1")])
            return

        reason = self.signature_problem(body, options.secret)
        if reason:
            store.count("bad_signatures")
            raise BadRequest(401, reason)

        key = self.headers.get("Idempotency-Key", "").strip()
        if not key or "\n" in key or "\r" in key:
            raise BadRequest(400, "Idempotency-Key header required")

        with store.lock:
            if key in store.keys:
                store.counts["duplicates"] += 1
                self.answer(200, {"duplicate": True})
                return

        try:
            batch = json_loads(body)
        except ValueError as error:
            raise BadRequest(400, f"body is not JSON: {error}")
        if not isinstance(batch, dict) or not isinstance(batch.get("changes"), list) \
                or not all(isinstance(change, dict) for change in batch["changes"]) \
                or not isinstance(batch.get("sink", ""), str):
            raise BadRequest(400, 'body must be {"sink": "...", "changes": [{...}, ...]}')
        changes = batch["changes"]

        if options.reject_contract is not None:
            for index, change in enumerate(changes):
                if change.get("contract") == options.reject_contract:
                    store.count("rejected")
                    raise BadRequest(422, f"contract {options.reject_contract} is refused by this sink",
                                     index=index)

        with store.lock:
            # Checked again: the same key may have been accepted by another thread meanwhile.
            if key in store.keys:
                store.counts["duplicates"] += 1
                self.answer(200, {"duplicate": True})
                return
            store.append(store.changes_file,
                         b"".join(json_line({"key": key, "change": change}) for change in changes))
            store.append(store.keys_file, key.encode() + b"\n")
            store.keys.add(key)
            store.recorded_changes.extend(changes)
            store.counts["batches"] += 1
            store.counts["changes"] += len(changes)
        self.answer(200, {"accepted": len(changes)})

    def signature_problem(self, body, secret):
        """Why the Outpost-Signature header does not prove the body came from the server, or None."""
        header = self.headers.get("Outpost-Signature")
        if not header:
            return "Outpost-Signature header missing"
        timestamp, signatures = None, []
        for part in header.split(","):
            name, _, value = part.strip().partition("=")
            if name == "t":
                timestamp = value
            elif name == "v1":
                signatures.append(value)  # several v1 values are allowed while a secret is rotated
        if timestamp is None or not timestamp.isascii() or not timestamp.isdigit() or not signatures:
            return "Outpost-Signature must be t=<unix seconds>,v1=<hex>"
        if abs(time.time() - int(timestamp)) > SIGNATURE_TOLERANCE:
            return "Outpost-Signature timestamp is more than 300 s away from now"
        expected = hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
        if not any(hmac.compare_digest(expected.encode(), signature.strip().lower().encode())
                   for signature in signatures):
            return "Outpost-Signature does not match the body"
        return None

    # -- xAPI -----------------------------------------------------------------------------------

    def post_statements(self, body):
        store, options = self.server.store, self.server.options
        if self.headers.get("X-Experience-API-Version") != XAPI_VERSION:
            raise BadRequest(400, f"X-Experience-API-Version: {XAPI_VERSION} required")
        if not self.authorized(options):
            raise BadRequest(401, "Basic credentials required")
        try:
            statements = json_loads(body)
        except ValueError as error:
            store.count("invalid_statements")
            raise BadRequest(400, f"body is not JSON: {error}", index=None)
        if isinstance(statements, dict):
            statements = [statements]
        if not isinstance(statements, list):
            store.count("invalid_statements")
            raise BadRequest(400, "body must be a statement or an array of statements", index=None)
        for index, statement in enumerate(statements):
            reason = statement_problem(statement)
            if reason:
                store.count("invalid_statements")
                raise BadRequest(400, "invalid statement", index=index, reason=reason)

        with store.lock:
            new, new_ids = [], set()
            for statement in statements:
                if statement["id"] in store.statement_ids or statement["id"] in new_ids:
                    store.counts["statement_duplicates"] += 1
                else:
                    new.append(statement)
                    new_ids.add(statement["id"])
            if new:
                store.append(store.statements_file, b"".join(json_line(s) for s in new))
                store.statement_ids.update(new_ids)
                store.recorded_statements.extend(new)
                store.counts["statements"] += len(new)
        self.answer(200, [statement["id"] for statement in statements], self.xapi_headers("/xAPI/"))

    def authorized(self, options):
        if options.xapi_user is None:
            return True
        scheme, _, encoded = self.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            given = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        expected = f"{options.xapi_user}:{options.xapi_password}".encode()
        return hmac.compare_digest(given, expected)


def is_iri(value):
    if not isinstance(value, str) or any(c.isspace() for c in value):
        return False
    parts = urllib.parse.urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def statement_problem(statement):
    """Why a statement is not one an LRS should store, or None. tincan checks the structure (known
    properties only, the id's UUID form, ISO 8601 timestamps with a time zone and durations, language
    maps); it leaves most properties optional and IRIs unchecked, which the checks after it add."""
    if not isinstance(statement, dict):
        return "a statement must be a JSON object"
    try:
        tincan.Statement.from_json(json.dumps(statement))
    except Exception as error:
        message = " ".join(str(error).split())
        return f"tincan: {type(error).__name__}: {message[:300]}"

    statement_id = statement.get("id")
    try:
        uuid.UUID(statement_id)
    except (TypeError, ValueError, AttributeError):
        return "id must be a UUID"

    actor = statement.get("actor")
    if not isinstance(actor, dict) or actor.get("objectType", "Agent") != "Agent":
        return "actor must be an Agent"
    account, mbox = actor.get("account"), actor.get("mbox")
    if account is not None:
        if not isinstance(account, dict) or not is_iri(account.get("homePage")) \
                or not isinstance(account.get("name"), str) or not account["name"]:
            return "actor.account must have homePage (an IRI) and name"
    elif not (isinstance(mbox, str) and mbox.startswith("mailto:") and "@" in mbox):
        return "actor must have account {homePage, name} or mbox (mailto:)"

    verb = statement.get("verb")
    if not isinstance(verb, dict) or not is_iri(verb.get("id")):
        return "verb.id must be an IRI (http or https)"

    target = statement.get("object")
    if not isinstance(target, dict) or not is_iri(target.get("id")):
        return "object.id must be an IRI (http or https)"

    timestamp = statement.get("timestamp")
    try:
        parsed = datetime.datetime.fromisoformat(timestamp)
    except (TypeError, ValueError):
        return "timestamp must be an ISO 8601 string"
    if parsed.tzinfo is None:
        return "timestamp must have a time zone"
    return None


def write_port_file(path, port):
    # Written beside its final name and renamed, so a reader sees no file or the whole number.
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as f:
        f.write(f"{port}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    parser.add_argument("--port-file", help="write the bound port here")
    parser.add_argument("--store", required=True, help="durable state directory")
    parser.add_argument("--secret-file", required=True, help="the webhook HMAC secret")
    parser.add_argument("--fail-first", type=int, default=0, metavar="N",
                        help="answer the first N webhook POSTs with 503")
    parser.add_argument("--reject-contract", metavar="NAME",
                        help="answer 422 to a batch with a change of this contract")
    parser.add_argument("--xapi-user", help="Basic user the xAPI endpoint requires")
    parser.add_argument("--xapi-password", help="Basic password the xAPI endpoint requires")
    options = parser.parse_args()
    if (options.xapi_user is None) != (options.xapi_password is None):
        parser.error("--xapi-user and --xapi-password go together")
    with open(options.secret_file, "rb") as f:
        options.secret = f.read().rstrip(b"\r\n")

    store = Store(options.store)
    server = Receiver(options.port, Handler, options, store)
    port = server.server_address[1]

    def stop(signum, frame):
        # shutdown() waits for serve_forever to return, so it must not run on the thread serving.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    if options.port_file:
        write_port_file(options.port_file, port)
    print(f"sink-receiver listening on 127.0.0.1:{port}", flush=True)
    server.serve_forever()
    server.server_close()
    # Taking the lock waits for a write in progress; handler threads still alive are daemons and
    # stop with the process, none of them in the middle of a write.
    with store.lock:
        sys.stderr.write("sink-receiver stopped\n")
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
