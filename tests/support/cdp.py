"""A tiny Chrome DevTools Protocol client over --remote-debugging-pipe (stdlib only).

Chromium reads commands from fd 3 and writes replies/events to fd 4, each message a JSON
object followed by a NUL byte. `Browser` starts a headless chromium with a fresh profile,
`Browser.open(url)` loads a page and records console errors, exceptions and failed requests.

    with Browser() as b:
        page = b.open("file:///tmp/x/index.html", width=1280, height=800)
        page.errors, page.failed, page.requests          # what went wrong / what was fetched
        page.evaluate("document.title")
        page.screenshot("shot.png", full_page=True)
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]


def find_chromium() -> str | None:
    if os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    return shutil.which("chromium") or shutil.which("chromium-browser")


class CDPError(RuntimeError):
    pass


class Browser:
    def __init__(self, executable: str | None = None, timeout: float = 30.0):
        self.executable = executable or find_chromium()
        if not self.executable:
            raise FileNotFoundError("chromium not found")
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="posenc-cdp-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # move the child's ends above 10 so dup2 onto 3 / 4 cannot clobber them
        hi_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
        hi_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
        os.close(to_chrome_r)
        os.close(from_chrome_w)

        def child_fds():
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.proc = subprocess.Popen(
            [self.executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(3, 4, hi_r, hi_w),
            preexec_fn=child_fds,
        )
        os.close(hi_r)
        os.close(hi_w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict] = []

    # ---------------------------------------------------------------------- transport
    def _send(self, msg: dict) -> None:
        data = json.dumps(msg).encode() + b"\0"
        while data:
            n = os.write(self._to_chrome, data)
            data = data[n:]

    def _recv(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply from chromium in time")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                err = (
                    self.proc.stderr.read().decode(errors="replace")[-2000:]
                    if self.proc.stderr
                    else ""
                )
                raise CDPError(f"chromium closed the pipe; stderr: {err}")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send one command and wait for its reply; events that arrive meanwhile are kept."""
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._send(msg)
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._recv(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise CDPError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, session: str | None = None, timeout: float | None = None):
        """Wait for an event (already received or new) of this method."""
        deadline = time.monotonic() + (timeout or self.timeout)
        seen = 0
        while True:
            for ev in self.events[seen:]:
                if ev.get("method") == method and (
                    session is None or ev.get("sessionId") == session
                ):
                    return ev
            seen = len(self.events)
            self.events.append(self._recv(deadline))

    def drain(self, seconds: float = 0.3) -> None:
        """Collect events for a short while (late console messages, image loads)."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.events.append(self._recv(deadline))
        except TimeoutError:
            pass

    # ---------------------------------------------------------------------- pages
    def open(self, url: str, *, width: int = 1280, height: int = 800) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        start = len(self.events)
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_for("Page.loadEventFired", session=session)
        self.drain()
        return Page(self, session, self.events, start)

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                with contextlib.suppress(CDPError, TimeoutError, OSError):
                    self.send("Browser.close")
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            for fd in (self._to_chrome, self._from_chrome):
                with contextlib.suppress(OSError):
                    os.close(fd)
            if self.proc.stderr:
                self.proc.stderr.close()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Page:
    def __init__(self, browser: Browser, session: str, events: list[dict], start: int):
        self.browser, self.session, self._events, self._start = browser, session, events, start

    def _mine(self):
        return [e for e in self._events[self._start :] if e.get("sessionId") == self.session]

    @property
    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries."""
        out = []
        for e in self._mine():
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console: " + " ".join(str(a.get("value", a)) for a in p["args"]))
            elif m == "Runtime.exceptionThrown":
                out.append("exception: " + p["exceptionDetails"].get("text", ""))
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        return out

    @property
    def failed(self) -> list[str]:
        """Requests that failed or answered with an HTTP error."""
        urls = {
            e["params"]["requestId"]: e["params"]["request"]["url"]
            for e in self._mine()
            if e.get("method") == "Network.requestWillBeSent"
        }
        out = []
        for e in self._mine():
            m, p = e.get("method"), e.get("params", {})
            if m == "Network.loadingFailed":
                out.append(f"{urls.get(p['requestId'], '?')}: {p.get('errorText')}")
            elif m == "Network.responseReceived" and p["response"].get("status", 0) >= 400:
                out.append(f"{p['response']['url']}: HTTP {p['response']['status']}")
        return out

    @property
    def requests(self) -> list[str]:
        return [
            e["params"]["request"]["url"]
            for e in self._mine()
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def evaluate(self, expression: str):
        r = self.browser.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=self.session,
        )
        if "exceptionDetails" in r:
            raise CDPError(f"evaluate: {r['exceptionDetails'].get('text')}")
        return r["result"].get("value")

    def screenshot(self, path: str | Path, *, full_page: bool = False) -> Path:
        params: dict = {"format": "png"}
        if full_page:
            w, h = self.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
            )
            params.update(
                captureBeyondViewport=True,
                clip={"x": 0, "y": 0, "width": w, "height": h, "scale": 1},
            )
        data = self.browser.send("Page.captureScreenshot", params, session=self.session)["data"]
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path
