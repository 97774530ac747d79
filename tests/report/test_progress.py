"""The progress display (cells, ETA, a long cell's segments) and the segment file a worker writes for it."""
import io
import json
import os
import subprocess
import sys
import time

from rich.console import Console

from fpdiff.report.progress import display
from fpdiff.runtime import progress as segments


def terminal() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(force_terminal=True, file=buf, width=120), buf


def worker(code: str, env: dict[str, str | None]) -> str:
    """Run `code` in a fresh interpreter (a worker's stand-in: the same module, the same environment rules)."""
    full = {k: v for k, v in os.environ.items() if k != segments.ENV}
    full.update({k: v for k, v in env.items() if v is not None})
    p = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_cells_done_of_total_with_elapsed_and_eta_on_a_terminal():
    console, buf = terminal()
    with display("loading the model", console=console) as progress:
        progress("torch cpu fp32 static", 0, 3)
        progress("torch cpu fp16 static", 1, 3)
        time.sleep(0.3)  # rich redraws ten times a second
    out = buf.getvalue()
    assert "torch cpu fp16 static" in out and "1/3 cells" in out
    assert "0:00:0" in out  # elapsed
    assert "-:--:--" in out or "0:00:" in out  # the time left (unknown until the rate is measured)


def test_unknown_total_and_long_names_are_shown_cut():
    console, buf = terminal()
    with display("generating graphs", unit="graphs", console=console) as progress:
        progress("x" * 200, 4, None)
    out = buf.getvalue()
    assert "4/? graphs" in out and "x" * 61 not in out and "x" * 60 in out


def test_a_worker_process_segments_show_under_the_cell_and_clear_with_the_next():
    console, buf = terminal()
    with display("check", console=console) as progress:
        path = os.environ[segments.ENV]
        progress("torch cpu fp64 reference", 0, 3)
        worker("from fpdiff.runtime.progress import segment; segment(7, 24, 'layers.6')", {segments.ENV: path})
        deadline = time.monotonic() + 5
        while "segment 7/24 (layers.6)" not in buf.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "segment 7/24 (layers.6)" in buf.getvalue()
        progress("torch cpu fp32 static", 1, 3)
        assert segments.read(path) is None  # the next cell starts from no segment
    assert segments.ENV not in os.environ and not os.path.exists(path)  # asked only while shown


def test_quiet_shows_nothing_and_asks_workers_for_nothing():
    console, buf = terminal()
    with display("check", console=console, enabled=False) as progress:
        progress("torch cpu fp32 static", 0, 3)
        assert segments.ENV not in os.environ
    assert buf.getvalue() == ""


def test_a_console_that_is_not_a_terminal_shows_nothing():
    buf = io.StringIO()
    with display("check", console=Console(file=buf, width=120)) as progress:
        progress("torch cpu fp32 static", 0, 3)
        time.sleep(0.2)
        assert segments.ENV not in os.environ
    assert buf.getvalue() == ""


def test_the_display_goes_to_stderr_by_default():
    """At a terminal on stderr with stdout piped: the bar is on stderr, stdout holds only what was printed."""
    code = ("import time\nfrom fpdiff.report.progress import display\n"
            "with display('check') as p:\n    p('torch cpu fp32 static', 1, 3)\n    time.sleep(0.3)\nprint('result')\n")
    import pty
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=slave,
                         env={**os.environ, "TERM": "xterm-256color"})
    os.close(slave)
    out, _ = p.communicate(timeout=120)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the pty's other end closed
            break
        if not chunk:
            break
        err += chunk
    os.close(master)
    assert out.decode() == "result\n"
    assert b"1/3 cells" in err


def test_segment_writes_what_the_parent_reads_at_most_ten_times_a_second(tmp_path):
    path = tmp_path / "segment.json"
    code = ("import json, time\nfrom fpdiff.runtime.progress import segment, read\nimport os\n"
            "p = os.environ['FPDIFF_PROGRESS']\nseen = []\n"
            "segment(1, 24, 'layers.0'); seen.append(read(p).done)\n"
            "segment(2, 24, 'layers.1'); seen.append(read(p).done)\n"  # too soon: skipped
            "time.sleep(0.15)\n"
            "segment(3, 24, 'layers.2'); seen.append(read(p).done)\n"
            "segment(24, 24, 'layers.23'); seen.append(read(p).done)\n"  # the last one always
            "print(json.dumps(seen))\n")
    assert json.loads(worker(code, {segments.ENV: str(path)})) == [1, 1, 3, 24]
    assert segments.read(path) == segments.Segment(24, 24, "layers.23")
    assert segments.read(path).text() == "segment 24/24 (layers.23)"
    assert [p.name for p in tmp_path.iterdir()] == ["segment.json"]  # no temporary file left beside it


def test_segment_without_the_variable_writes_nothing_and_costs_next_to_nothing(tmp_path):
    code = ("import time\nfrom fpdiff.runtime.progress import segment\nt = time.perf_counter()\n"
            "for i in range(100000):\n    segment(i, 100000, 'x')\nprint(time.perf_counter() - t)\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={k: v for k, v in os.environ.items() if k != segments.ENV})
    assert p.returncode == 0, p.stderr
    assert list(tmp_path.iterdir()) == []
    assert float(p.stdout) < 2.0  # a dict lookup each: about 0.02 s here; a file touched per call would be seconds


def test_read_of_a_missing_or_torn_file_is_none(tmp_path):
    assert segments.read(tmp_path / "none.json") is None
    (tmp_path / "torn.json").write_text('{"done": 3, "tot')
    assert segments.read(tmp_path / "torn.json") is None


def test_listening_names_the_file_workers_inherit_and_restores_the_environment():
    assert segments.worker_env() == {}
    with segments.listening() as path:
        assert segments.worker_env() == {segments.ENV: str(path)}
        from fpdiff.judging.run import worker_env
        assert worker_env()[segments.ENV] == str(path)
    assert segments.ENV not in os.environ and not path.parent.exists()
