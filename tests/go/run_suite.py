#!/usr/bin/env python3
"""The official Go client's own test suite (github.com/apache/pulsar-client-go) against a broker.

  run_suite.py --broker magnetar|pulsar [--ci] [--run REGEX] [--json FILE] [--log-dir DIR]
               [--repeat N] [--with-excluded]
  run_suite.py --prepare            (download the module and its dependencies; install-test-deps)
  run_suite.py --compare A.json B.json

Starts Magnetar (or the reference Pulsar, tools/pulsar-reference) configured as the Go suite's own
CI configures Pulsar: the module's integration-tests/conf/standalone.conf with its certificates and
tokens (TLS listeners, token, TLS and basic authentication, authorization, super-users), on the
fixed ports the tests use (localhost 6650, 6651, 8080, 8443). Replays the set-up of the module's
scripts/pulsar-test-service-start.sh over REST, as its super-user, then runs every test of package
./pulsar and its subpackages, each in its own run of the package's test binary (a panic or a hang
ends one test, not the suite), less tests/go/excluded.txt (and, on Magnetar, MAGNETAR_NOT_YET:
the transaction tests, issue 45). --ci runs tests/go/ci_tests.txt only.
Prints a line per test, the failing tests, and 'N passed, N failed, N skipped'; exits 1 when a
test failed. --json writes the per-test results; --compare prints the tests whose result differs
between two such files (the Magnetar run against the Pulsar run).

The module is taken from the Go module cache (scripts/install-test-deps.sh runs --prepare; nothing
is fetched here) and copied to a writable work directory, by default .deps/go/ (git-ignored).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests"))
from harness.broker import (  # noqa: E402
    BrokerError,
    MagnetarProcess,
    PulsarReferenceProcess,
    tail,
)

MODULE = "github.com/apache/pulsar-client-go"
VERSION = "v0.19.0"
PACKAGES = "./pulsar/..."
DEFAULT_WORK = os.path.join(REPO, ".deps", "go")
EXCLUDED_FILE = os.path.join(HERE, "excluded.txt")
# Tests excluded on --broker magnetar only (they pass on the reference Pulsar), with the reason,
# as excluded.txt lines: (PACKAGE.TestName pattern, reason). Empty: every test the reference
# passes runs on Magnetar too (the transaction tests, issue 45, included; the suite's
# standalone.conf has transactionCoordinatorEnabled=true).
MAGNETAR_NOT_YET: list[tuple[str, str]] = []
CI_FILE = os.path.join(HERE, "ci_tests.txt")
# The ports the tests name (pulsar/helper_for_test.go and others): localhost only.
BROKER_PORT, BROKER_PORT_TLS, WEB_PORT, WEB_PORT_TLS = 6650, 6651, 8080, 8443


def go_binary() -> str:
    """The go command: PATH, else /usr/local/go/bin/go."""
    found = shutil.which("go") or "/usr/local/go/bin/go"
    if not os.access(found, os.X_OK):
        sys.exit("run_suite: no go command (PATH or /usr/local/go/bin)")
    return found


def go_env(offline: bool) -> dict[str, str]:
    """The environment of go commands: the machine's toolchain only; offline: no module fetch."""
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=readonly -buildvcs=false")
    if offline:
        env["GOPROXY"] = "off"
    return env


def module_cache_dir(offline: bool) -> tuple[str, str]:
    """(directory, h1 sum) of MODULE@VERSION in the module cache; downloads it unless offline."""
    res = subprocess.run([go_binary(), "mod", "download", "-json", f"{MODULE}@{VERSION}"],
                         capture_output=True, text=True, env=go_env(offline),
                         cwd=tempfile.gettempdir())
    try:
        info = json.loads(res.stdout)
    except json.JSONDecodeError:
        info = {}
    if res.returncode != 0 or "Dir" not in info or info.get("Error"):
        hint = " (run scripts/install-test-deps.sh)" if offline else ""
        sys.exit(f"run_suite: {MODULE}@{VERSION} not in the module cache{hint}: "
                 f"{info.get('Error') or res.stderr.strip()}")
    return info["Dir"], info["Sum"]


def work_copy(work_root: str, offline: bool) -> str:
    """A writable copy of the module under work_root (made again when the module's sum differs).
    Returns its directory."""
    src, h1 = module_cache_dir(offline)
    dst = os.path.join(work_root, f"pulsar-client-go@{VERSION}")
    stamp = os.path.join(dst, ".magnetar-copy-of")
    try:
        with open(stamp) as f:
            fresh = f.read().strip() == h1
    except OSError:
        fresh = False
    if not fresh:
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst)
        for root, dirs, files in os.walk(dst):
            for name in dirs + files:
                path = os.path.join(root, name)
                os.chmod(path, os.stat(path).st_mode | 0o200)
        os.chmod(dst, os.stat(dst).st_mode | 0o200)
        with open(stamp, "w") as f:
            f.write(h1 + "\n")
    return dst


def prepare(work_root: str) -> None:
    """Downloads the module and its dependencies (go mod download) through the module proxy."""
    dst = work_copy(work_root, offline=False)
    subprocess.run([go_binary(), "mod", "download"], cwd=dst, env=go_env(False), check=True)
    print(f"run_suite: {MODULE}@{VERSION} and its dependencies ready; work copy {dst}")


# ---- broker configuration ------------------------------------------------------------------

def read_conf(path: str) -> list[tuple[str, str]]:
    """key=value lines of a Pulsar .conf file, in order."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.partition("=")
                out.append((key.strip(), value.strip()))
    return out


def suite_settings(module: str) -> list[tuple[str, str]]:
    """The module's integration-tests/conf/standalone.conf for this machine: its /pulsar/certs and
    /pulsar/tokens paths point into the module copy, the Dockerfile's -Dpulsar.auth.basic.conf
    becomes basicAuthConf (the same file), and the broker binds 127.0.0.1 only (the tests dial
    localhost). Every other line as written: the keys Magnetar does not know are ignored with a
    warning when it reads the file, as a Pulsar broker ignores keys it has no field for."""
    it = os.path.join(module, "integration-tests")
    settings = []
    for key, value in read_conf(os.path.join(it, "conf", "standalone.conf")):
        value = value.replace("/pulsar/certs/", os.path.join(it, "certs") + "/")
        value = value.replace("/pulsar/tokens/", os.path.join(it, "tokens") + "/")
        if key == "bindAddress":
            value = "127.0.0.1"
        settings.append((key, value))
    settings.append(("basicAuthConf", "file://" + os.path.join(it, "conf", ".htpasswd")))
    return settings


def admin_token(module: str) -> str:
    with open(os.path.join(module, "integration-tests", "tokens", "admin-token")) as f:
        return f.read().strip()


def check_ports_free() -> None:
    busy = []
    for port in (BROKER_PORT, BROKER_PORT_TLS, WEB_PORT, WEB_PORT_TLS):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                busy.append(port)
    if busy:
        sys.exit(f"run_suite: port(s) {busy} in use; the Go tests dial localhost:6650/6651/8080/"
                 "8443, so the broker needs them (is another broker or run_suite running?)")


class Broker:
    """The broker of a run: started with the suite's configuration, restarted if it dies."""

    def __init__(self, kind: str, module: str, run_dir: str) -> None:
        self.kind = kind
        self.module = module
        self.run_dir = run_dir
        self.proc: MagnetarProcess | PulsarReferenceProcess | None = None
        self.starts = 0

    def start(self) -> None:
        settings = suite_settings(self.module)
        self.starts += 1
        if self.kind == "magnetar":
            # Magnetar reads the Pulsar .conf file as it is (-c); the harness's --set options
            # (ports, data under the working directory) come on top of it.
            conf = os.path.join(self.run_dir, "standalone.conf")
            with open(conf, "w") as f:
                f.writelines(f"{k}={v}\n" for k, v in settings)
            workdir = os.path.join(self.run_dir, f"magnetar-{self.starts}")
            os.makedirs(workdir, exist_ok=True)
            proc = MagnetarProcess([f"webServicePort={WEB_PORT}"], workdir=workdir,
                                   args=["-c", conf])
            self.proc = proc
            proc.start(port=BROKER_PORT)
        else:
            workdir = os.path.join(self.run_dir, f"pulsar-{self.starts}")
            proc = PulsarReferenceProcess(
                [f"{k}={v}" for k, v in settings], workdir=workdir, broker_port=BROKER_PORT,
                web_port=WEB_PORT, health_token=admin_token(self.module))
            self.proc = proc
            proc.start()
        replay_setup(self.module)

    def alive(self) -> bool:
        if isinstance(self.proc, MagnetarProcess):
            return self.proc.running()
        if isinstance(self.proc, PulsarReferenceProcess) and self.proc.pid:
            try:
                os.kill(self.proc.pid, 0)
                return True
            except OSError:
                return False
        return False

    @property
    def log_path(self) -> str | None:
        return self.proc.endpoint.log_path if self.proc and self.proc.endpoint else None

    def close(self) -> None:
        if self.proc:
            self.proc.close()


# ---- the set-up of scripts/pulsar-test-service-start.sh, over REST --------------------------

def admin_request(module: str, method: str, path: str, body: object = None) -> object:
    """An admin REST call as the suite's pulsar-admin makes it (integration-tests/conf/client.conf:
    https://localhost:8443 with the client certificate, CN=admin, a super-user)."""
    certs = os.path.join(module, "integration-tests", "certs")
    ctx = ssl.create_default_context(cafile=os.path.join(certs, "cacert.pem"))
    ctx.load_cert_chain(os.path.join(certs, "client-cert.pem"),
                        os.path.join(certs, "client-key.pem"))
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"https://localhost:{WEB_PORT_TLS}{path}", data=data,
                                 method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
        text = resp.read().decode()
    return json.loads(text) if text.strip() else None


def replay_setup(module: str) -> None:
    """pulsar-test-service-start.sh's pulsar-admin commands: tenant public's admin role anonymous;
    produce,consume on public/default for anonymous; tenant private; namespace private/auth with
    produce,consume for token-principal."""
    deadline = time.time() + 60
    while True:  # the TLS web port and public/default come up with the broker, maybe a bit later
        try:
            public = admin_request(module, "GET", "/admin/v2/tenants/public")
            admin_request(module, "GET", "/admin/v2/namespaces/public/default/permissions")
            break
        except (OSError, urllib.error.URLError) as e:
            if time.time() > deadline:
                raise BrokerError(f"set-up: the broker's admin API did not answer: {e}") from e
            time.sleep(0.5)
    assert isinstance(public, dict)
    # tenants update public -r anonymous (pulsar-admin keeps the allowed clusters)
    admin_request(module, "POST", "/admin/v2/tenants/public",
                  {"adminRoles": ["anonymous"], "allowedClusters": public.get("allowedClusters")})
    admin_request(module, "POST", "/admin/v2/namespaces/public/default/permissions/anonymous",
                  ["produce", "consume"])
    # tenants create private (pulsar-admin: every cluster when none is given)
    clusters = admin_request(module, "GET", "/admin/v2/clusters")
    admin_request(module, "PUT", "/admin/v2/tenants/private",
                  {"adminRoles": [], "allowedClusters": clusters})
    admin_request(module, "PUT", "/admin/v2/namespaces/private/auth")
    admin_request(module, "POST", "/admin/v2/namespaces/private/auth/permissions/token-principal",
                  ["produce", "consume"])


# ---- tests -----------------------------------------------------------------------------------

def read_name_list(path: str) -> list[tuple[str, str]]:
    """(pattern, rest of the line) of a list file: the first word of each line is a test name
    (PACKAGE.TestName, fnmatch wildcards allowed), the rest its reason; # starts a comment line."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, rest = line.partition(" ")
                out.append((name, rest.strip()))
    return out


def build(module: str, bin_dir: str, only: list[str] | None = None) -> dict[str, str]:
    """Compiles the test binary of each package with tests (of those matching a pattern of `only`,
    when given); returns {package: binary}, the package relative to the module (pulsar,
    pulsar/internal, ...)."""
    go = go_binary()
    env = go_env(True)
    listing = subprocess.run(
        [go, "list", "-f", "{{.ImportPath}} {{len .TestGoFiles}} {{len .XTestGoFiles}}",
         PACKAGES], cwd=module, env=env, capture_output=True, text=True, check=True).stdout
    pkgs = [line.split()[0] for line in listing.splitlines()
            if line.split()[1] != "0" or line.split()[2] != "0"]
    if only is not None:
        pkgs = [p for p in pkgs if any(fnmatch.fnmatchcase(p[len(MODULE) + 1:], o) for o in only)]
    os.makedirs(bin_dir, exist_ok=True)
    t0 = time.time()
    print(f"run_suite: compiling {len(pkgs)} test binaries ...", flush=True)
    subprocess.run([go, "test", "-c", "-vet=off", "-o", bin_dir + "/", *pkgs], cwd=module,
                   env=env, check=True)
    print(f"run_suite: compiled in {time.time() - t0:.0f} s", flush=True)
    binaries = {}
    for pkg in pkgs:
        rel = pkg[len(MODULE) + 1:]
        binary = os.path.join(bin_dir, pkg.rsplit("/", 1)[1] + ".test")
        if rel in binaries.values() or not os.path.exists(binary):
            sys.exit(f"run_suite: no test binary {binary} for {pkg}")
        binaries[rel] = binary
    return binaries


def list_tests(module: str, binaries: dict[str, str]) -> list[tuple[str, str]]:
    """(package, name) of every test and example of the binaries."""
    tests = []
    for pkg, binary in binaries.items():
        out = subprocess.run([binary, "-test.list", "."], cwd=os.path.join(module, pkg),
                             capture_output=True, text=True, check=True).stdout
        tests += [(pkg, n) for n in out.split() if n.startswith(("Test", "Example"))]
    return tests


def matches(patterns: list[tuple[str, str]], pkg: str, name: str) -> str | None:
    """The reason of the first pattern matching pkg.name, None when none does."""
    for pattern, reason in patterns:
        if fnmatch.fnmatchcase(f"{pkg}.{name}", pattern):
            return reason
    return None


def run_test(module: str, pkg: str, binary: str, name: str, log_path: str,
             timeout_s: int) -> tuple[str, float]:
    """Runs one test in its own process; returns (pass|fail|skip, seconds)."""
    cmd = [binary, "-test.run", f"^{re.escape(name)}$", "-test.count=1", "-test.v",
           f"-test.timeout={timeout_s}s"]
    t0 = time.time()
    with open(log_path, "w") as log:
        try:
            rc = subprocess.call(cmd, cwd=os.path.join(module, pkg), stdout=log,
                                 stderr=subprocess.STDOUT, timeout=timeout_s + 60)
        except subprocess.TimeoutExpired:
            rc = -9
            log.write(f"\nrun_suite: killed after {timeout_s + 60} s\n")
    seconds = time.time() - t0
    with open(log_path, errors="replace") as f:
        text = f.read()
    m = re.search(rf"^--- (PASS|FAIL|SKIP): {re.escape(name)} ", text, re.M)
    status = m.group(1).lower() if m else "fail"
    if status == "pass" and rc != 0:
        status = "fail"  # passed, then the process failed (a goroutine's panic, TestMain)
    return status, seconds


def compare(a_path: str, b_path: str) -> int:
    """Prints the tests whose status differs between two --json files."""
    with open(a_path) as f:
        a = json.load(f)
    with open(b_path) as f:
        b = json.load(f)
    ra = {f"{r['package']}.{r['name']}": r["status"] for r in a["results"]}
    rb = {f"{r['package']}.{r['name']}": r["status"] for r in b["results"]}
    ka, kb = a.get("broker", a_path), b.get("broker", b_path)
    diff = sorted(n for n in set(ra) | set(rb) if ra.get(n) != rb.get(n))
    print(f"{'test':70} {ka:>10} {kb:>10}")
    for n in diff:
        print(f"{n:70} {ra.get(n, '-'):>10} {rb.get(n, '-'):>10}")
    print(f"{len(diff)} tests differ")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", choices=["magnetar", "pulsar"], default="magnetar")
    parser.add_argument("--ci", action="store_true", help="only the tests of tests/go/ci_tests.txt")
    parser.add_argument("--run", metavar="REGEX", help="only tests whose PACKAGE.Name matches")
    parser.add_argument("--json", metavar="FILE", help="write the per-test results here")
    parser.add_argument("--log-dir", metavar="DIR",
                        help="per-test output and broker data (default: a temporary directory, "
                             "removed after a run without failures)")
    parser.add_argument("--work-dir", default=DEFAULT_WORK,
                        help="where the module is copied and built (default .deps/go)")
    parser.add_argument("--with-excluded", action="store_true",
                        help="run the tests of excluded.txt and MAGNETAR_NOT_YET too "
                             "(with --run: a flaky one's rate)")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run each chosen test N times, one broker start (a flaky test's rate)")
    parser.add_argument("--test-timeout", type=int, default=300, metavar="S",
                        help="per-test timeout in seconds (default 300)")
    parser.add_argument("--prepare", action="store_true",
                        help="download the module and its dependencies, then exit")
    parser.add_argument("--compile-only", action="store_true",
                        help="compile the test binaries (of --ci's list with --ci), then exit: "
                             "fills the Go build cache ahead of a run (scripts/test.sh does it "
                             "in the background)")
    parser.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"),
                        help="print the tests whose result differs, then exit")
    args = parser.parse_args()
    if args.repeat < 1:
        sys.exit("run_suite: --repeat must be at least 1")
    if args.compare:
        return compare(*args.compare)
    if args.prepare:
        prepare(args.work_dir)
        return 0

    t_start = time.time()
    module = work_copy(args.work_dir, offline=True)
    excluded = read_name_list(EXCLUDED_FILE)
    if args.broker == "magnetar":
        excluded += MAGNETAR_NOT_YET
    chosen = read_name_list(CI_FILE) if args.ci else None
    # --ci compiles only the packages its list names (the pattern before the test name's dot).
    only = sorted({p.rsplit(".", 1)[0] for p, _ in chosen}) if chosen is not None else None
    if args.compile_only:
        build(module, os.path.join(args.work_dir, "bin-prebuilt"), only)
        return 0
    check_ports_free()
    binaries = build(module, os.path.join(args.work_dir, "bin"), only)
    tests = list_tests(module, binaries)
    if chosen is not None:
        unknown = [p for p, _ in chosen
                   if not any(fnmatch.fnmatchcase(f"{k}.{n}", p) for k, n in tests)]
        if unknown:
            sys.exit(f"run_suite: {CI_FILE} names tests that do not exist: {unknown}")
    results, skipped_by_list = [], []
    to_run = []
    for pkg, name in tests:
        reason = None if args.with_excluded else matches(excluded, pkg, name)
        if reason is not None:
            skipped_by_list.append({"package": pkg, "name": name, "reason": reason})
            continue
        if chosen is not None and matches(chosen, pkg, name) is None:
            continue
        if args.run and not re.search(args.run, f"{pkg}.{name}"):
            continue
        to_run.append((pkg, name))
    to_run = [t for t in to_run for _ in range(args.repeat)]

    log_dir = args.log_dir or tempfile.mkdtemp(prefix=f"go-suite-{args.broker}-")
    os.makedirs(os.path.join(log_dir, "tests"), exist_ok=True)
    broker = Broker(args.broker, module, log_dir)
    print(f"run_suite: {len(to_run)} of {len(tests)} tests ({len(skipped_by_list)} excluded) "
          f"against {args.broker}; logs in {log_dir}", flush=True)
    restarts = []
    try:
        broker.start()
        for i, (pkg, name) in enumerate(to_run, 1):
            suffix = f".{(i - 1) % args.repeat + 1}" if args.repeat > 1 else ""
            log_path = os.path.join(log_dir, "tests",
                                    f"{pkg.replace('/', '_')}.{name}{suffix}.log")
            status, seconds = run_test(module, pkg, binaries[pkg], name, log_path,
                                       args.test_timeout)
            note = ""
            if not broker.alive():
                note = "the broker exited during this test; restarted"
                restarts.append(f"{pkg}.{name}")
                print(f"run_suite: broker exited during {pkg}.{name}:\n"
                      f"{tail(broker.log_path or '', 30)}", flush=True)
                broker.close()
                broker.start()
            results.append({"package": pkg, "name": name, "status": status,
                            "seconds": round(seconds, 2), "log": log_path, "note": note})
            print(f"[{i}/{len(to_run)}] {pkg}.{name} {status.upper()} {seconds:.1f}s {note}",
                  flush=True)
    finally:
        broker.close()

    counts = {s: sum(r["status"] == s for r in results) for s in ("pass", "fail", "skip")}
    failed = [r for r in results if r["status"] == "fail"]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"broker": args.broker, "module": f"{MODULE}@{VERSION}",
                       "mode": "ci" if args.ci else "full", "counts": counts,
                       "seconds": round(time.time() - t_start), "broker_restarts": restarts,
                       "results": results, "excluded": skipped_by_list}, f, indent=1)
    if failed:
        print("\nfailing tests (output in each log):")
        for r in failed:
            print(f"  {r['package']}.{r['name']}  {r['log']}")
    elif not args.log_dir:
        shutil.rmtree(log_dir, ignore_errors=True)
    print(f"\nGo client suite against {args.broker}: {len(skipped_by_list)} excluded, "
          f"{time.time() - t_start:.0f} s")
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
