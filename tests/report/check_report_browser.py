#!/usr/bin/env python3
"""Checks a kiln HTML report in a real browser: headless Chromium, driven over the DevTools
protocol on loopback (python3-websocket), opens the page from disk at 1280 px of window and checks
what a reader would meet:

  * no console error, no uncaught exception, no error in the browser's log;
  * every chart (svg.plot) draws as many circle.pt as its data-points says, and as many as the
    caller expects (--expect: JSON of plot name -> count; every plot on the page must be named);
  * nothing is wider than the window (no horizontal scroll bar);
  * every piece of text is large enough after layout: 11 px for HTML text, 10 px for SVG text as
    drawn (its font size times the chart's scale, rendered width / viewBox width);

then saves a full-page screenshot (--screenshot). Exit code 0 when every check passes, 1 when one
fails (each failure is printed), 2 when the browser could not be started or driven. Every wait is
bounded, and Chromium (with every process it started) is stopped on the way out.

  check_report_browser.py --html report.html --expect '{"farm/workers": 28}' --screenshot s.png
"""

import argparse
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

STEP_TIMEOUT_S = 30
WINDOW = (1280, 900)
MIN_HTML_PX = 11
MIN_SVG_PX = 10

try:
    import websocket  # Debian's python3-websocket (websocket-client)
except ImportError:
    print("check_report_browser: the python3 'websocket' module is missing "
          "(apt-get install python3-websocket)", file=sys.stderr)
    sys.exit(2)


class SetupError(Exception):
    """The browser could not be started or driven: not a verdict on the page."""


# What the page looks like after layout, measured in the page. Text inside <title> is a tooltip
# (not drawn), so it is left out.
MEASURE_JS = r"""
(() => {
  const scaleOf = (svg) => {
    const vb = svg.viewBox && svg.viewBox.baseVal;
    return vb && vb.width ? svg.getBoundingClientRect().width / vb.width : 1;
  };
  const out = {
    plots: [], scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth, texts: 0, small: [], minHtml: null, minSvg: null,
  };
  for (const svg of document.querySelectorAll('svg.plot')) {
    out.plots.push({
      name: svg.getAttribute('data-plot'),
      declared: Number(svg.getAttribute('data-points')),
      circles: svg.querySelectorAll('circle.pt').length,
      scale: scaleOf(svg),
    });
  }
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = new Set();
  while (walker.nextNode()) {
    const node = walker.currentNode;
    const el = node.parentElement;
    if (!node.nodeValue.trim() || !el || seen.has(el) || el.closest('title')) continue;
    seen.add(el);
    const style = getComputedStyle(el);
    if (style.display === 'none' || style.visibility === 'hidden') continue;
    const svg = el.closest('svg');
    const px = parseFloat(style.fontSize) * (svg ? scaleOf(svg) : 1);
    const limit = svg ? %(svg)d : %(html)d;
    out.texts++;
    if (svg) out.minSvg = out.minSvg === null ? px : Math.min(out.minSvg, px);
    else out.minHtml = out.minHtml === null ? px : Math.min(out.minHtml, px);
    if (px < limit) {
      out.small.push({text: node.nodeValue.trim().slice(0, 40), px: px, tag: el.tagName,
                      limit: limit});
    }
  }
  return out;
})()
""" % {"svg": MIN_SVG_PX, "html": MIN_HTML_PX}


class Browser:
    """One headless Chromium and a DevTools connection to its page."""

    def __init__(self, binary):
        self.profile = tempfile.mkdtemp(prefix="kiln-report-chromium-")
        self.log_path = os.path.join(self.profile, "stderr.log")
        self.proc = None
        self.ws = None
        self.next_id = 0
        self.events = []
        # Loopback only: no proxy may stand between us and the browser.
        for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy",
                  "ALL_PROXY"):
            os.environ.pop(k, None)
        os.environ["no_proxy"] = os.environ["NO_PROXY"] = "127.0.0.1,localhost"
        # Its own session (process group), so that stop() reaches the renderer and GPU processes
        # it forks as well.
        try:
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    [binary, "--headless=new", "--no-sandbox", "--disable-gpu",
                     "--remote-debugging-port=0", "--user-data-dir=" + self.profile,
                     "--window-size=%d,%d" % WINDOW, "--no-first-run",
                     "--no-default-browser-check", "--disable-extensions",
                     "--disable-background-networking", "--disable-component-update",
                     "--disable-sync", "--disable-dev-shm-usage", "about:blank"],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                    start_new_session=True)
        except OSError:
            shutil.rmtree(self.profile, ignore_errors=True)
            raise

    def stop(self):
        if self.ws is not None:
            try:
                self.ws.close()
            except Exception:  # closing a broken connection: nothing left to do
                pass
        if self.proc is not None and self.proc.poll() is None:
            for sig, wait_s in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
        shutil.rmtree(self.profile, ignore_errors=True)

    def log_tail(self):
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return ""
        return "\n".join(l for l in lines[-15:] if "dbus" not in l)

    def connect(self):
        deadline = time.monotonic() + STEP_TIMEOUT_S
        port = None
        while port is None:
            if self.proc.poll() is not None:
                raise SetupError("chromium exited with code %d before DevTools listened:\n%s"
                                 % (self.proc.returncode, self.log_tail()))
            if time.monotonic() > deadline:
                raise SetupError("chromium did not print 'DevTools listening on' within %d s:\n%s"
                                 % (STEP_TIMEOUT_S, self.log_tail()))
            with open(self.log_path, "rb") as f:
                m = re.search(rb"DevTools listening on ws://127\.0\.0\.1:(\d+)/", f.read())
            if m:
                port = int(m.group(1))
            else:
                time.sleep(0.1)
        # The page target: listed by the HTTP endpoint once the first tab exists.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        page = None
        while page is None:
            try:
                with opener.open("http://127.0.0.1:%d/json" % port, timeout=5) as r:
                    targets = json.load(r)
                page = next((t for t in targets if t.get("type") == "page"), None)
            except OSError:
                page = None
            if page is None:
                if time.monotonic() > deadline:
                    raise SetupError("no page target on DevTools port %d within %d s"
                                     % (port, STEP_TIMEOUT_S))
                time.sleep(0.2)
        # No Origin header: Chromium refuses DevTools connections from origins it was not told of.
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=5,
                                              suppress_origin=True)

    def _receive(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        self.ws.settimeout(min(remaining, 2))
        try:
            msg = json.loads(self.ws.recv())
        except websocket.WebSocketTimeoutException:
            return {}
        if "method" in msg:
            self.events.append(msg)
        return msg

    def call(self, method, params=None, timeout_s=STEP_TIMEOUT_S):
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout_s
        while True:
            msg = self._receive(deadline)
            if msg is None:
                raise SetupError("%s: no answer within %d s" % (method, timeout_s))
            if msg.get("id") == mid:
                if "error" in msg:
                    raise SetupError("%s failed: %s" % (method, msg["error"]))
                return msg.get("result", {})

    def wait_event(self, name, timeout_s=STEP_TIMEOUT_S):
        deadline = time.monotonic() + timeout_s
        while not any(e["method"] == name for e in self.events):
            if self._receive(deadline) is None:
                raise SetupError("no %s within %d s" % (name, timeout_s))

    def evaluate(self, expression, await_promise=False):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": await_promise})
        if "exceptionDetails" in r:
            raise SetupError("evaluating in the page failed: %s" % r["exceptionDetails"])
        return r["result"].get("value")

    def errors(self):
        """The console errors, uncaught exceptions and error log entries seen so far."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.%s: %s" % (p.get("type"), " ".join(
                    str(a.get("value", a.get("description", ""))) for a in p.get("args", []))))
            elif e["method"] == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append("uncaught exception: %s" % d.get("exception", {}).get(
                    "description", d.get("text", "")))
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                entry = p["entry"]
                out.append("browser log error (%s): %s %s" % (entry.get("source"),
                                                              entry.get("text"),
                                                              entry.get("url", "")))
        return out


def check(browser, html, expected, screenshot):
    """Returns the list of failed checks (empty when the page passes) and a one-line summary."""
    browser.connect()
    for domain in ("Page", "Runtime", "Log"):
        browser.call(domain + ".enable")
    nav = browser.call("Page.navigate", {"url": "file://" + os.path.abspath(html)})
    if nav.get("errorText"):
        raise SetupError("opening %s failed: %s" % (html, nav["errorText"]))
    browser.wait_event("Page.loadEventFired")
    browser.evaluate("document.fonts.ready.then(() => true)", await_promise=True)
    m = browser.evaluate(MEASURE_JS)

    failures = list(browser.errors())
    seen = {}
    for p in m["plots"]:
        name = p["name"]
        if name in seen:
            failures.append("plot %r appears twice" % name)
        seen[name] = p
        if p["circles"] != p["declared"]:
            failures.append("plot %r: %d circle.pt drawn but data-points says %d"
                            % (name, p["circles"], p["declared"]))
        if name not in expected:
            failures.append("plot %r is on the page but not expected" % name)
        elif p["circles"] != expected[name]:
            failures.append("plot %r: %d points drawn, %d expected"
                            % (name, p["circles"], expected[name]))
    for name in expected:
        if name not in seen:
            failures.append("plot %r expected but not on the page" % name)
    if m["scrollWidth"] > WINDOW[0]:
        failures.append("the page is %d px wide at a %d px window: it scrolls sideways"
                        % (m["scrollWidth"], WINDOW[0]))
    for s in m["small"][:20]:
        failures.append("text too small: %r (%s) is %.1f px, below %d px"
                        % (s["text"], s["tag"], s["px"], s["limit"]))
    if len(m["small"]) > 20:
        failures.append("... and %d more texts too small" % (len(m["small"]) - 20))

    # The whole page, not just the window.
    metrics = browser.call("Page.getLayoutMetrics")
    size = metrics.get("cssContentSize") or metrics["contentSize"]
    width, height = int(size["width"]), int(size["height"])
    shot = browser.call("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}})
    os.makedirs(os.path.dirname(os.path.abspath(screenshot)), exist_ok=True)
    with open(screenshot, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    # Anything logged while the checks ran counts too.
    failures.extend(e for e in browser.errors() if e not in failures)

    summary = ("%d plots, page %d px wide in a %d px window (innerWidth %d), %d texts, smallest "
               "HTML text %s px, smallest SVG text %s px as drawn; screenshot %s (%dx%d)" % (
                   len(m["plots"]), m["scrollWidth"], WINDOW[0], m["innerWidth"], m["texts"],
                   "%.1f" % m["minHtml"] if m["minHtml"] is not None else "-",
                   "%.1f" % m["minSvg"] if m["minSvg"] is not None else "-",
                   screenshot, width, height))
    return failures, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--html", required=True, help="the report file to open")
    ap.add_argument("--expect", required=True,
                    help="JSON object of plot name -> point count, or @FILE holding one")
    ap.add_argument("--screenshot", required=True, help="where to save the full-page PNG")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "chromium",
                    help="the Chromium binary (default: chromium on PATH)")
    args = ap.parse_args()
    try:
        text = args.expect
        if text.startswith("@"):
            with open(text[1:]) as f:
                text = f.read()
        expected = json.loads(text)
    except (OSError, ValueError) as e:
        print("check_report_browser: --expect is not a JSON object of counts: %s" % e,
              file=sys.stderr)
        return 2
    if not os.path.isfile(args.html):
        print("check_report_browser: no report at %s" % args.html, file=sys.stderr)
        return 2

    browser = None
    try:
        browser = Browser(args.chromium)
        failures, summary = check(browser, args.html, expected, args.screenshot)
    except (SetupError, OSError, websocket.WebSocketException) as e:
        print("check_report_browser: could not check the page: %s" % e, file=sys.stderr)
        return 2
    finally:
        if browser is not None:
            browser.stop()
    if failures:
        print("check_report_browser: %s FAILED:" % args.html)
        for f in failures:
            print("  " + f)
        print("(" + summary + ")")
        return 1
    print("check_report_browser: %s passed: %s" % (args.html, summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
