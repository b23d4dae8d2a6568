"""Open a `simloop report` page in headless Chromium: check it and take a screenshot.

Used by ``scripts/check-report`` and ``tests/evaluate/test_report_browser.py``.  Chromium is driven
over the DevTools protocol (a websocket on 127.0.0.1, a port Chromium picks itself), so
the check sees what a reader sees: which sections rendered, whether every plot decoded,
and every console message, network failure or exception the page caused.  The report
itself has no script; the only JavaScript is this inspector's, evaluated from outside.

    python scripts/report_browser.py RUN_DIR [RUN_DIR ...] [--png FILE] [--html FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0"]
WIDTH = 1280
MAX_SHOT_HEIGHT = 7000  # px: a long report's screenshot stops here (the dialogues go on)

# What the inspector reads off the page (run in the page by Runtime.evaluate).
_PROBE = """JSON.stringify({
  title: document.title,
  sections: [...document.querySelectorAll('section[id]')].map(s => s.id),
  images: [...document.images].map(i => ({alt: i.alt, ok: i.complete && i.naturalWidth > 0,
                                          width: i.naturalWidth, height: i.naturalHeight})),
  dialogues: document.querySelectorAll('details.dlg').length,
  height: document.documentElement.scrollHeight})"""


@dataclass
class Inspection:
    title: str = ""
    sections: list[str] = field(default_factory=list)
    images: list[dict] = field(default_factory=list)
    dialogues: int = 0
    height: int = 0
    console: list[str] = field(default_factory=list)  # errors and warnings, one line each

    @property
    def broken_images(self) -> list[str]:
        return [i["alt"] for i in self.images if not i["ok"]]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class _Tab:
    """One page's DevTools session: numbered commands, events collected as they come."""

    def __init__(self, ws):
        self.ws, self.ids, self.events = ws, itertools.count(1), []

    async def call(self, method: str, **params):
        n = next(self.ids)
        await self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        while True:
            msg = json.loads(await self.ws.recv())
            if msg.get("id") == n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error'].get('message')}")
                return msg.get("result", {})
            self.events.append(msg)

    async def wait_for(self, event: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == event for e in self.events):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {event} within {timeout:.0f} s")
            self.events.append(json.loads(await asyncio.wait_for(self.ws.recv(), left)))


def _console_lines(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        p = e.get("params", {})
        if e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
            said = " ".join(str(a.get("value", a.get("description"))) for a in p["args"])
            out.append(f"console.{p['type']}: {said}")
        elif e.get("method") == "Runtime.exceptionThrown":
            out.append("exception: " + p["exceptionDetails"].get("text", "?"))
        elif e.get("method") == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
            out.append(f"{p['entry']['source']} {p['entry']['level']}: {p['entry']['text']}")
    return out


def _devtools_port(profile: Path, proc: subprocess.Popen, timeout: float = 30.0) -> int:
    marker = profile / "DevToolsActivePort"  # Chromium writes the port it chose here
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            said = proc.stderr.read() if proc.stderr is not None else ""
            raise RuntimeError(f"chromium exited with {proc.returncode}: {said[-500:]}")
        if marker.exists() and marker.read_text().strip():
            return int(marker.read_text().split()[0])
        time.sleep(0.1)
    raise TimeoutError("chromium did not open its DevTools port")


async def _inspect(port: int, page: Path, png: Path | None, open_first: bool) -> Inspection:
    import websockets

    targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
    ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")
    async with websockets.connect(ws_url, max_size=None) as ws:
        tab = _Tab(ws)
        for domain in ("Runtime", "Log", "Page"):
            await tab.call(f"{domain}.enable")
        await tab.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=900, deviceScaleFactor=1, mobile=False)
        await tab.call("Page.navigate", url=page.resolve().as_uri())
        await tab.wait_for("Page.loadEventFired")
        probed = await tab.call("Runtime.evaluate", expression=_PROBE, returnByValue=True)
        found = json.loads(probed["result"]["value"])
        if png is not None:
            await _screenshot(tab, png, open_first)
        return Inspection(**found, console=_console_lines(tab.events))


async def _screenshot(tab: _Tab, png: Path, open_first: bool) -> None:
    if open_first:  # show a reader what a dialogue looks like opened
        await tab.call("Runtime.evaluate", expression="document.querySelector('details.dlg')?.setAttribute('open', '')")
    metrics = await tab.call("Page.getLayoutMetrics")
    height = min(int(metrics["cssContentSize"]["height"]), MAX_SHOT_HEIGHT)
    shot = await tab.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1})
    png.write_bytes(base64.b64decode(shot["data"]))


def inspect_page(page: Path, png: Path | None = None, open_first: bool = True, timeout: float = 90.0) -> Inspection:
    """Load ``page`` in a fresh headless Chromium; the screenshot goes to ``png``."""
    binary = chromium()
    if binary is None:
        raise FileNotFoundError("chromium is not installed (Debian: apt-get install -y chromium)")
    profile = Path(tempfile.mkdtemp(prefix="simloop-chromium-"))
    proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port = _devtools_port(profile, proc)
        return asyncio.run(asyncio.wait_for(_inspect(port, page, png, open_first), timeout))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


def problems(found: Inspection, want_sections: list[str]) -> list[str]:
    """Everything wrong with a rendered report, one line each."""
    out = [f"section '{s}' did not render" for s in want_sections if s not in found.sections]
    out += [f"plot '{alt}' did not decode" for alt in found.broken_images]
    out += found.console
    if not found.images:
        out.append("no plot rendered")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="render simloop report(s) in headless Chromium, check, screenshot")
    ap.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    ap.add_argument("--html", type=Path, help="report file (default RUN_DIR/report.html of the first run)")
    ap.add_argument("--png", type=Path, help="screenshot (default: next to the report, .png)")
    a = ap.parse_args(argv)
    from simloop.cli import main as simloop

    html = a.html or a.run_dirs[0] / "report.html"
    if simloop(["report", *map(str, a.run_dirs), "--out", str(html)]) != 0:
        return 2
    png = a.png or html.with_suffix(".png")
    found = inspect_page(html, png)
    print(f"{html}: {len(found.sections)} sections ({', '.join(found.sections)}), {len(found.images)} plots, "
          f"{found.dialogues} dialogues, {found.height} px tall")
    bad = problems(found, ["runs", "compare", "stops", "plots", "dialogues"])
    for line in bad:
        print(f"problem: {line}", file=sys.stderr)
    print(png)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
