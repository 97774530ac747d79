"""Headless Chromium for the report tests (the HTML page, the notebook fragment): Debian's, installed with apt-get
when missing; a test that needs it and cannot have it is skipped saying why."""
import shutil
import subprocess
from pathlib import Path

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr"]


def chromium() -> str:
    """The browser's executable, installed when missing (a fresh machine's package lists may be empty)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        p = subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], capture_output=True, text=True)
        if p.returncode:
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True)
            p = subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], capture_output=True, text=True)
        exe = shutil.which("chromium")
        if exe is None:
            pytest.skip(f"no chromium and apt-get could not install it: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return exe


def dom(exe: str, page: Path, width: int, height: int) -> subprocess.CompletedProcess:
    """The page's DOM after its load (its scripts run), and the browser's log on stderr."""
    return subprocess.run([exe, *FLAGS, f"--window-size={width},{height}", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)


def screenshot(exe: str, page: Path, shot: Path, width: int, height: int) -> None:
    """A PNG of the page as a window of that size shows it."""
    subprocess.run([exe, *FLAGS, f"--window-size={width},{height}", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, text=True, timeout=120)


def console_errors(log: str) -> list[str]:
    """The lines of the browser's log that say a page's console was written to or a script failed."""
    return [line for line in log.splitlines() if "CONSOLE" in line or "Uncaught" in line]
